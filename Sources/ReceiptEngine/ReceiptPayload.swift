internal import CryptoFloor
/// The receipt payload as signed: the decoded fields plus the raw bytes the device hash is computed over.
struct ReceiptPayload {
    /// Bounds the work one payload can cause: real receipts hold a few thousand attributes at most.
    static let maximumAttributes = 500_000

    var receipt: Receipt
    /// Attribute 2's value exactly as signed: the UTF8String's tag, length and bytes.
    var bundleIDEncoding: [UInt8]
    var opaqueValue: [UInt8]
    var deviceHash: [UInt8]

    /// Decodes `SET OF ReceiptAttribute ::= SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`.
    /// Unknown types are skipped, empty strings read as absent, order does not matter.
    init(decoding bytes: [UInt8]) throws {
        let reader = ASN1Reader(bytes)
        let root = try reader.root()
        guard root.isUniversal(ASN1Tag.set), root.isConstructed else {
            throw ASN1ReadError(reason: "the payload is not an ASN.1 SET", detail: Detail.payloadNotASet.rawValue)
        }
        var attributeCount = 0
        var fields = AttributeFields()
        var purchases: [InAppPurchase] = []
        var cursor = try reader.childCursor(of: root)
        while let attribute = try Self.nextAttribute(&cursor, reader, count: &attributeCount) {
            let value = attribute.value
            switch attribute.type {
            case 0: if fields.receiptType == nil { fields.receiptType = try Self.string(value, reader) }
            case 1: if fields.appItemID == nil { fields.appItemID = try Self.integer(value, reader) }
            case 2:
                if fields.bundleIDEncoding == nil {
                    fields.bundleID = try Self.string(value, reader)
                    fields.bundleIDEncoding = try reader.octetString(value)
                }
            case 3: if fields.applicationVersion == nil { fields.applicationVersion = try Self.string(value, reader) }
            case 4: if fields.opaqueValue == nil { fields.opaqueValue = try reader.octetString(value) }
            case 5: if fields.deviceHash == nil { fields.deviceHash = try reader.octetString(value) }
            case 12:
                if fields.creationDate == nil {
                    fields.creationDate = try Self.date(value, reader, field: "creation date")
                }
            case 15: if fields.downloadID == nil { fields.downloadID = try Self.integer(value, reader) }
            case 16:
                if fields.versionExternalIdentifier == nil {
                    fields.versionExternalIdentifier = try Self.integer(value, reader)
                }
            case 17:
                purchases.append(try Self.purchase(value, reader, attributeCount: &attributeCount))
            case 18:
                if fields.originalPurchaseDate == nil {
                    fields.originalPurchaseDate = try Self.date(value, reader, field: "original purchase date")
                }
            case 19:
                if fields.originalApplicationVersion == nil {
                    fields.originalApplicationVersion = try Self.string(value, reader)
                }
            case 21:
                if fields.expirationDate == nil {
                    fields.expirationDate = try Self.date(value, reader, field: "expiration date")
                }
            default: break
            }
        }
        guard let bundleID = fields.bundleID, let bundleIDEncoding = fields.bundleIDEncoding else {
            throw ASN1ReadError(reason: "the payload has no bundle id (attribute 2)", detail: Detail.missingAttribute.rawValue)
        }
        guard let version = fields.applicationVersion else {
            throw ASN1ReadError(reason: "the payload has no application version (attribute 3)", detail: Detail.missingAttribute.rawValue)
        }
        guard let opaque = fields.opaqueValue, !opaque.isEmpty else {
            throw ASN1ReadError(reason: "the payload has no opaque value (attribute 4)", detail: Detail.missingAttribute.rawValue)
        }
        guard let hash = fields.deviceHash, hash.count == 20 else {
            throw ASN1ReadError(reason: "the payload has no 20-byte SHA-1 hash (attribute 5)", detail: Detail.missingAttribute.rawValue)
        }
        guard let creationDate = fields.creationDate else {
            throw ASN1ReadError(reason: "the payload has no creation date (attribute 12)", detail: Detail.missingAttribute.rawValue)
        }
        receipt = Receipt(
            receiptType: fields.receiptType, appItemID: fields.appItemID, bundleID: bundleID,
            applicationVersion: version, originalApplicationVersion: fields.originalApplicationVersion,
            creationDate: creationDate, expirationDate: fields.expirationDate,
            originalPurchaseDate: fields.originalPurchaseDate,
            versionExternalIdentifier: fields.versionExternalIdentifier, downloadID: fields.downloadID,
            inAppPurchases: purchases)
        self.bundleIDEncoding = bundleIDEncoding
        opaqueValue = opaque
        deviceHash = hash
    }

    /// One attribute whose structure has been checked: its type and its value, an OCTET STRING.
    private struct Attribute {
        var type: Int64
        var value: ASN1Element
    }

    private struct AttributeFields {
        var receiptType: String?
        var appItemID: Int64?
        var bundleID: String?
        var bundleIDEncoding: [UInt8]?
        var applicationVersion: String?
        var opaqueValue: [UInt8]?
        var deviceHash: [UInt8]?
        var creationDate: ReceiptDate?
        var versionExternalIdentifier: Int64?
        var downloadID: Int64?
        var originalPurchaseDate: ReceiptDate?
        var originalApplicationVersion: String?
        var expirationDate: ReceiptDate?
    }

