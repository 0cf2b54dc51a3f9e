/// What signed data is: an App Store receipt or one of the kinds StoreKit 2 signs as a JWS. The raw values are the
/// contract everywhere a kind is named: `?kind=`, `receiptd verify --kind`, the JSON `kind` and the metrics' `kind`
/// label.
public enum SignedDataKind: String, Sendable, Hashable, CaseIterable {
    /// An App Store receipt (PKCS#7).
    case receipt
    /// `Transaction.jwsRepresentation` or a notification's `signedTransactionInfo`.
    case transaction
    /// `signedRenewalInfo`.
    case renewalInfo = "renewal_info"
    /// `AppTransaction.jwsRepresentation`.
    case appTransaction = "app_transaction"
    /// App Store Server Notifications V2 (`signedPayload`).
    case notification

    /// The kinds StoreKit 2 signs as a compact JWS, in the order a payload's kind is told by.
    public static let jwsKinds: [SignedDataKind] = [.transaction, .renewalInfo, .appTransaction, .notification]

    /// The kind in messages: "receipt", "renewal info".
    public var subject: String {
        // Literals: this is read on the hot path of every verdict, where a replacing() cost more than the check.
        switch self {
        case .receipt: "receipt"
        case .transaction: "transaction"
        case .renewalInfo: "renewal info"
        case .appTransaction: "app transaction"
        case .notification: "notification"
        }
    }

    /// The subject with its article: "a receipt", "an app transaction".
    var named: String { (self == .appTransaction ? "an " : "a ") + subject }
}

extension ValidationError {
    /// The verdict on signed data of another kind than the caller required; `found` is nil when the data showed none.
    public static func kindMismatch(required: SignedDataKind, found: SignedDataKind?) -> ValidationError {
        ValidationError(
            .kindMismatch, "expected \(required.named), got \(found?.named ?? "signed data of no known kind")")
    }
}
