public import JSONText
public import ReceiptEngine

/// What a StoreKit 2 JWS signs, told by the payload's members (Apple's payloads carry no type field).
extension SignedDataKind {
    /// The kind a payload shows by its members, for a caller who names none; nil when it shows none. Apple's
    /// libraries decode by the kind the caller asks for, with every member optional; without that, the members only
    /// one kind has decide, and a top-level `bundleId` with no other sign is a transaction (Apple's own test
    /// transaction is `{"environment", "bundleId", "signedDate"}`: app transactions always have `receiptType`).
    public init?(payload: JSONValue) {
        self.init(payload: payload, shown: Self.kindsShownAsMask(by: payload))
    }

    /// `init(payload:)` with `kindsShownAsMask(by: payload)` already at hand.
    init?(payload: JSONValue, shown: ShownKinds) {
        if let first = Self.jwsKinds.first(where: shown.contains) {
            self = first
        } else if payload["bundleId"] != nil {
            self = .transaction
        } else {
            return nil
        }
    }

    /// The kinds whose own members (the discriminators below) the payload carries.
    public static func kindsShown(by payload: JSONValue) -> Set<SignedDataKind> {
        let shown = kindsShownAsMask(by: payload)
        return Set(jwsKinds.filter(shown.contains))
    }

    /// `kindsShown(by:)` without a `Set`: every verification asks, for each of the payload's members.
    static func kindsShownAsMask(by payload: JSONValue) -> ShownKinds {
        guard case .object(let members) = payload else { return ShownKinds() }
        var shown = ShownKinds()
        discriminatorBuckets.withUnsafeBufferPointer { buckets in
            for member in members {
                for candidate in buckets[Self.bucket(of: member.key)] where candidate.name == member.key {
                    shown.insert(candidate.kind)
                }
            }
        }
        return shown
    }

    /// A bucket by length and first and last bytes: telling a member is no discriminator then costs no hashing of
    /// its name, and most members land in an empty bucket.
    private static func bucket(of name: String) -> Int {
        let utf8 = name.utf8
        guard let first = utf8.first, let last = utf8.last else { return 0 }
        return (utf8.count &* 7 &+ Int(first) &+ Int(last) &* 3) & 63
    }

    private static let discriminatorBuckets: [[(name: String, kind: SignedDataKind)]] = {
        var buckets = [[(name: String, kind: SignedDataKind)]](repeating: [], count: 64)
        for (name, kind) in discriminators { buckets[bucket(of: name)].append((name, kind)) }
        return buckets
    }()

    /// Members only one kind has, in Apple's documented schemas. Shared ones (`originalTransactionId`, `productId`,
    /// `appTransactionId`, `offerType`, `currency`, `environment`, `signedDate`…) tell nothing.
    static let discriminators: [String: SignedDataKind] = {
        var table: [String: SignedDataKind] = [:]
        for name in [
            "notificationType", "notificationUUID", "data", "summary", "appData", "externalPurchaseToken",
        ] { table[name] = .notification }
        for name in [
            "transactionId", "webOrderLineItemId", "purchaseDate", "expiresDate", "type", "quantity",
            "inAppOwnershipType", "transactionReason", "isUpgraded", "revocationDate", "revocationReason",
            "revocationType", "revocationPercentage", "storefront", "storefrontId", "price",
            "subscriptionGroupIdentifier", "billingPlanType",
        ] { table[name] = .transaction }
        for name in [
            "receiptType", "appAppleId", "applicationVersion", "originalApplicationVersion",
            "versionExternalIdentifier", "receiptCreationDate", "preorderDate", "originalPlatform",
        ] { table[name] = .appTransaction }
        for name in [
            "autoRenewStatus", "autoRenewProductId", "expirationIntent", "isInBillingRetryPeriod",
            "priceIncreaseStatus", "gracePeriodExpiresDate", "renewalDate", "recentSubscriptionStartDate",
            "renewalPrice", "eligibleWinBackOfferIds", "renewalBillingPlanType",
        ] { table[name] = .renewalInfo }
        return table
    }()

    /// The payload member that holds the signing time: the instant the chain must have been valid at.
    var signingTimeMember: String {
        switch self {
        case .appTransaction: "receiptCreationDate"
        case .receipt, .transaction, .renewalInfo, .notification: "signedDate"
        }
    }

    /// The members the ledger needs to record this kind; nil for receipts (recorded
    /// per purchase) and for kinds `/v1/validate` never records.
    public var ledgerMembers: [String]? {
        switch self {
        case .transaction: ["transactionId", "signedDate"]
        case .renewalInfo: ["originalTransactionId", "signedDate"]
        case .receipt, .appTransaction, .notification: nil
        }
    }
}

