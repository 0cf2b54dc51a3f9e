internal import COpenSSL

/// One BER/DER element located in a byte array: where its header, content and end are.
struct ASN1Element {
    var tag: Int32
    var tagClass: Int32
    var isConstructed: Bool
    var isIndefinite: Bool
    var headerStart: Int
    var contentStart: Int
    /// End of the content, before the end-of-contents octets of an indefinite-length element.
    var contentEnd: Int
    /// First byte after the element.
    var end: Int

    var isUniversal: Bool { tagClass == V_ASN1_UNIVERSAL }
    var isContextSpecific: Bool { tagClass == V_ASN1_CONTEXT_SPECIFIC }
    func isUniversal(_ tag: Int32) -> Bool { tagClass == V_ASN1_UNIVERSAL && self.tag == tag }
    func isContext(_ tag: Int32) -> Bool { tagClass == V_ASN1_CONTEXT_SPECIFIC && self.tag == tag }
}

/// Why an ASN.1 walk stopped; the receipt engine turns it into `malformed_receipt`.
struct ASN1ReadError: Error {
    var reason: String
}

/// Walks BER/DER with OpenSSL's `ASN1_get_object`, which reads one header and checks it against the bytes left.
/// Only headers are read here; values are left in place so nothing is copied until a caller asks for it.
struct ASN1Reader {
    /// Indefinite-length elements are skipped by walking their children; this bounds that recursion.
    static let maximumDepth = 12

    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Reads the element that starts at `offset` and must end by `limit`.
    func element(at offset: Int, limit: Int, depth: Int = 0) throws(ASN1ReadError) -> ASN1Element {
        guard depth <= Self.maximumDepth else { throw ASN1ReadError(reason: "nesting deeper than \(Self.maximumDepth)") }
        guard offset >= 0, offset < limit, limit <= bytes.count else {
            throw ASN1ReadError(reason: "element expected at offset \(offset)")
        }
        var length = 0
        var tag: Int32 = 0
        var tagClass: Int32 = 0
        var headerLength = 0
        let flags: Int32 = bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return 0x80 }
            var cursor: UnsafePointer<UInt8>? = base + offset
            let start = base + offset
            let result = ASN1_get_object(&cursor, &length, &tag, &tagClass, limit - offset)
            if let cursor { headerLength = cursor - start }
            return result
        }
        if flags & 0x80 != 0 {
            ERR_clear_error()
            throw ASN1ReadError(reason: "bad ASN.1 header at offset \(offset)")
        }
        let contentStart = offset + headerLength
        let isConstructed = flags & V_ASN1_CONSTRUCTED != 0
        let isIndefinite = flags & 0x01 != 0
        if isIndefinite {
            // Children run until the end-of-contents octets (00 00).
            var cursor = contentStart
            while true {
                guard cursor + 2 <= limit else { throw ASN1ReadError(reason: "unterminated indefinite length") }
                if bytes[cursor] == 0, bytes[cursor + 1] == 0 { break }
                cursor = try element(at: cursor, limit: limit, depth: depth + 1).end
            }
            return ASN1Element(
                tag: tag, tagClass: tagClass, isConstructed: isConstructed, isIndefinite: true, headerStart: offset,
                contentStart: contentStart, contentEnd: cursor, end: cursor + 2)
        }
        guard length >= 0, contentStart + length <= limit else { throw ASN1ReadError(reason: "length past the end") }
        return ASN1Element(
            tag: tag, tagClass: tagClass, isConstructed: isConstructed, isIndefinite: false, headerStart: offset,
            contentStart: contentStart, contentEnd: contentStart + length, end: contentStart + length)
    }

    /// The children of a constructed element, in order.
    func children(of parent: ASN1Element, depth: Int = 0) throws(ASN1ReadError) -> [ASN1Element] {
        guard parent.isConstructed else { throw ASN1ReadError(reason: "expected a constructed element") }
        var result: [ASN1Element] = []
        var cursor = parent.contentStart
        while cursor < parent.contentEnd {
            let child = try element(at: cursor, limit: parent.contentEnd, depth: depth + 1)
            result.append(child)
            cursor = child.end
        }
        return result
    }

    /// Calls `body` for each child without collecting them (payloads hold up to hundreds of thousands).
    func forEachChild(of parent: ASN1Element, _ body: (ASN1Element) throws -> Void) throws {
        guard parent.isConstructed else { throw ASN1ReadError(reason: "expected a constructed element") }
        var cursor = parent.contentStart
        while cursor < parent.contentEnd {
            let child = try element(at: cursor, limit: parent.contentEnd, depth: 1)
            try body(child)
            cursor = child.end
        }
    }

    /// The element's bytes, header included.
    func encoding(of element: ASN1Element) -> ArraySlice<UInt8> { bytes[element.headerStart..<element.end] }

    func content(of element: ASN1Element) -> ArraySlice<UInt8> { bytes[element.contentStart..<element.contentEnd] }

    /// An OCTET STRING's value; BER lets it arrive in chunks (a constructed string of strings), as Xcode writes.
    func octetString(_ element: ASN1Element, depth: Int = 0) throws(ASN1ReadError) -> [UInt8] {
        guard element.isUniversal(V_ASN1_OCTET_STRING) else { throw ASN1ReadError(reason: "expected an OCTET STRING") }
        guard element.isConstructed else { return Array(content(of: element)) }
        guard depth < Self.maximumDepth else { throw ASN1ReadError(reason: "OCTET STRING chunks nested too deep") }
        var value: [UInt8] = []
        for chunk in try children(of: element, depth: depth) {
            value += try octetString(chunk, depth: depth + 1)
        }
        return value
    }

    /// A small INTEGER's value; nil when it does not fit 64 bits.
    func integer(_ element: ASN1Element) throws(ASN1ReadError) -> Int64? {
        guard element.isUniversal(V_ASN1_INTEGER), !element.isConstructed else {
            throw ASN1ReadError(reason: "expected an INTEGER")
        }
        return Self.integerValue(content(of: element))
    }

    static func integerValue(_ content: ArraySlice<UInt8>) -> Int64? {
        guard let first = content.first, content.count <= 8 else { return nil }
        var value: Int64 = first & 0x80 != 0 ? -1 : 0
        for byte in content { value = value << 8 | Int64(byte) }
        return value
    }

    /// Reads a complete encoding that must be one element with nothing after it.
    func root() throws(ASN1ReadError) -> ASN1Element {
        try root(in: 0..<bytes.count)
    }

    /// Reads the element that must fill `bounds` exactly: an encoding nested in another's value, read in place.
    func root(in bounds: Range<Int>) throws(ASN1ReadError) -> ASN1Element {
        let element = try element(at: bounds.lowerBound, limit: bounds.upperBound)
        guard element.end == bounds.upperBound else { throw ASN1ReadError(reason: "bytes after the end") }
        return element
    }

    /// An OCTET STRING's value as a region of a reader: in place when the string is primitive (DER, as Apple
    /// writes every attribute), else its chunks joined into a reader of their own (BER, as Xcode writes).
    func octetStringRegion(_ element: ASN1Element) throws(ASN1ReadError) -> (reader: ASN1Reader, bounds: Range<Int>) {
        guard element.isUniversal(V_ASN1_OCTET_STRING) else { throw ASN1ReadError(reason: "expected an OCTET STRING") }
        guard element.isConstructed else { return (self, element.contentStart..<element.contentEnd) }
        let joined = try octetString(element)
        return (ASN1Reader(joined), 0..<joined.count)
    }
}

/// Universal tag numbers (X.680 §8.6), so that files outside this folder need not import OpenSSL.
enum ASN1Tag {
    static let integer: Int32 = 2
    static let octetString: Int32 = 4
    static let null: Int32 = 5
    static let objectIdentifier: Int32 = 6
    static let utf8String: Int32 = 12
    static let sequence: Int32 = 16
    static let set: Int32 = 17
    static let printableString: Int32 = 19
    static let ia5String: Int32 = 22
    static let utcTime: Int32 = 23
    static let generalizedTime: Int32 = 24
}
