/// The outcome of one check.
public enum CheckOutcome: String, Sendable, Hashable {
    case passed, failed, skipped
}

/// Each check's outcome; a check that never ran (an earlier one failed, or nothing to compare) reads `skipped`.
public struct ValidationChecks: Sendable, Hashable {
    public var signature: CheckOutcome = .skipped
    public var bundleID: CheckOutcome = .skipped
    public var version: CheckOutcome = .skipped
    public var deviceHash: CheckOutcome = .skipped
    public var environment: CheckOutcome = .skipped

    public init() {}
}

/// The verdict on one receipt, with what it contains whenever its signature verified.
public struct ValidationResult: Sendable, Hashable {
    /// nil when the receipt is valid.
    public var error: ValidationError?
    public var checks: ValidationChecks
    /// Present whenever the signature verified, also when a later check failed, so staff can see why.
    public var receipt: Receipt?
    public var subscriptions: [SubscriptionStatus]

    public init(
        error: ValidationError? = nil, checks: ValidationChecks = ValidationChecks(), receipt: Receipt? = nil,
        subscriptions: [SubscriptionStatus] = []
    ) {
        self.error = error
        self.checks = checks
        self.receipt = receipt
        self.subscriptions = subscriptions
    }

    public var isValid: Bool { error == nil }
    public var environment: ReceiptEnvironment? { receipt?.environment }
}
