#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ReceiptEngine
internal import CryptoFloor

/// One purchase to put in a forged receipt (an attribute-17 set).
public struct PurchaseBlueprint: Sendable, Hashable {
    public var productID: String
    public var transactionID: String
    public var originalTransactionID: String
    public var quantity: Int64 = 1
    public var purchaseDate: ReceiptDate
    public var originalPurchaseDate: ReceiptDate?
    public var expiresDate: ReceiptDate?
    public var cancellationDate: ReceiptDate?
    /// Attribute 1711; when nil, a subscription (a purchase with an expiry) gets one derived from its transaction id
    /// and any other purchase 0, as Apple writes them.
    public var webOrderLineItemID: Int64?
    public var isTrialPeriod = false
    public var isInIntroOfferPeriod = false
    public var promotionalOfferID: String?

    public init(
        productID: String, transactionID: String, originalTransactionID: String? = nil, purchaseDate: ReceiptDate,
        expiresDate: ReceiptDate? = nil
    ) {
        self.productID = productID
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID ?? transactionID
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
    }

    /// Every field a spec may name, as `receiptd testing receipt --purchase` documents them.
    public static let specFields = [
        "product", "transaction", "original", "quantity", "purchased", "original_purchased", "expires", "cancelled",
        "web_order", "trial", "intro", "offer",
    ]

    /// Parses `product=pro.monthly,transaction=1001,original=1000,purchased=2026-01-01T00:00:00Z,
    /// expires=2026-02-01T00:00:00Z`. `product` and `transaction` are required; `original` defaults to the
    /// transaction, `purchased` to `defaultDate`. Errors name the field.
    public init(spec: String, defaultDate: ReceiptDate) throws {
        var values: [String: String] = [:]
        for item in spec.split(separator: ",", omittingEmptySubsequences: true) {
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = parts[0].trimmedOfSpaces()
            guard parts.count == 2 else { throw BlueprintError("purchase spec: \(key): expected \(key)=VALUE") }
            guard Self.specFields.contains(key) else {
                throw BlueprintError(
                    "purchase spec: \(key): unknown field (known: \(Self.specFields.joined(separator: ", ")))")
            }
            guard values[key] == nil else { throw BlueprintError("purchase spec: \(key): given twice") }
            values[key] = parts[1].trimmedOfSpaces()
        }
        func date(_ key: String) throws -> ReceiptDate? {
            guard let text = values[key] else { return nil }
            guard let date = ReceiptDate(rfc3339: text) else {
                throw BlueprintError("purchase spec: \(key): \"\(text)\" is not an RFC 3339 date (2026-01-01T00:00:00Z)")
            }
            return date
        }
        func integer(_ key: String) throws -> Int64? {
            guard let text = values[key] else { return nil }
            guard let number = Int64(text) else { throw BlueprintError("purchase spec: \(key): \"\(text)\" is not an integer") }
            return number
        }
        func flag(_ key: String) throws -> Bool {
            switch values[key] {
            case nil, "false", "0", "no": return false
            case "true", "1", "yes": return true
            case let other?: throw BlueprintError("purchase spec: \(key): \"\(other)\" is not true or false")
            }
        }
        func text(_ key: String) throws -> String? {
            guard let value = values[key] else { return nil }
            guard !value.isEmpty else { throw BlueprintError("purchase spec: \(key): empty") }
            return value
        }
        guard let product = try text("product") else { throw BlueprintError("purchase spec: product: required") }
        guard let transaction = try text("transaction") else {
            throw BlueprintError("purchase spec: transaction: required")
        }
        self.init(
            productID: product, transactionID: transaction, originalTransactionID: try text("original"),
            purchaseDate: try date("purchased") ?? defaultDate, expiresDate: try date("expires"))
        if let quantity = try integer("quantity") {
            guard quantity > 0 else { throw BlueprintError("purchase spec: quantity: must be at least 1") }
            self.quantity = quantity
        }
        originalPurchaseDate = try date("original_purchased")
        cancellationDate = try date("cancelled")
        webOrderLineItemID = try integer("web_order")
        isTrialPeriod = try flag("trial")
        isInIntroOfferPeriod = try flag("intro")
        promotionalOfferID = try text("offer")
    }

    var attributes: [ReceiptAttributeBlueprint] {
        [
            .integer(1701, quantity), .utf8(1702, productID), .utf8(1703, transactionID),
            .date(1704, purchaseDate), .utf8(1705, originalTransactionID),
            .date(1706, originalPurchaseDate ?? purchaseDate), .date(1708, expiresDate),
            .integer(1711, webOrderLineItemID ?? (expiresDate == nil ? 0 : forgedWebOrderLineItemID(transactionID))),
            .date(1712, cancellationDate),
            .integer(1713, isTrialPeriod ? 1 : 0), .integer(1719, isInIntroOfferPeriod ? 1 : 0),
        ] + (promotionalOfferID.map { [.utf8(1721, $0)] } ?? [])
    }
}

