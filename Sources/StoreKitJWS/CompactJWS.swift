internal import JSONText
internal import ReceiptEngine
internal import CryptoFloor

/// The protected header of a StoreKit 2 JWS, as far as verification reads it.
struct JWSHeader {
    /// Xcode's StoreKit testing names its one self-signed certificate so.
    static let xcodeKeyID = "Apple_Xcode_Key"

    /// `x5c` exactly as received (standard base64 text): the chain cache compares these, so a known chain is
    /// found without decoding a certificate.
    let certificates: [String]
    let isXcode: Bool
}

/// A compact JWS split and decoded, not yet trusted.
struct CompactJWS {
    /// JSON nesting beyond this is refused: Apple's payloads nest three deep, and deep nesting only costs stack.
    static let maximumJSONDepth = 16

    /// What the header told: decoded, or the signer of an identical header trusted before.
    enum Header {
        case decoded(JWSHeader)
        /// The header segment is, byte for byte, one whose chain was already decided trusted: decoding it again
        /// (kilobytes of base64 certificates inside base64url) could only give the same certificates.
        case known(JWSSigner)
    }

    /// The exact ASCII of `header.payload` as received: what the signature covers (RFC 7515 §5.2). A slice of the
    /// text, not a copy: it is most of the JWS (kilobytes of nested JWS in a notification's payload).
    let signingInput: ArraySlice<UInt8>
    /// The header's base64url text, as received (a prefix of `signingInput`).
    let headerSegment: ArraySlice<UInt8>
    let header: Header
    let payload: JSONValue
    /// The payload's JSON text, when it is exactly what `payload.serialized()` writes.
    let payloadText: [UInt8]?
    let signature: [UInt8]

    /// Splits and decodes `text` after trimming surrounding whitespace (a JWS pasted from a log). Every refusal is
    /// `malformed_jws` with a `detail` naming the part that failed, and a message that says what was seen.
    /// - Parameter knownSigner: the trusted signer of a header segment seen before byte for byte, if any; such a
    ///   header is not decoded.
    init(
        parsing text: some Collection<UInt8>, knownSigner: (ArraySlice<UInt8>) -> JWSSigner? = { _ in nil }
    ) throws(ValidationError) {
        let bytes = Array(text)
        var start = 0
        var end = bytes.count
        while start < end, bytes[start].isASCIIWhitespace { start += 1 }
        while end > start, bytes[end - 1].isASCIIWhitespace { end -= 1 }
        guard start < end else { throw Self.malformed(.empty, "the JWS is empty") }

        var dots: [Int] = []
        bytes.withUnsafeBytes { bytes in
            // Eight bytes at a time: a word holds a dot when `word ^ "........"` has a zero byte (the classic
            // has-zero-byte test), and only such words are looked at byte by byte.
            let dotsWord: UInt64 = 0x2E2E_2E2E_2E2E_2E2E
            var index = start
            while index + 8 <= end {
                let word = bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self) ^ dotsWord
                if (word &- 0x0101_0101_0101_0101) & ~word & 0x8080_8080_8080_8080 != 0 {
                    for offset in index..<(index + 8) where bytes[offset] == UInt8(ascii: ".") { dots.append(offset) }
                }
                index += 8
            }
            for offset in index..<end where bytes[offset] == UInt8(ascii: ".") { dots.append(offset) }
        }
        guard dots.count == 2 else {
            throw Self.malformed(
                .segmentCount,
                "a compact JWS has three segments (header.payload.signature) separated by dots; this has "
                    + "\(dots.count + 1)" + (dots.count < 2 ? " (cut short?)" : ""))
        }
        let headerText = bytes[start..<dots[0]]
        let payloadSegment = bytes[(dots[0] + 1)..<dots[1]]
        let signatureText = bytes[(dots[1] + 1)..<end]

        if let signer = knownSigner(headerText) {
            header = .known(signer)
        } else {
            guard let headerBytes = Base64.decode(headerText, alphabet: .url), !headerBytes.isEmpty else {
                throw Self.malformed(
                    .headerNotBase64URL, "segment 1 of 3, the header, is not base64url without padding")
            }
            header = .decoded(try Self.header(headerBytes))
        }

