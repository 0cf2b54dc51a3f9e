public import JSONText
public import ReceiptEngine

/// A notification's nested JWS whose signature verified: which member carried it and what it signs.
public struct NestedPayload: Sendable, Hashable {
    /// `signedTransactionInfo`, `signedRenewalInfo` or `signedAppTransactionInfo`.
    public var member: String
    public var payload: JSONValue
    /// The payload's text as signed, when it is byte for byte what `payload.serialized()` writes: the ledger stores
    /// it rather than write the payload again (see `JWSValidationResult.payloadText`).
    package var payloadText: [UInt8]?

    init(member: String, payload: JSONValue, payloadText: [UInt8]?) {
        self.member = member
        self.payload = payload
        self.payloadText = payloadText
    }
}

/// The verdict on one StoreKit 2 JWS, with what it signs whenever its signature verified.
///
/// Nothing from a payload whose signature did not verify is reported: `kind`, `environment`, `signedDate`,
/// `payload` and the views stay nil until then.
public struct JWSValidationResult: Sendable, Hashable {
    /// nil when the JWS is valid; `reason` is set for `certificate_untrusted`.
    public var error: ValidationError?
    public var kind: SignedDataKind?
    public var environment: ReceiptEnvironment?
    public var checks = ValidationChecks()
    /// `signedDate`, for an app transaction `receiptCreationDate`.
    public var signedDate: ReceiptDate?
    /// The verified payload exactly as signed (camelCase, millisecond numbers, unknown members kept).
    public var payload: JSONValue? {
        get { verifiedPayload }
        set {
            verifiedPayload = newValue
            payloadText = nil
        }
    }
    private var verifiedPayload: JSONValue?
    /// The payload's text as signed, when it is byte for byte what `payload.serialized()` writes: answers copy it
    /// rather than write the payload again. Any change to `payload` drops it.
    package private(set) var payloadText: [UInt8]?

    mutating func setPayload(_ payload: JSONValue, text: [UInt8]?) {
        verifiedPayload = payload
        payloadText = text
    }
    /// The transaction, or a notification's verified `signedTransactionInfo`.
    public var transaction: SignedTransaction?
    /// The renewal info, or a notification's verified `signedRenewalInfo`.
    public var renewalInfo: SignedRenewalInfo?
    /// The app transaction, or a notification's verified `signedAppTransactionInfo`.
    public var appTransaction: SignedAppTransaction?
    public var notification: SignedNotification?
    /// A notification's nested payloads that verified, in the order above.
    public var nestedPayloads: [NestedPayload] = []
    /// From a transaction (or a notification's) with an expiry date, at the validation time.
    public var subscriptions: [SubscriptionStatus] = []

    public init() {}

    public var isValid: Bool { error == nil }
}
