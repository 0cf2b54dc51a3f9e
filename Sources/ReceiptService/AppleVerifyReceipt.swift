internal import ReceiptEngine
import JSONText

/// The statuses of Apple's deprecated `verifyReceipt` that receiptd can produce.
public enum AppleReceiptStatus: Int, Sendable, Hashable {
    case valid = 0
    /// Not a POST, or a body that is not a JSON object.
    case badRequest = 21000
    /// `receipt-data` missing, empty, not a string, not base64 or not a receipt: Apple's "malformed or missing".
    case malformedReceipt = 21002
    /// The receipt could not be authenticated: signature, certificate chain, version or device.
    case notAuthenticated = 21003
    /// The shared secret in `password` does not match the app's.
    case sharedSecretMismatch = 21004
    /// A sandbox receipt sent to the production endpoint.
    case sandboxReceiptSentToProduction = 21007
    /// A production receipt sent to the sandbox endpoint.
    case productionReceiptSentToSandbox = 21008
    /// The receipt's app is not one this server serves.
    case unknownApp = 21010
}

/// A `verifyReceipt` request body: `{"receipt-data": base64, "password": …, "exclude-old-transactions": bool}`.
struct AppleVerifyRequest: Sendable {
    var receiptData: String
    var password: String?
    var excludeOldTransactions: Bool

    /// nil for a body that is not a JSON object (Apple's 21000); a missing or non-string `receipt-data` reads as
    /// empty, which Apple answers 21002, "malformed or missing".
    init?(body: [UInt8]) {
        guard let json = try? JSONValue(parsing: body), case .object = json else { return nil }
        if case .string(let receiptData)? = json["receipt-data"] {
            self.receiptData = receiptData
        } else {
            receiptData = ""
        }
        if case .string(let password)? = json["password"] { self.password = password } else { self.password = nil }
        switch json["exclude-old-transactions"] {
        case .bool(let flag)?: excludeOldTransactions = flag
        // Some clients serialise booleans as strings.
        case .string(let text)?: excludeOldTransactions = text.lowercased() == "true"
        default: excludeOldTransactions = false
        }
    }
}

/// Drop-in answers for clients written against Apple's `verifyReceipt`: always HTTP 200, Apple's field names and
/// Apple's habit of writing every transaction value as a string.
enum AppleVerifyReceipt {
    /// Which endpoint was called: `/sandbox/verifyReceipt` accepts Sandbox receipts only.
    enum Endpoint: Sendable {
        case production, sandbox
    }

    /// The status for a verdict, in the order Apple's own service reports problems: unreadable, unauthentic, wrong
    /// endpoint, wrong app, wrong secret.
    ///
    /// Choices where Apple has no exact code: a version not in the app's `versions`, a device-hash mismatch and an
    /// environment this server refuses (other than the two redirect cases) are 21003, "could not be authenticated";
    /// an Xcode receipt is never a Sandbox receipt, so the sandbox endpoint answers it 21003 too.
    static func status(
        for result: ValidationResult, endpoint: Endpoint, password: String?, configuration: ServiceConfiguration
    ) -> AppleReceiptStatus {
        if let code = result.error?.code {
            if code == .malformedReceipt { return .malformedReceipt }
            if code == .signatureInvalid || code == .certificateUntrusted { return .notAuthenticated }
        }
        let environment = result.environment
        switch endpoint {
        case .sandbox:
            if environment == .production { return .productionReceiptSentToSandbox }
            if environment == .xcode { return .notAuthenticated }
        case .production:
            if environment == .sandbox, result.error?.code == .environmentNotAccepted {
                return .sandboxReceiptSentToProduction
            }
        }
        if let code = result.error?.code {
            if code == .bundleIDMismatch { return .unknownApp }
            return .notAuthenticated
        }
        if let bundleID = result.receipt?.bundleID, let secret = configuration.app(bundleID: bundleID)?.sharedSecret,
            !constantTimeEquals(secret, password ?? "")
        {
            return .sharedSecretMismatch
        }
        return .valid
    }