/// A set of JWS kinds as bits.
struct ShownKinds {
    private var bits: UInt8 = 0

    private static func bit(_ kind: SignedDataKind) -> UInt8 {
        switch kind {
        case .receipt: 1
        case .transaction: 2
        case .renewalInfo: 4
        case .appTransaction: 8
        case .notification: 16
        }
    }

    var isEmpty: Bool { bits == 0 }
    func contains(_ kind: SignedDataKind) -> Bool { bits & Self.bit(kind) != 0 }
    mutating func insert(_ kind: SignedDataKind) { bits |= Self.bit(kind) }
}

/// Reads Apple's members leniently: Apple adds fields and values every year, and a member of an unexpected type
/// reads as absent rather than failing a genuine, signed payload.
enum PayloadField {
    static func string(_ payload: JSONValue, _ key: String) -> String? {
        string(payload[key])
    }

    static func string(_ value: JSONValue?) -> String? {
        switch value {
        case .string(let value)?: value
        // Identifiers are strings in Apple's schema; a number where one is expected still names the same thing.
        case .integer(let value)?: String(value)
        default: nil
        }
    }

    static func integer(_ payload: JSONValue, _ key: String) -> Int64? {
        integer(payload[key])
    }

    static func integer(_ value: JSONValue?) -> Int64? {
        switch value {
        case .integer(let value)?: value
        case .number(let value)?: value.isFinite && value.rounded(.towardZero) == value ? Int64(exactly: value) : nil
        default: nil
        }
    }

    static func bool(_ payload: JSONValue, _ key: String) -> Bool? {
        bool(payload[key])
    }

    static func bool(_ value: JSONValue?) -> Bool? {
        switch value {
        case .bool(let value)?: value
        // autoRenewStatus is 0 or 1.
        case .integer(let value)?: value != 0
        default: nil
        }
    }

    /// Unix milliseconds, possibly fractional (Xcode writes `1697679936056.485`); the fraction is dropped.
    static func date(_ payload: JSONValue, _ key: String) -> ReceiptDate? {
        payload[key].flatMap(date(_:))
    }

    static func date(_ value: JSONValue?) -> ReceiptDate? {
        value.flatMap(date(_:))
    }

    static func date(_ value: JSONValue) -> ReceiptDate? {
        switch value {
        case .integer(let milliseconds): return ReceiptDate(millisecondsSince1970: milliseconds)
        case .number(let milliseconds):
            // ±8.64e15 ms is JavaScript's date range; beyond it Int64 conversion could trap.
            guard milliseconds.isFinite, abs(milliseconds) <= 8.64e15 else { return nil }
            return ReceiptDate(millisecondsSince1970: Int64(milliseconds.rounded(.down)))
        default: return nil
        }
    }

    /// An array of strings as sent (`eligibleWinBackOfferIds`, `storefrontCountryCodes`); other elements are dropped.
    static func strings(_ payload: JSONValue, _ key: String) -> [String]? {
        strings(payload[key])
    }

    static func strings(_ value: JSONValue?) -> [String]? {
        guard case .array(let elements)? = value else { return nil }
        return elements.compactMap { if case .string(let text) = $0 { text } else { nil } }
    }

    /// A nested object exactly as sent (`commitmentInfo`, `advancedCommerceInfo`).
    static func object(_ value: JSONValue?) -> JSONValue? {
        guard let value, case .object = value else { return nil }
        return value
    }

    /// `Production`, `Sandbox`, `Xcode`; `LocalTesting` (Xcode's newer name) counts as Xcode.
    static func environment(_ text: String?) -> ReceiptEnvironment? {
        switch text {
        case "Production": .production
        case "Sandbox", "ProductionSandbox": .sandbox
        case "Xcode", "LocalTesting": .xcode
        default: nil
        }
    }

    /// The environment's normalized name when known, the signed text otherwise.
    static func environmentName(_ text: String?) -> String? {
        environment(text)?.rawValue ?? text
    }
}

/// A payload's members read one after another. A payload whose names are known unique (`CompactJWS` refuses
/// repeats) is searched from after the member found last, so reading it in Apple's order costs one comparison per
/// member and any other order no more than a scan; otherwise every lookup scans from the first member, which it
/// returns, like `JSONValue`'s subscript.
struct PayloadMembers {
    private let members: [(key: String, value: JSONValue)]
    private let namesAreUnique: Bool
    private var next = 0

    init(_ payload: JSONValue, namesAreUnique: Bool) {
        if case .object(let members) = payload { self.members = members } else { members = [] }
        self.namesAreUnique = namesAreUnique
    }

