// Text helpers for the engine and the modules above it (package access). HTTP1Server and JSONText keep their own
// few lines: they sit beside the engine, not above it, and an extra module for a hex digit would cost more than it
// saves.

extension StringProtocol {
    /// The text without leading and trailing characters from `set`, which holds ASCII only.
    ///
    /// Compared as Unicode scalars, not `Character`s: CRLF is one `Character`, so a `Character` set holding CR and LF
    /// would leave a trailing CRLF in place.
    package func trimmed(of set: String) -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !set.unicodeScalars.contains($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !set.unicodeScalars.contains($0) })!
        return String(self[first..<scalars.index(after: last)])
    }

    /// The text without trailing characters from `set`, which holds ASCII only.
    package func trimmedAtEnd(of set: String) -> String {
        let scalars = unicodeScalars
        guard let last = scalars.lastIndex(where: { !set.unicodeScalars.contains($0) }) else { return "" }
        return String(self[..<scalars.index(after: last)])
    }
}

extension UInt8 {
    /// The value of an ASCII hex digit, either case.
    package var hexDigitValue: UInt8? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): self - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): self - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): self - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