/// A web order line item id of its own for each transaction: Apple numbers them apart from transaction ids, so a
/// numeric id is offset by 100 (`2000000000000001` → `2000000000000101`) and any other id is hashed (FNV-1a) into
/// the 16 digits Apple uses.
func forgedWebOrderLineItemID(_ transactionID: String) -> Int64 {
    if let number = Int64(transactionID), number >= 0, number < Int64.max - 100 { return number + 100 }
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in transactionID.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    return 1_000_000_000_000_000 + Int64(hash % 9_000_000_000_000_000)
}

/// One `ReceiptAttribute` to encode: a type, a version and the DER bytes of its value.
public struct ReceiptAttributeBlueprint: Sendable, Hashable {
    public var type: Int64
    public var version: Int64
    public var value: [UInt8]

    public init(type: Int64, version: Int64 = 1, value: [UInt8]) {
        self.type = type
        self.version = version
        self.value = value
    }

    package static func utf8(_ type: Int64, _ text: String) -> Self { Self(type: type, value: DERWriter.utf8String(text)) }
    package static func integer(_ type: Int64, _ number: Int64) -> Self { Self(type: type, value: DERWriter.integer(number)) }
    /// Apple writes an absent date as an empty IA5String.
    package static func date(_ type: Int64, _ date: ReceiptDate?) -> Self {
        Self(type: type, value: DERWriter.ia5String(date?.rfc3339 ?? ""))
    }

    package var encoded: [UInt8] {
        DERWriter.sequence(DERWriter.integer(type) + DERWriter.integer(version) + DERWriter.octetString(value))
    }
}

/// What a forged receipt says. Defaults give a valid production receipt with no purchases.
public struct ReceiptBlueprint: Sendable {
    /// Attribute 0 as Apple writes it: "Production", "ProductionSandbox" or "Xcode".
    public var receiptType = "Production"
    public var appItemID: Int64 = 0
    /// Attribute 15 (Apple's `download_id`), written only when set.
    public var downloadID: Int64?
    public var bundleID: String
    public var applicationVersion: String
    public var originalApplicationVersion: String
    public var deviceIdentifier: DeviceIdentifier
    public var opaqueValue: [UInt8]
    public var creationDate: ReceiptDate
    public var originalPurchaseDate: ReceiptDate?
    public var expirationDate: ReceiptDate?
    public var purchases: [PurchaseBlueprint] = []
    /// Added as they are, for unknown-type and broken-payload tests.
    public var extraAttributes: [ReceiptAttributeBlueprint] = []
    /// Types left out, for missing-attribute tests.
    public var omittedTypes: Set<Int64> = []

    /// - Parameter deviceIdentifier: a random UUID when nil (read it back from `deviceIdentifier`).
    public init(
        bundleID: String, applicationVersion: String, deviceIdentifier: DeviceIdentifier? = nil,
        creationDate: ReceiptDate = ReceiptDate(Date())
    ) {
        self.bundleID = bundleID
        self.applicationVersion = applicationVersion
        self.originalApplicationVersion = "1.0"
        self.deviceIdentifier = deviceIdentifier ?? DeviceIdentifier(bytes: Self.randomBytes(16))!
        self.opaqueValue = Self.randomBytes(16)
        self.creationDate = creationDate
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// SHA1(device id ‖ opaque value ‖ bundle-id attribute bytes), as the App Store computes attribute 5.
    public var deviceHash: [UInt8] {
        Digest.sha1.hash(deviceIdentifier.bytes + opaqueValue + DERWriter.utf8String(bundleID))
    }

    public var attributes: [ReceiptAttributeBlueprint] {
        let purchaseSets = purchases.map { purchase in
            ReceiptAttributeBlueprint(type: 17, value: DERWriter.set(of: purchase.attributes.map(\.encoded)))
        }
        let base: [ReceiptAttributeBlueprint] = [
            .utf8(0, receiptType), .integer(1, appItemID), .utf8(2, bundleID), .utf8(3, applicationVersion),
            ReceiptAttributeBlueprint(type: 4, value: opaqueValue), ReceiptAttributeBlueprint(type: 5, value: deviceHash),
            .date(12, creationDate), .date(18, originalPurchaseDate ?? creationDate), .utf8(19, originalApplicationVersion),
        ] + (downloadID.map { [.integer(15, $0)] } ?? []) + (expirationDate.map { [.date(21, $0)] } ?? [])
        return (base + purchaseSets + extraAttributes).filter { !omittedTypes.contains($0.type) }
    }

    /// The DER payload: a SET of attributes, in DER order as Apple's are.
    public var payload: [UInt8] { DERWriter.set(of: attributes.map(\.encoded)) }

    /// A signed receipt (DER).
    public func forge(with authority: TestCertificateAuthority, digest: SignatureDigest = .sha256) throws -> [UInt8] {
        try authority.sign(payload: payload, digest: digest)
    }
}

public struct BlueprintError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
