/// How a transaction reached the ledger.
public enum TransactionSource: String, Sendable, Hashable, CaseIterable {
    /// An in-app entry of a classic receipt, as of the receipt's creation date.
    case receipt
    /// A StoreKit 2 signed transaction or renewal info verified on its own.
    case jws
    /// Nested in a verified App Store Server Notification V2.
    case notification
    /// Fetched from Apple's App Store Server API (an order lookup, transaction info, history) and verified.
    case serverAPI = "server_api"
}

/// One verified transaction, as of `signedDate`. Dates are Unix milliseconds.
public struct TransactionFacts: Sendable, Hashable {
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    public var bundleID: String?
    /// Apple's product type, e.g. `Auto-Renewable Subscription`.
    public var type: String?
    public var purchaseDate: Int64?
    public var originalPurchaseDate: Int64?
    public var expiresDate: Int64?
    public var revocationDate: Int64?
    public var revocationReason: Int?
    public var inAppOwnershipType: String?
    public var webOrderLineItemID: String?
    public var environment: String?
    /// StoreKit 2's `isUpgraded`: the customer moved to a higher product of the group, so this one no longer
    /// entitles to anything even before it expires.
    public var isUpgraded: Bool?
    /// StoreKit 2's `appAccountToken`, lowercase: the UUID the app passed at purchase to name its user, which links
    /// the purchase to the account that registered it. Receipts carry none.
    public var appAccountToken: String?
    /// When Apple signed these facts (for a receipt entry: the receipt's creation date); orders versions.
    public var signedDate: Int64
    /// The verified payload as Apple sent it: a JSON object's text.
    public var payloadJSON: String

    public init(
        transactionID: String, originalTransactionID: String, productID: String, bundleID: String? = nil,
        type: String? = nil, purchaseDate: Int64? = nil, originalPurchaseDate: Int64? = nil, expiresDate: Int64? = nil,
        revocationDate: Int64? = nil, revocationReason: Int? = nil, inAppOwnershipType: String? = nil,
        webOrderLineItemID: String? = nil, environment: String? = nil, isUpgraded: Bool? = nil,
        appAccountToken: String? = nil, signedDate: Int64, payloadJSON: String
    ) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.bundleID = bundleID
        self.type = type
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.revocationReason = revocationReason
        self.inAppOwnershipType = inAppOwnershipType
        self.webOrderLineItemID = webOrderLineItemID
        self.environment = environment
        self.isUpgraded = isUpgraded
        self.appAccountToken = appAccountToken
        self.signedDate = signedDate
        self.payloadJSON = payloadJSON
    }

    /// Apple's `type` for the purchases that renew; a receipt entry, which names no type, gets it when it expires.
    public static let autoRenewableType = "Auto-Renewable Subscription"

    /// Whether these facts are a purchase that renews: Apple's `type` says so, or (a receipt entry, which has no
    /// type) it has an expiry date.
    public var isAutoRenewable: Bool {
        type.map { $0 == Self.autoRenewableType } ?? (expiresDate != nil)
    }
}

/// One verified subscription renewal info, as of `signedDate`. Dates are Unix milliseconds.
public struct RenewalFacts: Sendable, Hashable {
    public var originalTransactionID: String
    public var productID: String?
    public var autoRenewProductID: String?
    public var autoRenewStatus: Bool?
    public var expirationIntent: Int?
    public var isInBillingRetryPeriod: Bool?
    public var gracePeriodExpiresDate: Int64?
    public var priceIncreaseStatus: Int?
    public var environment: String?
    public var signedDate: Int64
    /// The verified payload as Apple sent it: a JSON object's text.
    public var payloadJSON: String

    public init(
        originalTransactionID: String, productID: String? = nil, autoRenewProductID: String? = nil,
        autoRenewStatus: Bool? = nil, expirationIntent: Int? = nil, isInBillingRetryPeriod: Bool? = nil,
        gracePeriodExpiresDate: Int64? = nil, priceIncreaseStatus: Int? = nil, environment: String? = nil,
        signedDate: Int64, payloadJSON: String
    ) {
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.autoRenewProductID = autoRenewProductID
        self.autoRenewStatus = autoRenewStatus
        self.expirationIntent = expirationIntent
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.priceIncreaseStatus = priceIncreaseStatus
        self.environment = environment
        self.signedDate = signedDate
        self.payloadJSON = payloadJSON
    }
}

