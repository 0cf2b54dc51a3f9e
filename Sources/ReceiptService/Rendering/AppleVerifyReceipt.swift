internal import ReceiptEngine
import JSONText
import Ledger

/// The statuses of Apple's deprecated `verifyReceipt` that receiptd can produce.
public enum AppleReceiptStatus: Int, Sendable, Hashable {
    case valid = 0
    /// Not a POST, or a body that is not a JSON object.
    case badRequest = 21000
    /// `receipt-data` missing, empty, not a string, not base64 or not a receipt: Apple's "malformed or missing". Also
    /// a valid receipt with a transaction id that is not an id (`PathID`), which is never recorded.
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
    /// Apple's "the receipt server was temporarily unable to provide the receipt": the ledger, which the answer's
    /// latest renewals come from, cannot be reached. Retryable.
    case temporarilyUnavailable = 21005
}

/// What the ledger knows beyond a receipt, for Apple's answer: every transaction of the receipt's original
/// transactions (later renewals, refunds, family sharing) and their latest renewal info.
struct AppleLedgerState: Sendable {
    var transactions: [TransactionFacts]
    var renewals: [RenewalFacts]
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
        // Apple's ids are digits, and Apple has no status for authentic data whose ids are not ids: "malformed" keeps
        // such a receipt from the ledger (as `/v1/validate`'s 400 `invalid_id` does), where a retryable status would
        // be repeated forever. Without a ledger too: the answer must not depend on which store is configured.
        if let receipt = result.receipt, LedgerIntake.memberWithInvalidID(of: receipt) != nil {
            return .malformedReceipt
        }
        return .valid
    }

    /// The answer body for a status; the receipt and transactions only when the status is 0, as Apple does.
    /// - Parameter ledger: what the ledger adds: later renewals in `latest_receipt_info`, `pending_renewal_info`,
    ///   ownership; nil answers from the receipt alone.
    static func response(
        status: AppleReceiptStatus, result: ValidationResult?, endpoint: Endpoint, request: AppleVerifyRequest?,
        requestDate: ReceiptDate, ledger: AppleLedgerState? = nil
    ) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [("status", .integer(Int64(status.rawValue)))]
        members.append(("environment", .string(environmentName(result?.environment, endpoint: endpoint))))
        if status == .valid, let receipt = result?.receipt, let request {
            var ownership: [String: String] = [:]
            for facts in ledger?.transactions ?? [] {
                if let type = facts.inAppOwnershipType { ownership[facts.transactionID] = type }
            }
            members.append(("receipt", self.receipt(receipt, requestDate: requestDate, ownership: ownership)))
            let purchases = ledger.map { latestPurchases($0.transactions, receipt: receipt) } ?? receipt.inAppPurchases
            let latest = latestReceiptInfo(purchases, excludeOld: request.excludeOldTransactions)
            members.append(("latest_receipt_info", .array(latest.map { transaction($0, ownership: ownership) })))
            members.append(("latest_receipt", .string(request.receiptData.filter { !$0.isWhitespace })))
            members.append(("pending_renewal_info", .array((ledger?.renewals ?? []).map(pendingRenewal))))
        }
        // Apple's docs spell it with a hyphen, its servers answer with an underscore; clients read either.
        let retryable = status == .temporarilyUnavailable
        members.append(("is-retryable", .bool(retryable)))
        members.append(("is_retryable", .bool(retryable)))
        return .object(members)
    }

    /// The ledger's transactions as receipt purchases; a transaction the receipt itself holds keeps the receipt's
    /// trial and intro-offer flags, which StoreKit 2 data names differently.
    static func latestPurchases(_ transactions: [TransactionFacts], receipt: Receipt) -> [InAppPurchase] {
        var own: [String: InAppPurchase] = [:]
        for purchase in receipt.inAppPurchases { if let id = purchase.transactionID { own[id] = purchase } }
        return transactions.map { facts in
            let payload = LedgerFacts.payload(facts.payloadJSON)
            var purchase = own[facts.transactionID] ?? InAppPurchase()
            purchase.productID = facts.productID
            purchase.transactionID = facts.transactionID
            purchase.originalTransactionID = facts.originalTransactionID
            purchase.purchaseDate = facts.purchaseDate.map(ReceiptDate.init(millisecondsSince1970:))
            purchase.originalPurchaseDate = facts.originalPurchaseDate.map(ReceiptDate.init(millisecondsSince1970:))
            purchase.expiresDate = facts.expiresDate.map(ReceiptDate.init(millisecondsSince1970:))
            purchase.cancellationDate = facts.revocationDate.map(ReceiptDate.init(millisecondsSince1970:))
            purchase.webOrderLineItemID = facts.webOrderLineItemID.flatMap { Int64($0) }
            if case .integer(let quantity)? = payload["quantity"] { purchase.quantity = quantity }
            if own[facts.transactionID] == nil, case .integer(let offer)? = payload["offerType"] {
                purchase.isInIntroOfferPeriod = offer == 1
            }
            return purchase
        }
    }

    /// One `pending_renewal_info` entry, in Apple's string shape.
    static func pendingRenewal(_ renewal: RenewalFacts) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = []
        if let product = renewal.autoRenewProductID { members.append(("auto_renew_product_id", .string(product))) }
        if let status = renewal.autoRenewStatus { members.append(("auto_renew_status", .string(status ? "1" : "0"))) }
        if let intent = renewal.expirationIntent { members.append(("expiration_intent", .string(String(intent)))) }
        if let retrying = renewal.isInBillingRetryPeriod {
            members.append(("is_in_billing_retry_period", .string(retrying ? "1" : "0")))
        }
        if let grace = renewal.gracePeriodExpiresDate {
            appendDate(&members, "grace_period_expires_date", ReceiptDate(millisecondsSince1970: grace))
        }
        members.append(("original_transaction_id", .string(renewal.originalTransactionID)))
        if let product = renewal.productID { members.append(("product_id", .string(product))) }
        // StoreKit 2's priceIncreaseStatus: 1 is the customer's consent, which Apple's old field called "1".
        if let price = renewal.priceIncreaseStatus { members.append(("price_consent_status", .string(String(price)))) }
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

    static func receipt(_ receipt: Receipt, requestDate: ReceiptDate, ownership: [String: String] = [:]) -> JSONValue {
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
        members.append(("in_app", .array(receipt.inAppPurchases.map { transaction($0, ownership: ownership) })))
        return .object(members)
    }

    /// - Parameter ownership: `in_app_ownership_type` by transaction id, as the ledger learned it.
    static func transaction(_ purchase: InAppPurchase, ownership: [String: String] = [:]) -> JSONValue {
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
        // own: only a StoreKit 2 transaction or notification in the ledger can say FAMILY_SHARED.
        let owner = purchase.transactionID.flatMap { ownership[$0] } ?? "PURCHASED"
        members.append(("in_app_ownership_type", .string(owner)))
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