        guard let signature = Base64.decode(signatureText, alphabet: .url) else {
            throw Self.malformed(
                .signatureNotBase64URL, "segment 3 of 3, the signature, is not base64url without padding")
        }
        guard signature.count == 64 else {
            throw Self.malformed(
                .signatureLength,
                "segment 3 of 3, the signature, is \(signature.count) bytes; an ES256 signature is 64 (r‖s)")
        }
        self.signature = signature

        guard let payloadBytes = Base64.decode(payloadSegment, alphabet: .url), !payloadBytes.isEmpty else {
            throw Self.malformed(.payloadNotBase64URL, "segment 2 of 3, the payload, is not base64url without padding")
        }
        (payload, self.payloadText) = try Self.object(payloadBytes, "payload")
        signingInput = bytes[start..<dots[1]]
        headerSegment = bytes[start..<dots[0]]
    }

    static func malformed(_ detail: ValidationError.Detail, _ message: String) -> ValidationError {
        ValidationError(.malformedJWS, message, detail: detail)
    }

    /// A JSON object whose member names are unique: RFC 7515 §4 lets a parser either refuse duplicates or take the
    /// last one, and `JSONValue` lookups take the first, so duplicates are refused rather than read differently
    /// from other verifiers.
    /// - Returns: the object, and `bytes` when they are what its `serialized()` writes.
    private static func object(
        _ bytes: [UInt8], _ name: String
    ) throws(ValidationError) -> (value: JSONValue, text: [UInt8]?) {
        let segment = name == "header" ? "segment 1 of 3, the header," : "segment 2 of 3, the payload,"
        let notJSON: ValidationError.Detail = name == "header" ? .headerNotJSON : .payloadNotJSON
        let value: JSONValue
        let isSerialized: Bool
        do {
            (value, isSerialized) = try JSONValue.parsingText(bytes, maximumDepth: maximumJSONDepth)
        } catch {
            throw malformed(notJSON, "\(segment) is not JSON: \(error.description)")
        }
        guard case .object(let members) = value else { throw malformed(notJSON, "\(segment) is not a JSON object") }
        if let repeated = repeatedName(in: members) {
            throw malformed(.duplicateMember, "the \(name) repeats the member \(repeated)")
        }
        return (value, isSerialized ? bytes : nil)
    }

    /// The first name a member repeats. Up to 64 members (every StoreKit payload), names are compared only when
    /// their lengths and first and last bytes agree, with no hashing; beyond, a set keeps the cost linear.
    static func repeatedName(in members: [(key: String, value: JSONValue)]) -> String? {
        guard members.count <= 64 else {
            var names = Set<String>(minimumCapacity: members.count)
            return members.first { !names.insert($0.key).inserted }?.key
        }
        return withUnsafeTemporaryAllocation(of: Int.self, capacity: members.count) { shapes in
            for (index, member) in members.enumerated() {
                let utf8 = member.key.utf8
                let shape = utf8.count << 16 | Int(utf8.first ?? 0) << 8 | Int(utf8.last ?? 0)
                for earlier in 0..<index where shapes[earlier] == shape && members[earlier].key == member.key {
                    return member.key
                }
                shapes[index] = shape
            }
            return nil
        }
    }

    private static func header(_ bytes: [UInt8]) throws(ValidationError) -> JWSHeader {
        let header = try object(bytes, "header").value
        guard header["crit"] == nil else {
            throw malformed(.headerInvalid, "the header lists critical extensions (crit), which StoreKit 2 never uses")
        }
        guard case .string(let algorithm)? = header["alg"] else {
            throw malformed(.headerInvalid, "the header has no alg")
        }
        guard algorithm == "ES256" else {
            throw malformed(.headerInvalid, "the header's alg is \(algorithm), not ES256")
        }
        guard case .array(let entries)? = header["x5c"] else {
            throw malformed(.headerInvalid, "the header has no x5c array")
        }
        var certificates: [String] = []
        for entry in entries {
            guard case .string(let text) = entry, !text.isEmpty else {
                throw malformed(.headerInvalid, "an x5c entry is not a base64 string")
            }
            certificates.append(text)
        }
        var isXcode = false
        if case .string(let keyID)? = header["kid"], keyID == JWSHeader.xcodeKeyID, certificates.count == 1 {
            isXcode = true
        } else if certificates.count != 3 {
            throw malformed(
                .headerInvalid, "x5c holds \(certificates.count) certificates, not 3 (leaf, intermediate, root)")
        }
        return JWSHeader(certificates: certificates, isXcode: isXcode)
    }
}
