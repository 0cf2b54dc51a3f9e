internal import COpenSSL

/// One BER/DER element located in a byte array: where its header, content and end are.
///
/// Four words, so that it comes back from `ASN1Reader.element` in registers: a payload walk reads hundreds of
/// headers per receipt, and the wrapper around each read (an element returned through memory among it) cost more
/// instructions than `ASN1_get_object` itself.
package struct ASN1Element {
    package var headerStart: Int
    package var contentStart: Int
    /// End of the content, before the end-of-contents octets of an indefinite-length element.
    package var contentEnd: Int
    /// The tag number in the low 32 bits, the class above it, then the constructed and indefinite flags.
    private var identifier: UInt64

    init(tag: Int32, tagClass: Int32, isConstructed: Bool, isIndefinite: Bool, headerStart: Int, contentStart: Int,
        contentEnd: Int) {
        self.headerStart = headerStart
        self.contentStart = contentStart
        self.contentEnd = contentEnd
        identifier = UInt64(UInt32(bitPattern: tag)) | UInt64(UInt8(truncatingIfNeeded: tagClass)) << 32
            | (isConstructed ? 1 << 40 : 0) | (isIndefinite ? 1 << 41 : 0)
    }

    package var tag: Int32 { Int32(bitPattern: UInt32(truncatingIfNeeded: identifier)) }
    package var tagClass: Int32 { Int32(UInt8(truncatingIfNeeded: identifier >> 32)) }
    package var isConstructed: Bool { identifier & 1 << 40 != 0 }
    package var isIndefinite: Bool { identifier & 1 << 41 != 0 }
    /// First byte after the element.
    package var end: Int { isIndefinite ? contentEnd + 2 : contentEnd }

    package var isUniversal: Bool { tagClass == V_ASN1_UNIVERSAL }
    package var isContextSpecific: Bool { tagClass == V_ASN1_CONTEXT_SPECIFIC }
    package func isUniversal(_ tag: Int32) -> Bool { identifier & 0xFF_FFFF_FFFF == UInt64(UInt32(bitPattern: tag)) }
    package func isContext(_ tag: Int32) -> Bool { tagClass == V_ASN1_CONTEXT_SPECIFIC && self.tag == tag }
}

/// Why an ASN.1 walk stopped; the receipt engine turns it into `malformed_receipt`.
package struct ASN1ReadError: Error {
    package var reason: String
    /// The machine form of a cause a caller reports on its own (`ValidationError.Detail`'s raw value), when it has
    /// one.
    package var detail: String?

    package init(reason: String, detail: String? = nil) {
        self.reason = reason
        self.detail = detail
    }
}

