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

    /// The kinds StoreKit 2 signs as a compact JWS, in the order a payload's kind is told by (declaration order).
    public static let jwsKinds: [SignedDataKind] = allCases.filter { $0.envelope == .jws }

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
    var named: String {
        switch self {
        case .appTransaction: "an " + subject
        case .receipt, .transaction, .renewalInfo, .notification: "a " + subject
        }
    }

    // Per-kind rules: each is an exhaustive switch, so a new kind cannot exist without deciding every one.

    /// How the kind is signed: a PKCS#7 container (receipts) or a StoreKit 2 compact JWS.
    public enum Envelope: Sendable, Hashable {
        case pkcs7
        case jws
    }

    public var envelope: Envelope {
        switch self {
        case .receipt: .pkcs7
        case .transaction, .renewalInfo, .appTransaction, .notification: .jws
        }
    }

    /// Whether the data carries the app's version (a receipt's attribute 3, an app transaction's
    /// `applicationVersion`), which `VersionCheck` compares.
    public var carriesApplicationVersion: Bool {
        switch self {
        case .receipt, .appTransaction: true
        case .transaction, .renewalInfo, .notification: false
        }
    }

    /// Whether the data names the app it is for: renewal info names none.
    public var namesApp: Bool {
        switch self {
        case .receipt, .transaction, .appTransaction, .notification: true
        case .renewalInfo: false
        }
    }

    /// Whether the data signs the app's Apple ID (`appAppleId`), which `AppAppleIDCheck` compares.
    public var signsAppAppleID: Bool {
        switch self {
        case .notification, .appTransaction: true
        case .receipt, .transaction, .renewalInfo: false
        }
    }

    /// Whether data naming no environment may still pass: receipts from before 2013 carry no receipt type, and
    /// refusing them for it would lock out old customers. Apple's libraries refuse StoreKit 2 data that names none
    /// (INVALID_ENVIRONMENT): it could be anyone's.
    public var mayOmitEnvironment: Bool {
        switch self {
        case .receipt: true
        case .transaction, .renewalInfo, .appTransaction, .notification: false
        }
    }

    /// Whether the payload carries further JWS of its own (a notification's `signedTransactionInfo` and
    /// `signedRenewalInfo`), each verified as its own.
    public var carriesNestedJWS: Bool {
        switch self {
        case .notification: true
        case .receipt, .transaction, .renewalInfo, .appTransaction: false
        }
    }
}

extension ValidationError {
    /// The verdict on signed data of another kind than the caller required; `found` is nil when the data showed none.
    public static func kindMismatch(required: SignedDataKind, found: SignedDataKind?) -> ValidationError {
        ValidationError(
            .kindMismatch, "expected \(required.named), got \(found?.named ?? "signed data of no known kind")")
    }
}