    mutating func callAsFunction(_ name: String) -> JSONValue? {
        let count = members.count
        let length = name.utf8.count
        var index = namesAreUnique ? next : 0
        for _ in 0..<count {
            if index == count { index = 0 }
            let key = members[index].key
            index += 1
            if key.utf8.count == length && key == name {
                next = index
                return members[index - 1].value
            }
        }
        return nil
    }
}

/// A signed transaction (`JWSTransactionDecodedPayload`), normalized. The payload itself is kept in the result.
public struct SignedTransaction: Sendable, Hashable {
    public var transactionID: String?
    public var originalTransactionID: String?
    public var webOrderLineItemID: String?
    public var productID: String?
    public var bundleID: String?
    public var type: String?
    public var quantity: Int64?
    public var purchaseDate: ReceiptDate?
    public var originalPurchaseDate: ReceiptDate?
    public var expiresDate: ReceiptDate?
    public var revocationDate: ReceiptDate?
    public var revocationReason: Int64?
    public var inAppOwnershipType: String?
    public var appAccountToken: String?
    public var offerType: Int64?
    /// Normalized: `LocalTesting` reads `Xcode`.
    public var environment: String?
    public var signedDate: ReceiptDate?
    /// Milli-units of `currency`, as Apple sends it.
    public var price: Int64?
    public var currency: String?
    public var storefront: String?
    public var storefrontID: String?
    /// `PURCHASE` or `RENEWAL`.
    public var transactionReason: String?
    /// The customer moved to a higher subscription of the group: this one no longer gives service.
    public var isUpgraded: Bool?
    public var subscriptionGroupIdentifier: String?
    public var offerIdentifier: String?
    public var offerDiscountType: String?
    public var offerPeriod: String?
    public var appTransactionID: String?
    public var revocationType: String?
    /// Thousandths of a percent, as Apple sends it.
    public var revocationPercentage: Int64?
    public var billingPlanType: String?
    public var commitmentInfo: JSONValue?
    public var advancedCommerceInfo: JSONValue?
    /// Device-side transactions only.
    public var deviceVerification: String?
    public var deviceVerificationNonce: String?

    public init(payload: JSONValue) {
        var members = PayloadMembers(payload, namesAreUnique: false)
        self.init(members: &members)
    }

    /// In the order Apple writes a transaction's members.
    init(members read: inout PayloadMembers) {
        typealias F = PayloadField
        transactionID = F.string(read("transactionId"))
        originalTransactionID = F.string(read("originalTransactionId"))
        webOrderLineItemID = F.string(read("webOrderLineItemId"))
        bundleID = F.string(read("bundleId"))
        productID = F.string(read("productId"))
        subscriptionGroupIdentifier = F.string(read("subscriptionGroupIdentifier"))
        purchaseDate = F.date(read("purchaseDate"))
        originalPurchaseDate = F.date(read("originalPurchaseDate"))
        expiresDate = F.date(read("expiresDate"))
        quantity = F.integer(read("quantity"))
        type = F.string(read("type"))
        appAccountToken = F.string(read("appAccountToken"))
        inAppOwnershipType = F.string(read("inAppOwnershipType"))
        signedDate = F.date(read("signedDate"))
        revocationReason = F.integer(read("revocationReason"))
        revocationDate = F.date(read("revocationDate"))
        isUpgraded = F.bool(read("isUpgraded"))
        offerType = F.integer(read("offerType"))
        offerIdentifier = F.string(read("offerIdentifier"))
        environment = F.environmentName(F.string(read("environment")))
        transactionReason = F.string(read("transactionReason"))
        storefront = F.string(read("storefront"))
        storefrontID = F.string(read("storefrontId"))
        price = F.integer(read("price"))
        currency = F.string(read("currency"))
        offerDiscountType = F.string(read("offerDiscountType"))
        appTransactionID = F.string(read("appTransactionId"))
        offerPeriod = F.string(read("offerPeriod"))
        revocationType = F.string(read("revocationType"))
        revocationPercentage = F.integer(read("revocationPercentage"))
        billingPlanType = F.string(read("billingPlanType"))
        commitmentInfo = F.object(read("commitmentInfo"))
        advancedCommerceInfo = F.object(read("advancedCommerceInfo"))
        deviceVerification = F.string(read("deviceVerification"))
        deviceVerificationNonce = F.string(read("deviceVerificationNonce"))
    }

    /// Apple's name for the one product type that renews.
    public static let autoRenewableType = "Auto-Renewable Subscription"

