public import JSONText
public import ReceiptEngine

/// What a StoreKit 2 JWS signs, told by the payload's members (Apple's payloads carry no type field).
public enum JWSKind: String, Sendable, Hashable, CaseIterable {
    /// `Transaction.jwsRepresentation` or a notification's `signedTransactionInfo`: has `transactionId`.
    case transaction
    /// `signedRenewalInfo`: `autoRenewStatus` or `autoRenewProductId`, no `transactionId`.
    case renewalInfo = "renewal_info"
    /// `AppTransaction.jwsRepresentation`: `receiptType`, no `transactionId`.
    case appTransaction = "app_transaction"
    /// App Store Server Notifications V2 (`signedPayload`): has `notificationType`.
    case notification

    /// The kind of a payload; nil when it is none of them.
    public init?(payload: JSONValue) {
        if payload["notificationType"] != nil {
            self = .notification
        } else if payload["transactionId"] != nil {
            self = .transaction
        } else if payload["receiptType"] != nil {
            self = .appTransaction
        } else if payload["autoRenewStatus"] != nil || payload["autoRenewProductId"] != nil {
            self = .renewalInfo
        } else {
            return nil
        }
    }

    /// The payload member that holds the signing time: the instant the chain must have been valid at.
    var signingTimeMember: String { self == .appTransaction ? "receiptCreationDate" : "signedDate" }
}

/// Reads Apple's members leniently: Apple adds fields and values every year, and a member of an unexpected type
/// reads as absent rather than failing a genuine, signed payload.
enum PayloadField {
    static func string(_ payload: JSONValue, _ key: String) -> String? {
        switch payload[key] {
        case .string(let value)?: value
        // Identifiers are strings in Apple's schema; a number where one is expected still names the same thing.
        case .integer(let value)?: String(value)
        default: nil
        }
    }

    static func integer(_ payload: JSONValue, _ key: String) -> Int64? {
        switch payload[key] {
        case .integer(let value)?: value
        case .number(let value)?: value.isFinite && value.rounded(.towardZero) == value ? Int64(exactly: value) : nil
        default: nil
        }
    }

    static func bool(_ payload: JSONValue, _ key: String) -> Bool? {
        switch payload[key] {
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

    public init(payload: JSONValue) {
        typealias F = PayloadField
        transactionID = F.string(payload, "transactionId")
        originalTransactionID = F.string(payload, "originalTransactionId")
        webOrderLineItemID = F.string(payload, "webOrderLineItemId")
        productID = F.string(payload, "productId")
        bundleID = F.string(payload, "bundleId")
        type = F.string(payload, "type")
        quantity = F.integer(payload, "quantity")
        purchaseDate = F.date(payload, "purchaseDate")
        originalPurchaseDate = F.date(payload, "originalPurchaseDate")
        expiresDate = F.date(payload, "expiresDate")
        revocationDate = F.date(payload, "revocationDate")
        revocationReason = F.integer(payload, "revocationReason")
        inAppOwnershipType = F.string(payload, "inAppOwnershipType")
        appAccountToken = F.string(payload, "appAccountToken")
        offerType = F.integer(payload, "offerType")
        environment = F.environmentName(F.string(payload, "environment"))
        signedDate = F.date(payload, "signedDate")
    }

    /// The subscription state this transaction shows at `now`, when it has an expiry date.
    public func subscriptionStatus(at now: ReceiptDate) -> SubscriptionStatus? {
        guard let expiresDate else { return nil }
        let cancelled = revocationDate != nil
        return SubscriptionStatus(
            productID: productID, originalTransactionID: originalTransactionID ?? transactionID ?? "",
            latestTransactionID: transactionID, expiresDate: expiresDate, isActive: expiresDate > now && !cancelled,
            isCancelled: cancelled)
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

    public init(payload: JSONValue) {
        typealias F = PayloadField
        originalTransactionID = F.string(payload, "originalTransactionId")
        productID = F.string(payload, "productId")
        autoRenewProductID = F.string(payload, "autoRenewProductId")
        autoRenewStatus = F.bool(payload, "autoRenewStatus")
        expirationIntent = F.integer(payload, "expirationIntent")
        isInBillingRetryPeriod = F.bool(payload, "isInBillingRetryPeriod")
        gracePeriodExpiresDate = F.date(payload, "gracePeriodExpiresDate")
        renewalDate = F.date(payload, "renewalDate")
        environment = F.environmentName(F.string(payload, "environment"))
        signedDate = F.date(payload, "signedDate")
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

    public init(payload: JSONValue) {
        typealias F = PayloadField
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
