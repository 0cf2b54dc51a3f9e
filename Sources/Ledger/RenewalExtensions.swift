/// How Apple answered a renewal extension receiptd asked for.
public enum RenewalExtensionOutcome: String, Sendable, Hashable, CaseIterable {
    /// Apple moved the renewal date (`effective_date`); for a mass extension, Apple reported it complete.
    case extended
    /// Apple answered with an error of its own (`apple_error_code`): the subscription's limits, the days, the reason.
    case refused
    /// Apple could not be asked, or did not answer in time: nothing is known to have changed.
    case failed
    /// A mass extension Apple accepted and is still working through.
    case requested
}

/// One renewal extension asked of Apple (one subscription, or every active subscriber of a product) and its answer:
/// a row of `renewal_extensions`, keyed by the `requestIdentifier` receiptd sent.
public struct RenewalExtensionRecord: Sendable, Hashable {
    public var requestIdentifier: String
    /// One subscription's extension; nil for a mass extension.
    public var originalTransactionID: String?
    /// A mass extension's product; nil for one subscription's.
    public var productID: String?
    public var bundleID: String
    public var environment: String
    public var days: Int
    /// Apple's `extendReasonCode`, 0–3.
    public var reasonCode: Int
    /// A mass extension's ISO 3166-1 alpha-3 storefronts; empty for every storefront.
    public var storefronts: [String]
    /// Who asked: an API token's name, `support-page` or `cli`.
    public var requestedBy: String?
    /// Unix ms.
    public var requestedAt: Int64
    public var outcome: RenewalExtensionOutcome
    /// The new expiry Apple answered (Unix ms).
    public var effectiveDate: Int64?
    public var webOrderLineItemID: String?
    /// The HTTP status of Apple's last answer, and its `errorCode` when it refused.
    public var appleStatus: Int?
    public var appleErrorCode: Int64?
    /// Why it was refused or failed, as told to the caller (never a secret).
    public var message: String?
    /// A mass extension's completion (Unix ms) and counts, once Apple reports it complete.
    public var completedAt: Int64?
    public var succeededCount: Int64?
    public var failedCount: Int64?

    public init(
        requestIdentifier: String, originalTransactionID: String? = nil, productID: String? = nil, bundleID: String,
        environment: String, days: Int, reasonCode: Int, storefronts: [String] = [], requestedBy: String?,
        requestedAt: Int64, outcome: RenewalExtensionOutcome, effectiveDate: Int64? = nil,
        webOrderLineItemID: String? = nil, appleStatus: Int? = nil, appleErrorCode: Int64? = nil,
        message: String? = nil, completedAt: Int64? = nil, succeededCount: Int64? = nil, failedCount: Int64? = nil
    ) {
        self.requestIdentifier = requestIdentifier
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.bundleID = bundleID
        self.environment = environment
        self.days = days
        self.reasonCode = reasonCode
        self.storefronts = storefronts
        self.requestedBy = requestedBy
        self.requestedAt = requestedAt
        self.outcome = outcome
        self.effectiveDate = effectiveDate
        self.webOrderLineItemID = webOrderLineItemID
        self.appleStatus = appleStatus
        self.appleErrorCode = appleErrorCode
        self.message = message
        self.completedAt = completedAt
        self.succeededCount = succeededCount
        self.failedCount = failedCount
    }
}

/// Every renewal extension asked of Apple, with Apple's answer (issue 26): `renewal_extensions` of schema 7.
public protocol LedgerRenewalExtensions: Sendable {
    /// Stores `record`, replacing the row of the same request identifier (a mass extension's completion). An
    /// `extended` extension of one subscription is also a ``LedgerChangeCause/renewalExtension(requestIdentifier:effectiveDate:)``
    /// change, whose events are stored in the same transaction: the answer is a fact and an event together.
    func record(renewalExtension record: RenewalExtensionRecord) throws(LedgerError)

    /// One subscription's extensions, oldest first.
    func renewalExtensions(originalTransactionID: String) throws(LedgerError) -> [RenewalExtensionRecord]

    /// The extension asked with this request identifier, if any.
    func renewalExtension(requestIdentifier: String) throws(LedgerError) -> RenewalExtensionRecord?
}
