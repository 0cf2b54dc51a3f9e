// Text helpers for the floor and every module above it (package access): the one home of receiptd's whitespace
// predicates, hex digits and path text. HTTP1Server and JSONText keep their own few lines: they depend on no
// receiptd module, and an extra module for a hex digit would cost more than it saves.

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

    /// The text without leading and trailing spaces as Foundation's `CharacterSet.whitespaces` counts them: Unicode
    /// space separators (Zs) and tab, no line breaks.
    package func trimmedOfSpaces() -> String {
        let isSpace = { (scalar: Unicode.Scalar) in scalar == "\t" || scalar.properties.generalCategory == .spaceSeparator }
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !isSpace($0) })!
        return String(self[first..<scalars.index(after: last)])
    }
}

// File paths as `NSString` composes them, which FoundationEssentials (Foundation without ICU) does not have. Plain
// text, unlike `URL(fileURLWithPath:)`, which would make relative paths absolute in every message that prints one.
extension String {
    /// `self/component`: a trailing slash is not doubled, and an empty path gives the component alone.
    package func appendingPathComponent(_ component: String) -> String {
        if isEmpty { return component }
        return hasSuffix("/") ? self + component : self + "/" + component
    }

    /// The path without its last component: `a/b.json` gives `a`, `/b.json` gives `/`, `b.json` gives the empty path.
    package var deletingLastPathComponent: String {
        var path = Substring(self)
        while path.count > 1, path.hasSuffix("/") { path = path.dropLast() }
        guard let slash = path.lastIndex(of: "/") else { return "" }
        var parent = path[..<slash]
        while parent.hasSuffix("/") { parent = parent.dropLast() }
        return parent.isEmpty ? "/" : String(parent)
    }
}

extension UInt8 {
    /// Space, tab, LF or CR: the whitespace around pasted base64, a JWS or JSON (RFC 8259 §2).
    @inlinable
    package var isASCIIWhitespace: Bool { self == 0x20 || self == 0x09 || self == 0x0A || self == 0x0D }

    /// The value of an ASCII hex digit, either case.
    @inlinable
    package var hexDigitValue: UInt8? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): self - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): self - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): self - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}

extension Array<UInt8> {
    /// The bytes two hex digits each (either case) spell, or nil for an odd count or a character that is no hex digit.
    package init?(hexDigits text: some Collection<UInt8>) {
        guard text.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count / 2)
        var high: UInt8?
        for character in text {
            guard let nibble = character.hexDigitValue else { return nil }
            if let first = high {
                bytes.append(first << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        self = bytes
    }
}

extension Collection<UInt8> {
    /// Two hex digits per byte, lowercase unless asked.
    package func hexEncoded(uppercase: Bool = false) -> String {
        let digits = Array((uppercase ? "0123456789ABCDEF" : "0123456789abcdef").utf8)
        var text: [UInt8] = []
        text.reserveCapacity(count * 2)
        for byte in self { text += [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]] }
        return String(decoding: text, as: UTF8.self)
    }
}