    /// The subscription state this transaction shows at `now`: only for an auto-renewable subscription (or a
    /// payload that names no type) with an expiry date. An upgraded one gives no service: the upgrade's transaction
    /// does.
    public func subscriptionStatus(at now: ReceiptDate) -> SubscriptionStatus? {
        guard let expiresDate, type == nil || type == Self.autoRenewableType else { return nil }
        let cancelled = revocationDate != nil
        let upgraded = isUpgraded == true
        var status = SubscriptionStatus(
            productID: productID, originalTransactionID: originalTransactionID ?? transactionID ?? "",
            latestTransactionID: transactionID, expiresDate: expiresDate,
            isActive: expiresDate > now && !cancelled && !upgraded, isCancelled: cancelled)
        status.isUpgraded = upgraded
        return status
    }
}

/// Signed renewal info (`JWSRenewalInfoDecodedPayload`), normalized. It carries no bundle id.
public struct SignedRenewalInfo: Sendable, Hashable {
    public var originalTransactionID: String?
    public var productID: String?
    public var autoRenewProductID: String?
    /// Apple signs 0 or 1.
    public var autoRenewStatus: Bool?
    public var expirationIntent: Int64?
    public var isInBillingRetryPeriod: Bool?
    public var gracePeriodExpiresDate: ReceiptDate?
    public var renewalDate: ReceiptDate?
    public var environment: String?
    public var signedDate: ReceiptDate?
    /// 0 not yet consented, 1 consented or not needed.
    public var priceIncreaseStatus: Int64?
    public var offerType: Int64?
    public var offerIdentifier: String?
    public var recentSubscriptionStartDate: ReceiptDate?
    /// Milli-units of `currency`.
    public var renewalPrice: Int64?
    public var currency: String?
    public var offerDiscountType: String?
    public var eligibleWinBackOfferIDs: [String]?
    public var appAccountToken: String?
    public var appTransactionID: String?
    public var offerPeriod: String?
    public var advancedCommerceInfo: JSONValue?
    public var commitmentInfo: JSONValue?
    public var renewalBillingPlanType: String?

    public init(payload: JSONValue) {
        var members = PayloadMembers(payload, namesAreUnique: false)
        self.init(members: &members)
    }

    /// In the order Apple writes renewal info's members.
    init(members read: inout PayloadMembers) {
        typealias F = PayloadField
        originalTransactionID = F.string(read("originalTransactionId"))
        autoRenewProductID = F.string(read("autoRenewProductId"))
        productID = F.string(read("productId"))
        autoRenewStatus = F.bool(read("autoRenewStatus"))
        isInBillingRetryPeriod = F.bool(read("isInBillingRetryPeriod"))
        priceIncreaseStatus = F.integer(read("priceIncreaseStatus"))
        gracePeriodExpiresDate = F.date(read("gracePeriodExpiresDate"))
        offerType = F.integer(read("offerType"))
        offerIdentifier = F.string(read("offerIdentifier"))
        signedDate = F.date(read("signedDate"))
        environment = F.environmentName(F.string(read("environment")))
        recentSubscriptionStartDate = F.date(read("recentSubscriptionStartDate"))
        renewalDate = F.date(read("renewalDate"))
        renewalPrice = F.integer(read("renewalPrice"))
        currency = F.string(read("currency"))
        offerDiscountType = F.string(read("offerDiscountType"))
        eligibleWinBackOfferIDs = F.strings(read("eligibleWinBackOfferIds"))
        appAccountToken = F.string(read("appAccountToken"))
        appTransactionID = F.string(read("appTransactionId"))
        offerPeriod = F.string(read("offerPeriod"))
        expirationIntent = F.integer(read("expirationIntent"))
        advancedCommerceInfo = F.object(read("advancedCommerceInfo"))
        commitmentInfo = F.object(read("commitmentInfo"))
        renewalBillingPlanType = F.string(read("renewalBillingPlanType"))
    }
}

/// A signed app transaction (`AppTransaction`), normalized.
public struct SignedAppTransaction: Sendable, Hashable {
    public var bundleID: String?
    public var appAppleID: Int64?
    public var applicationVersion: String?
    public var originalApplicationVersion: String?
    /// `Production`, `Sandbox`, `Xcode` (`LocalTesting` normalized to `Xcode`).
    public var receiptType: String?
    public var receiptCreationDate: ReceiptDate?
    public var originalPurchaseDate: ReceiptDate?
    public var appTransactionID: String?
    public var originalPlatform: String?
    public var versionExternalIdentifier: Int64?
    public var deviceVerification: String?
    public var deviceVerificationNonce: String?
    public var preorderDate: ReceiptDate?

