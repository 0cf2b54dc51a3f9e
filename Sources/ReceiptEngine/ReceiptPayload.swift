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
            throw ASN1ReadError(reason: "the payload is not an ASN.1 SET")
        }
        let budget = AttributeBudget()
        var fields = AttributeFields()
        var purchases: [InAppPurchase] = []
        try Self.forEachAttribute(in: root, reader: reader, budget: budget) { type, value in
            switch type {
            case 0: fields.receiptType = try fields.receiptType ?? Self.string(value, reader)
            case 1: fields.appItemID = try fields.appItemID ?? Self.integer(value, reader)
            case 2:
                if fields.bundleIDEncoding == nil {
                    fields.bundleID = try Self.string(value, reader)
                    fields.bundleIDEncoding = try reader.octetString(value)
                }
            case 3: fields.applicationVersion = try fields.applicationVersion ?? Self.string(value, reader)
            case 4: fields.opaqueValue = try fields.opaqueValue ?? reader.octetString(value)
            case 5: fields.deviceHash = try fields.deviceHash ?? reader.octetString(value)
            case 12: fields.creationDate = try fields.creationDate ?? Self.date(value, reader, field: "creation date")
            case 16: fields.versionExternalIdentifier = try fields.versionExternalIdentifier ?? Self.integer(value, reader)
            case 17:
                purchases.append(try Self.purchase(value, reader, budget: budget))
            case 18:
                fields.originalPurchaseDate = try fields.originalPurchaseDate ?? Self.date(value, reader, field: "original purchase date")
            case 19: fields.originalApplicationVersion = try fields.originalApplicationVersion ?? Self.string(value, reader)
            case 21: fields.expirationDate = try fields.expirationDate ?? Self.date(value, reader, field: "expiration date")
            default: break
            }
        }
        guard let bundleID = fields.bundleID, let bundleIDEncoding = fields.bundleIDEncoding else {
            throw ASN1ReadError(reason: "the payload has no bundle id (attribute 2)")
        }
        guard let version = fields.applicationVersion else {
            throw ASN1ReadError(reason: "the payload has no application version (attribute 3)")
        }
        guard let opaque = fields.opaqueValue, !opaque.isEmpty else {
            throw ASN1ReadError(reason: "the payload has no opaque value (attribute 4)")
        }
        guard let hash = fields.deviceHash, hash.count == 20 else {
            throw ASN1ReadError(reason: "the payload has no 20-byte SHA-1 hash (attribute 5)")
        }
        guard let creationDate = fields.creationDate else {
            throw ASN1ReadError(reason: "the payload has no creation date (attribute 12)")
        }
        receipt = Receipt(
            receiptType: fields.receiptType, appItemID: fields.appItemID, bundleID: bundleID,
            applicationVersion: version, originalApplicationVersion: fields.originalApplicationVersion,
            creationDate: creationDate, expirationDate: fields.expirationDate,
            originalPurchaseDate: fields.originalPurchaseDate,
            versionExternalIdentifier: fields.versionExternalIdentifier, inAppPurchases: purchases)
        self.bundleIDEncoding = bundleIDEncoding
        opaqueValue = opaque
        deviceHash = hash
    }

    /// Counts attributes across the payload and every in-app set, which nest.
    private final class AttributeBudget {
        var used = 0
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
        var originalPurchaseDate: ReceiptDate?
        var originalApplicationVersion: String?
        var expirationDate: ReceiptDate?
    }

    private static func forEachAttribute(
        in set: ASN1Element, reader: ASN1Reader, budget: AttributeBudget,
        _ body: (Int64, ASN1Element) throws -> Void
    ) throws {
        try reader.forEachChild(of: set) { attribute in
            budget.used += 1
            guard budget.used <= maximumAttributes else {
                throw ASN1ReadError(reason: "more than \(maximumAttributes) attributes")
            }
            guard attribute.isUniversal(ASN1Tag.sequence), attribute.isConstructed else {
                throw ASN1ReadError(reason: "an attribute is not a SEQUENCE")
            }
            let type = try reader.element(at: attribute.contentStart, limit: attribute.contentEnd)
            let version = try reader.element(at: type.end, limit: attribute.contentEnd)
            let value = try reader.element(at: version.end, limit: attribute.contentEnd)
            guard value.end == attribute.contentEnd, let typeNumber = try reader.integer(type),
                version.isUniversal(ASN1Tag.integer)
            else { throw ASN1ReadError(reason: "an attribute is not (type, version, value)") }
            guard value.isUniversal(ASN1Tag.octetString) else {
                throw ASN1ReadError(reason: "attribute \(typeNumber)'s value is not an OCTET STRING")
            }
            try body(typeNumber, value)
        }
    }

    private static func purchase(
        _ value: ASN1Element, _ reader: ASN1Reader, budget: AttributeBudget
    ) throws -> InAppPurchase {
        let (inner, bounds) = try reader.octetStringRegion(value)
        let set = try inner.root(in: bounds)
        guard set.isUniversal(ASN1Tag.set), set.isConstructed else {
            throw ASN1ReadError(reason: "an in-app purchase (attribute 17) is not an ASN.1 SET")
        }
        var purchase = InAppPurchase()
        // The first occurrence of a known type wins; every type read below lies in 1700..<1764.
        var seen: UInt64 = 0
        try forEachAttribute(in: set, reader: inner, budget: budget) { type, value in
            guard (1700..<1764).contains(type) else { return }
            let bit: UInt64 = 1 << UInt64(type - 1700)
            guard seen & bit == 0 else { return }
            seen |= bit
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

    /// The content bytes of the value's inner DER string (UTF8String, IA5String …), read in place; nil when the
    /// value or the string is empty.
    private static func stringContent(_ value: ASN1Element, _ reader: ASN1Reader) throws -> ArraySlice<UInt8>? {
        let (inner, bounds) = try reader.octetStringRegion(value)
        guard !bounds.isEmpty else { return nil }
        let element = try inner.root(in: bounds)
        guard element.tagClass == 0, !element.isConstructed else {
            throw ASN1ReadError(reason: "a string attribute does not hold a string")
        }
        let content = inner.content(of: element)
        return content.isEmpty ? nil : content
    }

    /// The value's inner DER string; an empty string reads as absent.
    private static func string(_ value: ASN1Element, _ reader: ASN1Reader) throws -> String? {
        try stringContent(value, reader).map { String(decoding: $0, as: UTF8.self) }
    }

    private static func integer(_ value: ASN1Element, _ reader: ASN1Reader) throws -> Int64? {
        let (inner, bounds) = try reader.octetStringRegion(value)
        guard !bounds.isEmpty else { return nil }
        guard let number = try inner.integer(try inner.root(in: bounds)) else {
            throw ASN1ReadError(reason: "an integer attribute does not fit 64 bits")
        }
        return number
    }

    private static func date(_ value: ASN1Element, _ reader: ASN1Reader, field: String) throws -> ReceiptDate? {
        guard let text = try stringContent(value, reader) else { return nil }
        guard let date = ReceiptDate(rfc3339UTF8: text) else {
            throw ASN1ReadError(reason: "the \(field) is not an RFC 3339 date")
        }
        return date
    }
}
