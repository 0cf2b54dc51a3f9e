public import Foundation

/// Validates receipts against one policy. Safe to share across threads; it caches chain decisions keyed by the exact
/// certificate bytes, so the same Apple certificates are parsed and verified once.
public final class ReceiptValidator: Sendable {
    public let policy: ValidationPolicy

    public init(policy: ValidationPolicy) {
        self.policy = policy
    }

    /// Validates DER/BER receipt bytes. Never throws: every failure is a verdict in the result.
    /// - Parameters:
    ///   - deviceIdentifier: checks the receipt's SHA-1 hash when given.
    ///   - expectedBundleID: when given, replaces the policy's apps for the bundle-id check (versions unchecked).
    ///   - validationTime: "now" for subscription activity; the chain is checked at the receipt's creation date.
    public func validate(
        _ receipt: [UInt8], deviceIdentifier: DeviceIdentifier? = nil, expectedBundleID: String? = nil,
        at validationTime: Date = Date()
    ) -> ValidationResult {
        ValidationResult(error: ValidationError(.malformedReceipt, "not implemented"))
    }
}
