public import JSONText
public import ReceiptEngine

/// Each check's outcome for a JWS; a check that never ran (an earlier one failed, nothing to compare, or not
/// applicable to the kind) reads `skipped`. For a notification, a failure in a nested JWS fails the matching check.
public struct JWSChecks: Sendable, Hashable {
    /// The chain (trust and time) and the ES256 signature.
    public var signature: CheckOutcome = .skipped
    public var bundleID: CheckOutcome = .skipped
    public var environment: CheckOutcome = .skipped
    public var appAppleID: CheckOutcome = .skipped
    public var version: CheckOutcome = .skipped
    public var deviceHash: CheckOutcome = .skipped

    public init() {}

    /// Folds a nested JWS's checks in: failed wins over passed, passed over skipped.
    mutating func absorb(_ nested: JWSChecks) {
        func fold(_ mine: inout CheckOutcome, _ theirs: CheckOutcome) {
            if mine == .failed || theirs == .failed {
                mine = .failed
            } else if mine == .passed || theirs == .passed {
                mine = .passed
            }
        }
        fold(&signature, nested.signature)
        fold(&bundleID, nested.bundleID)
        fold(&environment, nested.environment)
        fold(&appAppleID, nested.appAppleID)
        fold(&version, nested.version)
        fold(&deviceHash, nested.deviceHash)
    }
}

/// A notification's nested JWS whose signature verified: which member carried it and what it signs.
public struct NestedPayload: Sendable, Hashable {
    /// `signedTransactionInfo`, `signedRenewalInfo` or `signedAppTransactionInfo`.
    public var member: String
    public var payload: JSONValue
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
    public var checks = JWSChecks()
    /// `signedDate`, for an app transaction `receiptCreationDate`.
    public var signedDate: ReceiptDate?
    /// The verified payload exactly as signed (camelCase, millisecond numbers, unknown members kept).
    public var payload: JSONValue?
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