    /// The answer body for a status; the receipt and transactions only when the status is 0, as Apple does.
    static func response(
        status: AppleReceiptStatus, result: ValidationResult?, endpoint: Endpoint, request: AppleVerifyRequest?,
        requestDate: ReceiptDate
    ) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [("status", .integer(Int64(status.rawValue)))]
        members.append(("environment", .string(environmentName(result?.environment, endpoint: endpoint))))
        if status == .valid, let receipt = result?.receipt, let request {
            members.append(("receipt", self.receipt(receipt, requestDate: requestDate)))
            let latest = latestReceiptInfo(receipt.inAppPurchases, excludeOld: request.excludeOldTransactions)
            members.append(("latest_receipt_info", .array(latest.map(transaction))))
            members.append(("latest_receipt", .string(request.receiptData.filter { !$0.isWhitespace })))
            members.append(("pending_renewal_info", .array([])))
        }
        // Apple's docs spell it with a hyphen, its servers answer with an underscore; clients read either.
        members.append(("is-retryable", .bool(false)))
        members.append(("is_retryable", .bool(false)))
        return .object(members)
    }

    /// Apple's schema knows Production and Sandbox only; Xcode receipts are test purchases, so they read as Sandbox.
    private static func environmentName(_ environment: ReceiptEnvironment?, endpoint: Endpoint) -> String {
        switch environment {
        case .production?: return "Production"
        case .sandbox?, .xcode?: return "Sandbox"
        case nil: return endpoint == .sandbox ? "Sandbox" : "Production"
        }
    }

    static func receipt(_ receipt: Receipt, requestDate: ReceiptDate) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = []
        if let receiptType = receipt.receiptType { members.append(("receipt_type", .string(receiptType))) }
        members.append(("adam_id", .integer(receipt.appItemID ?? 0)))
        members.append(("app_item_id", .integer(receipt.appItemID ?? 0)))
        members.append(("bundle_id", .string(receipt.bundleID)))
        members.append(("application_version", .string(receipt.applicationVersion)))
        // Attribute 15, undocumented; Apple answers 0 where a receipt has none, as sandbox receipts often do.
        members.append(("download_id", .integer(receipt.downloadID ?? 0)))
        members.append(("version_external_identifier", .integer(receipt.versionExternalIdentifier ?? 0)))
        appendDate(&members, "receipt_creation_date", receipt.creationDate)
        appendDate(&members, "request_date", requestDate)
        if let date = receipt.originalPurchaseDate { appendDate(&members, "original_purchase_date", date) }
        if let version = receipt.originalApplicationVersion {
            members.append(("original_application_version", .string(version)))
        }
        if let date = receipt.expirationDate { appendDate(&members, "expiration_date", date) }
        members.append(("in_app", .array(receipt.inAppPurchases.map(transaction))))
        return .object(members)
    }

    static func transaction(_ purchase: InAppPurchase) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = []
        if let quantity = purchase.quantity { members.append(("quantity", .string(String(quantity)))) }
        if let productID = purchase.productID { members.append(("product_id", .string(productID))) }
        if let transactionID = purchase.transactionID { members.append(("transaction_id", .string(transactionID))) }
        if let original = purchase.originalTransactionID {
            members.append(("original_transaction_id", .string(original)))
        }
        if let date = purchase.purchaseDate { appendDate(&members, "purchase_date", date) }
        if let date = purchase.originalPurchaseDate { appendDate(&members, "original_purchase_date", date) }
        if let date = purchase.expiresDate { appendDate(&members, "expires_date", date) }
        if let identifier = purchase.webOrderLineItemID {
            members.append(("web_order_line_item_id", .string(String(identifier))))
        }
        members.append(("is_trial_period", .string(purchase.isTrialPeriod ? "true" : "false")))
        members.append(("is_in_intro_offer_period", .string(purchase.isInIntroOfferPeriod ? "true" : "false")))
        // Apple's answers always carry it, and no receipt attribute tells a family-shared purchase from the owner's
        // own, so every entry is the owner's; FAMILY_SHARED needs the App Store Server API.
        members.append(("in_app_ownership_type", .string("PURCHASED")))
        if let date = purchase.cancellationDate { appendDate(&members, "cancellation_date", date) }
        if let offer = purchase.promotionalOfferID { members.append(("promotional_offer_id", .string(offer))) }
        return .object(members)
    }

    /// Auto-renewable transactions (those with an expiry), newest expiry first; with `exclude-old-transactions`, only
    /// the newest per original transaction.
    static func latestReceiptInfo(_ purchases: [InAppPurchase], excludeOld: Bool) -> [InAppPurchase] {
        let renewals = purchases.enumerated()
            .filter { $0.element.expiresDate != nil }
            // Ties keep receipt order so the answer is stable.
            .sorted { ($0.element.expiresDate!, $1.offset) > ($1.element.expiresDate!, $0.offset) }
            .map(\.element)
        guard excludeOld else { return renewals }
        var seen = Set<String>()
        return renewals.filter { purchase in
            seen.insert(purchase.originalTransactionID ?? purchase.transactionID ?? "").inserted
        }
    }

    private static func appendDate(
        _ members: inout [(key: String, value: JSONValue)], _ name: String, _ date: ReceiptDate
    ) {
        members.append((name, .string(AppleDateFormat.gmt(date))))
        members.append((name + "_ms", .string(AppleDateFormat.milliseconds(date))))
        members.append((name + "_pst", .string(AppleDateFormat.pacific(date))))
    }

    /// Compares secrets without an early exit, so response timing does not reveal how much of a guess was right.
    static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        let left = Array(a.utf8)
        let right = Array(b.utf8)
        var difference = UInt8(truncatingIfNeeded: left.count ^ right.count)
        for index in 0..<max(left.count, right.count) {
            let x = index < left.count ? left[index] : 0
            let y = index < right.count ? right[index] : 0
            difference |= x ^ y
        }
        return difference == 0 && left.count == right.count
    }
}