/// Walks BER/DER with OpenSSL's `ASN1_get_object`, which reads one header and checks it against the bytes left.
/// Only headers are read here; values are left in place so nothing is copied until a caller asks for it.
package struct ASN1Reader {
    /// Indefinite-length elements are skipped by walking their children; this bounds that recursion.
    package static let maximumDepth = 12

    package let bytes: [UInt8]

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Reads the element that starts at `offset` and must end by `limit`.
    ///
    /// Inlined into the payload walk, which calls it for every attribute's four headers; the rare paths (errors,
    /// indefinite lengths) live in functions of their own so that this one stays small.
    @inline(__always)
    package func element(at offset: Int, limit: Int, depth: Int = 0) throws(ASN1ReadError) -> ASN1Element {
        guard depth <= Self.maximumDepth, offset >= 0, offset < limit, limit <= bytes.count else {
            throw Self.positionError(offset: offset, depth: depth)
        }
        var length = 0
        var tag: Int32 = 0
        var tagClass: Int32 = 0
        // offset < limit <= bytes.count, so the array is not empty and has a base address; ASN1_get_object only
        // ever moves the cursor forward, by at most `limit - offset`, so the arithmetic below cannot overflow.
        let (flags, headerLength) = bytes.withUnsafeBufferPointer { buffer -> (Int32, Int) in
            let start = buffer.baseAddress.unsafelyUnwrapped + offset
            var cursor: UnsafePointer<UInt8>? = start
            let flags = ASN1_get_object(&cursor, &length, &tag, &tagClass, limit - offset)
            return (flags, cursor.unsafelyUnwrapped - start)
        }
        if flags & 0x80 != 0 { throw Self.headerError(offset: offset) }
        let contentStart = offset &+ headerLength
        let isConstructed = flags & V_ASN1_CONSTRUCTED != 0
        if flags & 0x01 != 0 {
            return try indefinite(
                tag: tag, tagClass: tagClass, isConstructed: isConstructed, headerStart: offset,
                contentStart: contentStart, limit: limit, depth: depth)
        }
        guard length >= 0, length <= limit &- contentStart else { throw ASN1ReadError(reason: "length past the end") }
        return ASN1Element(
            tag: tag, tagClass: tagClass, isConstructed: isConstructed, isIndefinite: false, headerStart: offset,
            contentStart: contentStart, contentEnd: contentStart &+ length)
    }

    @inline(never)
    private static func positionError(offset: Int, depth: Int) -> ASN1ReadError {
        guard depth <= maximumDepth else { return ASN1ReadError(reason: "nesting deeper than \(maximumDepth)", detail: "nesting_too_deep") }
        return ASN1ReadError(reason: "element expected at offset \(offset)")
    }

    @inline(never)
    private static func headerError(offset: Int) -> ASN1ReadError {
        ERR_clear_error()
        return ASN1ReadError(reason: "bad ASN.1 header at offset \(offset)")
    }

    /// Children run until the end-of-contents octets (00 00).
    @inline(never)
    private func indefinite(
        tag: Int32, tagClass: Int32, isConstructed: Bool, headerStart: Int, contentStart: Int, limit: Int, depth: Int
    ) throws(ASN1ReadError) -> ASN1Element {
        var cursor = contentStart
        while true {
            guard cursor + 2 <= limit else { throw ASN1ReadError(reason: "unterminated indefinite length") }
            if bytes[cursor] == 0, bytes[cursor + 1] == 0 { break }
            cursor = try element(at: cursor, limit: limit, depth: depth + 1).end
        }
        return ASN1Element(
            tag: tag, tagClass: tagClass, isConstructed: isConstructed, isIndefinite: true, headerStart: headerStart,
            contentStart: contentStart, contentEnd: cursor)
    }

    /// The children of a constructed element, in order.
    package func children(of parent: ASN1Element, depth: Int = 0) throws(ASN1ReadError) -> [ASN1Element] {
        guard parent.isConstructed else { throw ASN1ReadError(reason: "expected a constructed element") }
        var result: [ASN1Element] = []
        // A container's constructed parts have at most six children; growing the array from empty reallocated it
        // up to four times per call.
        result.reserveCapacity(8)
        var cursor = parent.contentStart
        while cursor < parent.contentEnd {
            let child = try element(at: cursor, limit: parent.contentEnd, depth: depth + 1)
            result.append(child)
            cursor = child.end
        }
        return result
    }

    /// Where a walk over a constructed element's children stands.
    package struct ChildCursor {
        fileprivate var offset: Int
        fileprivate let end: Int
    }

    /// Steps through the children without collecting them (payloads hold up to hundreds of thousands) and without
    /// a closure per child: `while let child = try reader.next(&cursor) { … }`.
    package func childCursor(of parent: ASN1Element) throws(ASN1ReadError) -> ChildCursor {
        guard parent.isConstructed else { throw ASN1ReadError(reason: "expected a constructed element") }
        return ChildCursor(offset: parent.contentStart, end: parent.contentEnd)
    }

    /// The next child, or nil after the last.
    @inline(__always)
    package func next(_ cursor: inout ChildCursor) throws(ASN1ReadError) -> ASN1Element? {
        guard cursor.offset < cursor.end else { return nil }
        let child = try element(at: cursor.offset, limit: cursor.end, depth: 1)
        cursor.offset = child.end
        return child
    }

    /// The next child when it is `SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`, the shape of an App
    /// Store receipt's attributes: its type and its value's element, read in one call. A receipt holds hundreds of
    /// them, and calling across the module boundary for each of their four headers cost more than the headers.
    package func nextTypedValue(
        _ cursor: inout ChildCursor
    ) throws(ASN1ReadError) -> (type: Int64, value: ASN1Element)? {
        guard cursor.offset < cursor.end else { return nil }
        if let (end, type, value) = definiteTypedValue(at: cursor.offset, limit: cursor.end) {
            cursor.offset = end
            return (type, value)
        }
        return try checkedTypedValue(&cursor)
    }

    /// `nextTypedValue` for the shape every attribute Apple writes has: DER, a small type, a primitive version. The
    /// four headers are read in one pass over the buffer (per header, the bounds checks and the buffer's lending cost
    /// more than `ASN1_get_object` itself). Nil for anything else, which `checkedTypedValue` then reads header by
    /// header, accepting and refusing exactly what it did before this pass existed.
    @inline(__always)
    private func definiteTypedValue(at offset: Int, limit: Int) -> (end: Int, type: Int64, value: ASN1Element)? {
        guard offset >= 0, offset < limit, limit <= bytes.count else { return nil }
        return bytes.withUnsafeBufferPointer { buffer -> (end: Int, type: Int64, value: ASN1Element)? in
            let base = buffer.baseAddress.unsafelyUnwrapped
            var cursor = base + offset
            guard let attribute = Self.universalHeader(&cursor, base: base, end: limit),
                attribute.flags == V_ASN1_CONSTRUCTED, attribute.tag == V_ASN1_SEQUENCE
            else { return nil }
            let end = cursor - base + attribute.length
            guard let type = Self.universalHeader(&cursor, base: base, end: end), type.flags == 0,
                type.tag == V_ASN1_INTEGER, (1...8).contains(type.length)
            else { return nil }
            var typeNumber: Int64 = cursor[0] & 0x80 != 0 ? -1 : 0
            for index in 0..<type.length { typeNumber = typeNumber << 8 | Int64(cursor[index]) }
            cursor += type.length
            guard let version = Self.universalHeader(&cursor, base: base, end: end), version.flags == 0,
                version.tag == V_ASN1_INTEGER
            else { return nil }
            cursor += version.length
            let valueStart = cursor - base
            guard let value = Self.universalHeader(&cursor, base: base, end: end),
                value.flags & ~V_ASN1_CONSTRUCTED == 0, value.tag == V_ASN1_OCTET_STRING,
                cursor - base + value.length == end
            else { return nil }
            return (
                end, typeNumber,
                ASN1Element(
                    tag: value.tag, tagClass: V_ASN1_UNIVERSAL, isConstructed: value.flags != 0, isIndefinite: false,
                    headerStart: valueStart, contentStart: cursor - base, contentEnd: end)
            )
        }
    }

    /// One definite-length header of the universal class that starts at `cursor`, before `end`; `cursor` then points
    /// at its content. Without 0x80 in its answer, ASN1_get_object has checked that `length` bytes follow the header.
    /// Passed in and out explicitly: locals a nested function captured were checked for exclusive access at run time
    /// on every header.
    @inline(__always)
    private static func universalHeader(
        _ cursor: inout UnsafePointer<UInt8>, base: UnsafePointer<UInt8>, end: Int
    ) -> (flags: Int32, tag: Int32, length: Int)? {
        let position = cursor - base
        guard position < end else { return nil }
        var next: UnsafePointer<UInt8>? = cursor
        var length = 0
        var tag: Int32 = 0
        var tagClass: Int32 = 0
        let flags = ASN1_get_object(&next, &length, &tag, &tagClass, end - position)
        guard flags & 0x80 == 0 else {
            ERR_clear_error()
            return nil
        }
        guard length >= 0, tagClass == V_ASN1_UNIVERSAL else { return nil }
        cursor = next.unsafelyUnwrapped
        return (flags, tag, length)
    }

    @inline(never)
    private func checkedTypedValue(
        _ cursor: inout ChildCursor
    ) throws(ASN1ReadError) -> (type: Int64, value: ASN1Element)? {
        guard let attribute = try next(&cursor) else { return nil }
        guard attribute.isUniversal(V_ASN1_SEQUENCE), attribute.isConstructed else {
            throw ASN1ReadError(reason: "an attribute is not a SEQUENCE")
        }
        let type = try element(at: attribute.contentStart, limit: attribute.contentEnd)
        let version = try element(at: type.end, limit: attribute.contentEnd)
        let value = try element(at: version.end, limit: attribute.contentEnd)
        guard value.end == attribute.contentEnd, let typeNumber = try integer(type), version.isUniversal(V_ASN1_INTEGER)
        else { throw ASN1ReadError(reason: "an attribute is not (type, version, value)") }
        guard value.isUniversal(V_ASN1_OCTET_STRING) else {
            throw ASN1ReadError(reason: "attribute \(typeNumber)'s value is not an OCTET STRING")
        }
        return (typeNumber, value)
    }

    /// The element's bytes, header included.
    package func encoding(of element: ASN1Element) -> ArraySlice<UInt8> { bytes[element.headerStart..<element.end] }

    package func content(of element: ASN1Element) -> ArraySlice<UInt8> { bytes[element.contentStart..<element.contentEnd] }

    /// An OCTET STRING's value; BER lets it arrive in chunks (a constructed string of strings), as Xcode writes.
    package func octetString(_ element: ASN1Element, depth: Int = 0) throws(ASN1ReadError) -> [UInt8] {
        guard element.isUniversal(V_ASN1_OCTET_STRING) else { throw ASN1ReadError(reason: "expected an OCTET STRING") }
        guard element.isConstructed else { return Array(content(of: element)) }
        guard depth < Self.maximumDepth else { throw ASN1ReadError(reason: "OCTET STRING chunks nested too deep", detail: "nesting_too_deep") }
        var value: [UInt8] = []
        for chunk in try children(of: element, depth: depth) {
            value += try octetString(chunk, depth: depth + 1)
        }
        return value
    }

    /// A small INTEGER's value; nil when it does not fit 64 bits. Every attribute's type is one, so it is read
    /// from the array directly rather than through a slice.
    @inline(__always)
    package func integer(_ element: ASN1Element) throws(ASN1ReadError) -> Int64? {
        guard element.isUniversal(V_ASN1_INTEGER), !element.isConstructed else {
            throw ASN1ReadError(reason: "expected an INTEGER")
        }
        let start = element.contentStart
        let end = element.contentEnd
        guard start < end, end - start <= 8 else { return nil }
        var value: Int64 = bytes[start] & 0x80 != 0 ? -1 : 0
        for index in start..<end { value = value << 8 | Int64(bytes[index]) }
        return value
    }

    /// Reads a complete encoding that must be one element with nothing after it.
    package func root() throws(ASN1ReadError) -> ASN1Element {
        try root(in: 0..<bytes.count)
    }

    /// Reads the element that must fill `bounds` exactly: an encoding nested in another's value, read in place.
    @inline(__always)
    package func root(in bounds: Range<Int>) throws(ASN1ReadError) -> ASN1Element {
        let element = try element(at: bounds.lowerBound, limit: bounds.upperBound)
        guard element.end == bounds.upperBound else { throw ASN1ReadError(reason: "bytes after the end") }
        return element
    }

    /// An OCTET STRING's value as a region of a reader: in place when the string is primitive (DER, as Apple
    /// writes every attribute), else its chunks joined into a reader of their own (BER, as Xcode writes).
    package func octetStringRegion(_ element: ASN1Element) throws(ASN1ReadError) -> (reader: ASN1Reader, bounds: Range<Int>) {
        guard element.isUniversal(V_ASN1_OCTET_STRING) else { throw ASN1ReadError(reason: "expected an OCTET STRING") }
        guard element.isConstructed else { return (self, element.contentStart..<element.contentEnd) }
        let joined = try octetString(element)
        return (ASN1Reader(joined), 0..<joined.count)
    }
}

/// Universal tag numbers (X.680 §8.6), so that modules above the floor need not import OpenSSL.
package enum ASN1Tag {
    package static let integer: Int32 = 2
    package static let octetString: Int32 = 4
    package static let null: Int32 = 5
    package static let objectIdentifier: Int32 = 6
    package static let sequence: Int32 = 16
    package static let set: Int32 = 17
}