    /// The next attribute of a SET, every header of it read and checked. `count` runs across the payload and every
    /// in-app set, which nest, and bounds the work one payload can cause.
    private static func nextAttribute(
        _ cursor: inout ASN1Reader.ChildCursor, _ reader: ASN1Reader, count: inout Int
    ) throws(ASN1ReadError) -> Attribute? {
        guard let (type, value) = try reader.nextTypedValue(&cursor) else { return nil }
        count += 1
        guard count <= maximumAttributes else {
            throw ASN1ReadError(reason: "more than \(maximumAttributes) attributes", detail: Detail.tooManyAttributes.rawValue)
        }
        return Attribute(type: type, value: value)
    }

    private static func purchase(
        _ value: ASN1Element, _ reader: ASN1Reader, attributeCount: inout Int
    ) throws(ASN1ReadError) -> InAppPurchase {
        let (inner, bounds) = try reader.octetStringRegion(value)
        let set = try inner.root(in: bounds)
        guard set.isUniversal(ASN1Tag.set), set.isConstructed else {
            throw ASN1ReadError(reason: "an in-app purchase (attribute 17) is not an ASN.1 SET", detail: Detail.inAppPurchaseNotASet.rawValue)
        }
        var purchase = InAppPurchase()
        // The first occurrence of a known type wins; every type read below lies in 1700..<1764.
        var seen: UInt64 = 0
        var cursor = try inner.childCursor(of: set)
        while let attribute = try nextAttribute(&cursor, inner, count: &attributeCount) {
            let type = attribute.type
            guard (1700..<1764).contains(type) else { continue }
            let bit: UInt64 = 1 << UInt64(type - 1700)
            guard seen & bit == 0 else { continue }
            seen |= bit
            let value = attribute.value
            switch type {
            case 1701: purchase.quantity = try integer(value, inner)
            case 1702: purchase.productID = try string(value, inner)
            case 1703: purchase.transactionID = try string(value, inner)
            case 1704: purchase.purchaseDate = try date(value, inner, field: "purchase date")
            case 1705: purchase.originalTransactionID = try string(value, inner)
            case 1706: purchase.originalPurchaseDate = try date(value, inner, field: "original purchase date")
            case 1708: purchase.expiresDate = try date(value, inner, field: "subscription expiration date")
            case 1711: purchase.webOrderLineItemID = try integer(value, inner)
            case 1712: purchase.cancellationDate = try date(value, inner, field: "cancellation date")
            case 1713: purchase.isTrialPeriod = (try integer(value, inner) ?? 0) != 0
            case 1719: purchase.isInIntroOfferPeriod = (try integer(value, inner) ?? 0) != 0
            case 1721: purchase.promotionalOfferID = try string(value, inner)
            default: break
            }
        }
        return purchase
    }

    /// Calls `body` with the one element an attribute's OCTET STRING wraps and the reader it lies in; nil for an
    /// empty value. DER values (every one Apple writes) are read in place with no reader copied; BER chunks (as
    /// Xcode writes) are joined into a reader of their own first.
    @inline(__always)
    private static func wrapped<Result>(
        _ value: ASN1Element, _ reader: ASN1Reader,
        _ body: (ASN1Reader, ASN1Element) throws(ASN1ReadError) -> Result?
    ) throws(ASN1ReadError) -> Result? {
        guard !value.isConstructed else {
            let (inner, bounds) = try reader.octetStringRegion(value)
            guard !bounds.isEmpty else { return nil }
            return try body(inner, try inner.root(in: bounds))
        }
        guard value.contentStart < value.contentEnd else { return nil }
        return try body(reader, try reader.root(in: value.contentStart..<value.contentEnd))
    }

    /// The content bytes of the value's inner DER string (UTF8String, IA5String …), read in place; nil when the
    /// value or the string is empty.
    private static func stringContent(
        _ value: ASN1Element, _ reader: ASN1Reader
    ) throws(ASN1ReadError) -> ArraySlice<UInt8>? {
        try wrapped(value, reader) { inner, element throws(ASN1ReadError) in
            guard element.tagClass == 0, !element.isConstructed else {
                throw ASN1ReadError(reason: "a string attribute does not hold a string")
            }
            let content = inner.content(of: element)
            return content.isEmpty ? nil : content
        }
    }

    /// The value's inner DER string; an empty string reads as absent.
    private static func string(_ value: ASN1Element, _ reader: ASN1Reader) throws(ASN1ReadError) -> String? {
        try stringContent(value, reader).map { String(decoding: $0, as: UTF8.self) }
    }

    private static func integer(_ value: ASN1Element, _ reader: ASN1Reader) throws(ASN1ReadError) -> Int64? {
        try wrapped(value, reader) { inner, element throws(ASN1ReadError) in
            guard let number = try inner.integer(element) else {
                throw ASN1ReadError(reason: "an integer attribute does not fit 64 bits", detail: Detail.integerTooLarge.rawValue)
            }
            return number
        }
    }

    private static func date(
        _ value: ASN1Element, _ reader: ASN1Reader, field: String
    ) throws(ASN1ReadError) -> ReceiptDate? {
        guard let text = try stringContent(value, reader) else { return nil }
        guard let date = ReceiptDate(rfc3339UTF8: text) else {
            throw ASN1ReadError(reason: "the \(field) is not an RFC 3339 date", detail: Detail.dateNotRFC3339.rawValue)
        }
        return date
    }
}

private typealias Detail = ValidationError.Detail