/// One verified App Store Server Notification V2 with what it carried.
public struct NotificationFacts: Sendable, Hashable {
    /// `notificationUUID`: the same on every retry of one notification.
    public var uuid: String
    public var type: String
    public var subtype: String?
    public var signedDate: Int64
    public var environment: String?
    public var bundleID: String?
    /// The `signedPayload` string exactly as received.
    public var signedPayload: String
    public var transaction: TransactionFacts?
    public var renewal: RenewalFacts?
    /// The decoded `appTransactionInfo` as JSON text, if the notification had one.
    public var appTransactionJSON: String?
    /// `data.consumptionRequestReason` of a `CONSUMPTION_REQUEST`.
    public var consumptionRequestReason: String?

    public init(
        uuid: String, type: String, subtype: String? = nil, signedDate: Int64, environment: String? = nil,
        bundleID: String? = nil, signedPayload: String, transaction: TransactionFacts? = nil,
        renewal: RenewalFacts? = nil, appTransactionJSON: String? = nil, consumptionRequestReason: String? = nil
    ) {
        self.uuid = uuid
        self.type = type
        self.subtype = subtype
        self.signedDate = signedDate
        self.environment = environment
        self.bundleID = bundleID
        self.signedPayload = signedPayload
        self.transaction = transaction
        self.renewal = renewal
        self.appTransactionJSON = appTransactionJSON
        self.consumptionRequestReason = consumptionRequestReason
    }
}

/// What recording a notification did.
public enum NotificationWrite: Sendable, Hashable {
    /// First delivery of this uuid: stored, and its facts merged.
    case stored
    /// This uuid was already stored with the same signed payload (Apple's retry); nothing changed.
    case duplicate
    /// This uuid was already stored with a different signed payload: Apple never does that, so someone or something
    /// replayed a uuid with other content. Nothing changed: the first payload stays the record.
    case conflict
}

/// A notification as stored: its envelope and which transaction it was about.
public struct StoredNotification: Sendable, Hashable {
    public var uuid: String
    public var type: String
    public var subtype: String?
    public var signedDate: Int64
    public var environment: String?
    public var bundleID: String?
    public var signedPayload: String
    public var transactionID: String?
    public var originalTransactionID: String?
    public var appTransactionJSON: String?
    public var receivedAt: Int64
}

/// What one stored notification about a subscription was, and when Apple signed it.
public struct NotificationSummary: Sendable, Hashable {
    public var uuid: String
    public var type: String
    public var subtype: String?
    public var signedDate: Int64
}

/// Who was granted a purchase, and when.
public struct Claim: Sendable, Hashable {
    public var account: String
    public var claimedAt: Int64
}

/// The answer to a claim: a purchase is granted to one account, once.
public enum ClaimOutcome: Sendable, Hashable {
    /// Granted to the caller's account; `first` is false when that account had claimed it before, and `claimedAt`
    /// is then the original claim's time.
    case granted(first: Bool, claimedAt: Int64)
    /// Another account holds it.
    case alreadyClaimed(Claim)
    /// The ledger has never recorded this transaction.
    case unknownTransaction
    /// Apple revoked it (a refund, or family sharing withdrawn): never granted. `claim` is the claim made before the
    /// revocation, if one was; it stays on record.
    case revoked(date: Int64, reason: Int?, claim: Claim?)
}

/// A stored transaction with how and when the ledger learned of it, and who claimed it.
public struct TransactionRecord: Sendable, Hashable {
    public var facts: TransactionFacts
    /// When the ledger first recorded this transaction from any source.
    public var firstSeen: Int64
    /// Each source the transaction arrived from, with when that source first delivered it.
    public var sources: [TransactionSource: Int64]
    public var claim: Claim?
}

/// Row counts per table, for operators.
public struct LedgerCounts: Sendable, Hashable {
    public var transactions: Int64
    public var transactionSources: Int64
    public var renewalInfos: Int64
    public var notifications: Int64
    public var claims: Int64
    public var accounts: Int64 = 0
    public var accountLinks: Int64 = 0
}
