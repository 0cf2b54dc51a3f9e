/// The outcome of one check.
public enum CheckOutcome: String, Sendable, Hashable {
    case passed, failed, skipped
}

/// Each check's outcome; a check that never ran (an earlier one failed, nothing to compare, or not applicable to the
/// kind) reads `skipped`. For a notification, a failure in a nested JWS fails the matching check.
public struct ValidationChecks: Sendable, Hashable {
    /// The chain (trust and time) and the signature.
    public var signature: CheckOutcome = .skipped
    public var bundleID: CheckOutcome = .skipped
    /// StoreKit 2 only: receipts sign no `appAppleId`.
    public var appAppleID: CheckOutcome = .skipped
    public var version: CheckOutcome = .skipped
    public var deviceHash: CheckOutcome = .skipped
    public var environment: CheckOutcome = .skipped

    public init() {}

    public subscript(name: CheckName) -> CheckOutcome {
        get {
            switch name {
            case .signature: signature
            case .bundleID: bundleID
            case .appAppleID: appAppleID
            case .environment: environment
            case .version: version
            case .deviceHash: deviceHash
            }
        }
        set {
            switch name {
            case .signature: signature = newValue
            case .bundleID: bundleID = newValue
            case .appAppleID: appAppleID = newValue
            case .environment: environment = newValue
            case .version: version = newValue
            case .deviceHash: deviceHash = newValue
            }
        }
    }

    /// Folds another outcome for the same check in (a second rule, a nested JWS): failed wins over passed, passed
    /// over skipped.
    public mutating func fold(_ name: CheckName, _ outcome: CheckOutcome) {
        if self[name] == .failed || outcome == .failed {
            self[name] = .failed
        } else if self[name] == .passed || outcome == .passed {
            self[name] = .passed
        }
    }

    /// Folds every check of a nested JWS in.
    public mutating func absorb(_ nested: ValidationChecks) {
        for name in CheckName.allCases { fold(name, nested[name]) }
    }
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
