/// The environment the App Store signed for (Production, Sandbox, Xcode) must be one the policy accepts.
public struct EnvironmentCheck: Sendable {
    public let accepted: Set<ReceiptEnvironment>

    public init(accepted: Set<ReceiptEnvironment>) { self.accepted = accepted }

    /// - Parameter subject: what was signed, plural, for the message ("receipts", "transactions").
    public func evaluate(_ environment: ReceiptEnvironment?, subject: String = "receipts") -> CheckVerdict {
        // Receipts from before 2013 carry no receipt type; refusing them for it would lock out old customers.
        guard let environment else { return .skipped }
        return CheckVerdict(
            accepted.contains(environment),
            else: ValidationError(.environmentNotAccepted, "\(environment.rawValue) \(subject) are not accepted"))
    }
}
