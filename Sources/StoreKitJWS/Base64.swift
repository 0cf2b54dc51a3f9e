/// Strict base64 decoding (RFC 4648) for the two alphabets a JWS mixes: base64url without padding for its
/// segments (RFC 7515 §2) and standard base64 for `x5c` (RFC 7515 §4.1.6).
///
/// Strict means canonical: the unused bits of the last character must be zero. Lenient decoders map several texts
/// to one value, so a changed character in a signature could decode to the same bytes and still verify; here every
/// changed byte of a JWS changes what is verified.
enum Base64 {
    enum Alphabet {
        case standard, url
    }

    private static let invalid: UInt8 = 0xFF

    private static let standardTable: [UInt8] = table("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    private static let urlTable: [UInt8] = table("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

    private static func table(_ alphabet: String) -> [UInt8] {
        var table = [UInt8](repeating: invalid, count: 256)
        for (value, character) in alphabet.utf8.enumerated() { table[Int(character)] = UInt8(value) }
        return table
    }

    /// The decoded bytes, or nil for a character outside the alphabet, a length no encoding has, or non-zero
    /// trailing bits. `padded`: `=` padding is allowed (and then must be complete); base64url JWS segments have none.
    static func decode(_ text: some Collection<UInt8>, alphabet: Alphabet, padded: Bool = false) -> [UInt8]? {
        let table = alphabet == .standard ? standardTable : urlTable
        var characters = Array(text)
        if padded, characters.count % 4 == 0, characters.count > 0 {
            var padding = 0
            while padding < 2, characters.last == UInt8(ascii: "=") {
                characters.removeLast()
                padding += 1
            }
        }
        // One leftover character carries 6 bits, less than a byte: no encoder writes it.
        guard characters.count % 4 != 1 else { return nil }
        // Whole quanta four characters at a time (a JWS header is kilobytes of them), then the tail bit by bit. Every
        // request decodes its JWS's three segments here, so the loop reads and writes through buffers, unchecked
        // beyond the bounds computed once.
        let whole = characters.count / 4 * 4
        var isValid = true
        var output = [UInt8](unsafeUninitializedCapacity: whole / 4 * 3 + 2) { buffer, initialized in
            characters.withUnsafeBufferPointer { characters in
                table.withUnsafeBufferPointer { table in
                    var index = 0
                    var written = 0
                    while index < whole {
                        let a = table[Int(characters[index])], b = table[Int(characters[index + 1])]
                        let c = table[Int(characters[index + 2])], d = table[Int(characters[index + 3])]
                        // `invalid` has the top bits set, which no 6-bit value has.
                        guard (a | b | c | d) & 0xC0 == 0 else {
                            isValid = false
                            break
                        }
                        let quantum = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                        buffer[written] = UInt8(truncatingIfNeeded: quantum >> 16)
                        buffer[written + 1] = UInt8(truncatingIfNeeded: quantum >> 8)
                        buffer[written + 2] = UInt8(truncatingIfNeeded: quantum)
                        written += 3
                        index += 4
                    }
                    initialized = written
                }
            }
        }
        guard isValid else { return nil }
        var accumulator: UInt32 = 0
        var bits = 0
        for character in characters[whole...] {
            let value = table[Int(character)]
            guard value != invalid else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        guard accumulator == 0 else { return nil }
        return output
    }

    /// Encodes with `=` padding for the standard alphabet, without for base64url.
    static func encode(_ bytes: some Collection<UInt8>, alphabet: Alphabet) -> String {
        let characters = Array(
            (alphabet == .standard
                ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_").utf8)
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in bytes {
            accumulator = accumulator << 8 | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                output.append(characters[Int(accumulator >> UInt32(bits) & 0x3F)])
            }
            accumulator &= (1 << UInt32(bits)) - 1
        }
        if bits > 0 { output.append(characters[Int(accumulator << UInt32(6 - bits) & 0x3F)]) }
        if alphabet == .standard {
            while output.count % 4 != 0 { output.append(UInt8(ascii: "=")) }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
