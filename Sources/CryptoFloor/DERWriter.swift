/// Minimal DER encoding, for building payloads (the forge) and re-assembling names; reading goes through OpenSSL.
package enum DERWriter {
    package static func element(tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [tag]
        out.reserveCapacity(content.count + 6)
        appendLength(content.count, to: &out)
        out += content
        return out
    }

    package static func appendLength(_ length: Int, to out: inout [UInt8]) {
        if length < 0x80 {
            out.append(UInt8(length))
            return
        }
        var bytes: [UInt8] = []
        var remaining = length
        while remaining > 0 {
            bytes.insert(UInt8(remaining & 0xFF), at: 0)
            remaining >>= 8
        }
        out.append(0x80 | UInt8(bytes.count))
        out += bytes
    }

    package static func sequence(_ content: [UInt8]) -> [UInt8] { element(tag: 0x30, content) }

    /// A DER SET OF: members sorted by their encodings (X.690 §11.6).
    package static func set(of members: [[UInt8]]) -> [UInt8] {
        element(tag: 0x31, members.sorted { $0.lexicographicallyPrecedes($1) }.flatMap { $0 })
    }

    package static func integer(_ value: Int64) -> [UInt8] {
        var bytes: [UInt8] = []
        var remaining = value
        repeat {
            bytes.insert(UInt8(truncatingIfNeeded: remaining), at: 0)
            remaining >>= 8
        } while remaining != 0 && remaining != -1
        // Keep the sign bit right: a positive value whose top bit is set needs a leading zero, and vice versa.
        if value >= 0, bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        if value < 0, bytes[0] & 0x80 == 0 { bytes.insert(0xFF, at: 0) }
        return element(tag: 0x02, bytes)
    }

    package static func octetString(_ bytes: [UInt8]) -> [UInt8] { element(tag: 0x04, bytes) }
    package static func utf8String(_ text: String) -> [UInt8] { element(tag: 0x0C, Array(text.utf8)) }
    package static func ia5String(_ text: String) -> [UInt8] { element(tag: 0x16, Array(text.utf8)) }
}
