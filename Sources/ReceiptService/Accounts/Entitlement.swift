public import JSONText
import Ledger
import ReceiptEngine

/// What an account may use (`pro`, `no_ads`), as of one instant, and why: the purchase that grants it, or the one
/// that granted it last and when and why that ended.
public struct Entitlement: Sendable, Hashable {
    /// The offer the deciding transaction was bought under.
    public enum PeriodType: String, Sendable, Hashable, CaseIterable {
        case normal
        /// An introductory free trial (StoreKit 2 `offerType` 1 with `offerDiscountType` `FREE_TRIAL`; a receipt's
        /// `is_trial_period`).
        case trial
        /// A paid introductory offer (`offerType` 1 otherwise; a receipt's `is_in_intro_offer_period`).
        case intro
        /// A promotional offer, offer code or win-back offer (`offerType` 2, 3 or 4; a receipt's
        /// `promotional_offer_id`).
        case promotional
    }

    /// Why an entitlement the account once had no longer grants.
    public enum EndReason: String, Sendable, Hashable, CaseIterable {
        /// Its subscription or non-renewing period ran out.
        case expired
        /// Apple revoked the purchase: a refund, or family sharing withdrawn (`REVOKE`).
        case refunded
        /// Its subscription is in billing retry, past any grace period.
        case billingRetry = "billing_retry"
        /// The customer moved to another product of the subscription group, which grants instead.
        case upgraded
        /// The account's purchase moved to another account (a restore on the same Apple ID).
        case transferred
    }

    /// When and why it stopped granting.
    public struct End: Sendable, Hashable {
        public var date: Int64
        public var reason: EndReason
    }

    /// The name configured in `apps[].entitlements`.
    public var name: String
    public var productID: String
    public var originalTransactionID: String
    /// The transaction that decides: a subscription's latest, or the one-time purchase.
    public var transactionID: String
    public var purchaseDate: Int64?
    /// When it stops granting unless renewed: a subscription's expiry, a non-renewing subscription's purchase date
    /// plus its configured duration; nil: never.
    public var expiresDate: Int64?
    public var gracePeriodExpiresDate: Int64?
    /// The renewal info's auto-renew status; nil when unknown or not a subscription.
    public var willRenew: Bool?
    public var isInBillingRetryPeriod: Bool
    public var periodType: PeriodType
    /// `PURCHASED` or `FAMILY_SHARED`.
    public var ownership: String
    public var environment: String?
    /// nil while it grants.
    public var end: End?

    public init(
        name: String, productID: String, originalTransactionID: String, transactionID: String, purchaseDate: Int64?,
        expiresDate: Int64?, gracePeriodExpiresDate: Int64? = nil, willRenew: Bool? = nil,
        isInBillingRetryPeriod: Bool = false, periodType: PeriodType = .normal, ownership: String = "PURCHASED",
        environment: String?, end: End? = nil
    ) {
        self.name = name
        self.productID = productID
        self.originalTransactionID = originalTransactionID
        self.transactionID = transactionID
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.willRenew = willRenew
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
        self.periodType = periodType
        self.ownership = ownership
        self.environment = environment
        self.end = end
        self.grantsUntil = expiresDate
    }

    public var isActive: Bool { end == nil }

    /// Until when, for one line about it: while active, when it stops granting unless renewed (the grace period's
    /// end while in one; nil: never); once inactive, when it ended.
    public var until: Int64? { end?.date ?? grantsUntil }

    /// When an active one stops granting unless renewed: the expiry, or a grace period's end.
    var grantsUntil: Int64?

    /// The entitlement's object in `GET /v1/accounts/{account}`; `ended_date` and `ended_reason` only once inactive.
    public var json: JSONValue { .building { sink in write(to: &sink) } }

    /// ``json`` told to `sink`: an account's answer writes it straight as text, without a tree to build and free.
    func write<Sink: JSONSink>(to sink: inout Sink) {
        sink.beginObject()
        sink.key("active")
        sink.bool(isActive)
        sink.key("product_id")
        sink.string(productID)
        sink.key("original_transaction_id")
        sink.string(originalTransactionID)
        sink.key("expires_date")
        sink.value(Self.date(expiresDate))
        sink.key("grace_period_expires_date")
        sink.value(Self.date(gracePeriodExpiresDate))
        sink.key("will_renew")
        sink.bool(willRenew)
        sink.key("is_in_billing_retry_period")
        sink.bool(isInBillingRetryPeriod)
        sink.key("period_type")
        sink.string(periodType.rawValue)
        sink.key("ownership")
        sink.string(ownership)
        sink.key("environment")
        sink.string(environment)
        sink.key("purchase_date")
        sink.value(Self.date(purchaseDate))
        if let end {
            sink.key("ended_date")
            sink.value(Self.date(end.date))
            sink.key("ended_reason")
            sink.string(end.reason.rawValue)
        }
        sink.endObject()
    }

    static func date(_ milliseconds: Int64?) -> JSONValue {
        .string(milliseconds.map { ReceiptDate(millisecondsSince1970: $0).rfc3339 })
    }
}
