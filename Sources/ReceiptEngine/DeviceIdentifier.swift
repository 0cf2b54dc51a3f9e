internal import CryptoFloor

/// The identifier a receipt's SHA-1 hash is bound to: iOS's identifierForVendor (a UUID, 16 bytes) or a Mac's
/// primary MAC address (6 bytes).
public struct DeviceIdentifier: Sendable, Hashable {
    public let bytes: [UInt8]

    /// Accepts `XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX` (any case) or `aa:bb:cc:dd:ee:ff` (`-` separators too).
    /// Anything else is nil: a caller error, not a verdict on the receipt.
    public init?(_ text: String) {
        let trimmed = text.trimmed(of: " \t\n\r")
        let utf8 = Array(trimmed.utf8)
        if utf8.count == 36 {
            guard [8, 13, 18, 23].allSatisfy({ utf8[$0] == UInt8(ascii: "-") }) else { return nil }
            let hex = utf8.enumerated().filter { ![8, 13, 18, 23].contains($0.offset) }.map(\.element)
            guard let bytes = [UInt8](hexDigits: hex), bytes.count == 16 else { return nil }
            self.bytes = bytes
        } else if utf8.count == 17 {
            let separator = utf8[2]
            guard separator == UInt8(ascii: ":") || separator == UInt8(ascii: "-"),
                stride(from: 2, to: 17, by: 3).allSatisfy({ utf8[$0] == separator })
            else { return nil }
            let hex = utf8.enumerated().filter { $0.offset % 3 != 2 }.map(\.element)
            guard let bytes = [UInt8](hexDigits: hex), bytes.count == 6 else { return nil }
            self.bytes = bytes
        } else {
            return nil
        }
    }

    public init?(bytes: [UInt8]) {
        guard bytes.count == 16 || bytes.count == 6 else { return nil }
        self.bytes = bytes
    }
}

extension DeviceIdentifier {
    /// `XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX` for a 16-byte id, `aa:bb:cc:dd:ee:ff` for a MAC address.
    public var formatted: String {
        let hex = bytes.map { [$0].hexEncoded(uppercase: bytes.count == 16) }
        guard bytes.count == 16 else { return hex.joined(separator: ":") }
        let joined = hex.joined()
        var groups: [Substring] = []
        var start = joined.startIndex
        for length in [8, 4, 4, 4, 12] {
            let end = joined.index(start, offsetBy: length)
            groups.append(joined[start..<end])
            start = end
        }
        return groups.joined(separator: "-")
    }
}
