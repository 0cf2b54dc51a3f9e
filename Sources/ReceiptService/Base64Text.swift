/// Base64 as clients actually send receipts: wrapped at 64 or 76 columns, with CRLFs, sometimes unpadded, sometimes
/// in the URL-safe alphabet. Anything else (a stray character, a bad length, data after padding) is refused rather
/// than skipped, so that a truncated upload reads as a bad request instead of a malformed receipt.
enum Base64Text {
    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() {
            table[Int(byte)] = UInt8(index)
        }
        table[Int(UInt8(ascii: "-"))] = 62
        table[Int(UInt8(ascii: "_"))] = 63
        return table
    }()

    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D || byte == 0x0B || byte == 0x0C
    }

    /// True when every byte could belong to base64 text. DER never qualifies: its second byte (a length) is 0x80 or
    /// above for any receipt.
    static func looksLikeBase64<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool {
        var sawDigit = false
        for byte in bytes {
            if decodeTable[Int(byte)] != 0xFF {
                sawDigit = true
            } else if byte != UInt8(ascii: "=") && !isWhitespace(byte) {
                return false
            }
        }
        return sawDigit
    }

    /// The decoded bytes, or nil when the text is not base64.
    static func decode<Bytes: Collection<UInt8>>(_ text: Bytes) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.count / 4 * 3)
        var accumulator: UInt32 = 0
        var digits = 0
        var padding = 0
        for byte in text {
            if isWhitespace(byte) { continue }
            if byte == UInt8(ascii: "=") {
                padding += 1
                continue
            }
            let value = decodeTable[Int(byte)]
            guard value != 0xFF, padding == 0 else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            digits += 1
            if digits == 4 {
                out.append(UInt8(truncatingIfNeeded: accumulator >> 16))
                out.append(UInt8(truncatingIfNeeded: accumulator >> 8))
                out.append(UInt8(truncatingIfNeeded: accumulator))
                accumulator = 0
                digits = 0
            }
        }
        switch digits {
        case 0:
            guard padding == 0 else { return nil }
        case 2:
            guard padding == 0 || padding == 2 else { return nil }
            out.append(UInt8(truncatingIfNeeded: accumulator >> 4))
        case 3:
            guard padding == 0 || padding == 1 else { return nil }
            out.append(UInt8(truncatingIfNeeded: accumulator >> 10))
            out.append(UInt8(truncatingIfNeeded: accumulator >> 2))
        default:
            return nil
        }
        return out
    }
}