    public init(payload: JSONValue) {
        typealias F = PayloadField
        versionExternalIdentifier = F.integer(payload, "versionExternalIdentifier")
        deviceVerification = F.string(payload, "deviceVerification")
        deviceVerificationNonce = F.string(payload, "deviceVerificationNonce")
        preorderDate = F.date(payload, "preorderDate")
        bundleID = F.string(payload, "bundleId")
        appAppleID = F.integer(payload, "appAppleId")
        applicationVersion = F.string(payload, "applicationVersion")
        originalApplicationVersion = F.string(payload, "originalApplicationVersion")
        receiptType = F.environmentName(F.string(payload, "receiptType"))
        receiptCreationDate = F.date(payload, "receiptCreationDate")
        originalPurchaseDate = F.date(payload, "originalPurchaseDate")
        appTransactionID = F.string(payload, "appTransactionId")
        originalPlatform = F.string(payload, "originalPlatform")
    }
}

/// An App Store Server Notification V2 (`responseBodyV2DecodedPayload`), normalized. Bundle id, app Apple id and
/// environment come from whichever of `data`, `summary`, `appData` and `externalPurchaseToken` it carries.
public struct SignedNotification: Sendable, Hashable {
    public var notificationType: String?
    public var subtype: String?
    public var notificationUUID: String?
    public var version: String?
    public var signedDate: ReceiptDate?
    public var bundleID: String?
    public var appAppleID: Int64?
    public var environment: String?
    /// `data.status`: Apple's summary of the subscription after the event (1 active … 5 revoked).
    public var status: Int64?
    /// `data.bundleVersion`.
    public var bundleVersion: String?
    /// `data.consumptionRequestReason` (CONSUMPTION_REQUEST).
    public var consumptionRequestReason: String?
    /// The `summary` of a RENEWAL_EXTENSION SUMMARY.
    public var requestIdentifier: String?
    public var succeededCount: Int64?
    public var failedCount: Int64?
    public var productID: String?
    public var storefrontCountryCodes: [String]?
    /// The `externalPurchaseToken` of an EXTERNAL_PURCHASE_TOKEN.
    public var externalPurchaseID: String?
    public var tokenCreationDate: ReceiptDate?

    public init(payload: JSONValue) {
        typealias F = PayloadField
        notificationType = F.string(payload, "notificationType")
        subtype = F.string(payload, "subtype")
        notificationUUID = F.string(payload, "notificationUUID")
        version = F.string(payload, "version")
        signedDate = F.date(payload, "signedDate")
        let section = Self.section(of: payload)
        bundleID = section.flatMap { F.string($0.value, "bundleId") }
        appAppleID = section.flatMap { F.integer($0.value, "appAppleId") }
        environment = Self.environment(of: section)?.rawValue
            ?? section.flatMap { F.string($0.value, "environment") }
        status = payload["data"].flatMap { F.integer($0, "status") }
        bundleVersion = payload["data"].flatMap { F.string($0, "bundleVersion") }
        consumptionRequestReason = payload["data"].flatMap { F.string($0, "consumptionRequestReason") }
        let summary = payload["summary"]
        requestIdentifier = summary.flatMap { F.string($0, "requestIdentifier") }
        succeededCount = summary.flatMap { F.integer($0, "succeededCount") }
        failedCount = summary.flatMap { F.integer($0, "failedCount") }
        productID = summary.flatMap { F.string($0, "productId") }
        storefrontCountryCodes = summary.flatMap { F.strings($0, "storefrontCountryCodes") }
        let token = payload["externalPurchaseToken"]
        externalPurchaseID = token.flatMap { F.string($0, "externalPurchaseId") }
        tokenCreationDate = token.flatMap { F.date($0, "tokenCreationDate") }
    }

    /// The one section that names the app, and its member name.
    static func section(of payload: JSONValue) -> (name: String, value: JSONValue)? {
        for name in ["data", "summary", "appData", "externalPurchaseToken"] {
            if let value = payload[name], case .object = value { return (name, value) }
        }
        return nil
    }

    /// An external purchase token has no environment member; Apple marks Sandbox tokens by their id's prefix.
    static func environment(of section: (name: String, value: JSONValue)?) -> ReceiptEnvironment? {
        guard let section else { return nil }
        if section.name == "externalPurchaseToken" {
            guard let id = PayloadField.string(section.value, "externalPurchaseId") else { return nil }
            return id.hasPrefix("SANDBOX") ? .sandbox : .production
        }
        return PayloadField.environment(PayloadField.string(section.value, "environment"))
    }
}
