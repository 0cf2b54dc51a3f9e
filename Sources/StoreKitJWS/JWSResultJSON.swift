public import JSONText
public import ReceiptEngine

/// receiptd's answer for a StoreKit 2 verdict: the receipt answer's vocabulary, extended.
///
/// Keys and their order are a contract: `valid`, `kind`, `error` (only when invalid: `code`, `message`, and `reason`
/// when there is one), `environment`, `checks`, `signed_date`, `payload` (whenever the signature verified, exactly
/// as signed), then `transaction`, `renewal_info`, `app_transaction`, `notification` (each only when the JWS, or a
/// notification's verified nested JWS, carries one; every key present, absent values `null`), and `subscriptions`.
/// Dates are RFC 3339 in UTC; numbers are numbers; `auto_renew_status` is a boolean.
public enum JWSResultJSON {
    /// The verdict as a JSON value.
    public static func value(of result: JWSValidationResult) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("valid", .bool(result.isValid)),
            ("kind", .string(result.kind?.rawValue)),
        ]
        if let error = result.error { members.append(("error", errorObject(error))) }
        members.append(("environment", .string(result.environment?.rawValue)))
        members.append(("checks", checks(result.checks)))
        members.append(("signed_date", date(result.signedDate)))
        if let payload = result.payload { members.append(("payload", payload)) }
        if let transaction = result.transaction { members.append(("transaction", self.transaction(transaction))) }
        if let renewalInfo = result.renewalInfo { members.append(("renewal_info", self.renewalInfo(renewalInfo))) }
        if let appTransaction = result.appTransaction {
            members.append(("app_transaction", self.appTransaction(appTransaction)))
        }
        if let notification = result.notification { members.append(("notification", self.notification(notification))) }
        members.append(("subscriptions", .array(result.subscriptions.map(subscription))))
        return .object(members)
    }

    /// `value(of:)` as UTF-8 JSON text.
    public static func encode(_ result: JWSValidationResult, pretty: Bool = false) -> [UInt8] {
        value(of: result).serialized(pretty: pretty)
    }

    /// `{"code", "message"}`, plus `"reason"` for `certificate_untrusted`.
    public static func errorObject(_ error: ValidationError) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("code", .string(error.code.rawValue)), ("message", .string(error.message)),
        ]
        if let reason = error.reason { members.append(("reason", .string(reason.rawValue))) }
        return .object(members)
    }

    static func checks(_ checks: JWSChecks) -> JSONValue {
        .object([
            ("signature", .string(checks.signature.rawValue)),
            ("bundle_id", .string(checks.bundleID.rawValue)),
            ("environment", .string(checks.environment.rawValue)),
            ("app_apple_id", .string(checks.appAppleID.rawValue)),
            ("version", .string(checks.version.rawValue)),
            ("device_hash", .string(checks.deviceHash.rawValue)),
        ])
    }

    public static func transaction(_ transaction: SignedTransaction) -> JSONValue {
        .object([
            ("transaction_id", .string(transaction.transactionID)),
            ("original_transaction_id", .string(transaction.originalTransactionID)),
            ("web_order_line_item_id", .string(transaction.webOrderLineItemID)),
            ("product_id", .string(transaction.productID)),
            ("bundle_id", .string(transaction.bundleID)),
            ("type", .string(transaction.type)),
            ("quantity", .integer(transaction.quantity)),
            ("purchase_date", date(transaction.purchaseDate)),
            ("original_purchase_date", date(transaction.originalPurchaseDate)),
            ("expires_date", date(transaction.expiresDate)),
            ("revocation_date", date(transaction.revocationDate)),
            ("revocation_reason", .integer(transaction.revocationReason)),
            ("in_app_ownership_type", .string(transaction.inAppOwnershipType)),
            ("app_account_token", .string(transaction.appAccountToken)),
            ("offer_type", .integer(transaction.offerType)),
            ("environment", .string(transaction.environment)),
            ("signed_date", date(transaction.signedDate)),
        ])
    }

    public static func renewalInfo(_ info: SignedRenewalInfo) -> JSONValue {
        .object([
            ("original_transaction_id", .string(info.originalTransactionID)),
            ("product_id", .string(info.productID)),
            ("auto_renew_product_id", .string(info.autoRenewProductID)),
            ("auto_renew_status", bool(info.autoRenewStatus)),
            ("expiration_intent", .integer(info.expirationIntent)),
            ("is_in_billing_retry_period", bool(info.isInBillingRetryPeriod)),
            ("grace_period_expires_date", date(info.gracePeriodExpiresDate)),
            ("renewal_date", date(info.renewalDate)),
            ("environment", .string(info.environment)),
            ("signed_date", date(info.signedDate)),
        ])
    }

    public static func appTransaction(_ transaction: SignedAppTransaction) -> JSONValue {
        .object([
            ("bundle_id", .string(transaction.bundleID)),
            ("app_apple_id", .integer(transaction.appAppleID)),
            ("application_version", .string(transaction.applicationVersion)),
            ("original_application_version", .string(transaction.originalApplicationVersion)),
            ("receipt_type", .string(transaction.receiptType)),
            ("receipt_creation_date", date(transaction.receiptCreationDate)),
            ("original_purchase_date", date(transaction.originalPurchaseDate)),
            ("app_transaction_id", .string(transaction.appTransactionID)),
            ("original_platform", .string(transaction.originalPlatform)),
        ])
    }

    public static func notification(_ notification: SignedNotification) -> JSONValue {
        .object([
            ("notification_type", .string(notification.notificationType)),
            ("subtype", .string(notification.subtype)),
            ("notification_uuid", .string(notification.notificationUUID)),
            ("version", .string(notification.version)),
            ("signed_date", date(notification.signedDate)),
            ("bundle_id", .string(notification.bundleID)),
            ("app_apple_id", .integer(notification.appAppleID)),
            ("environment", .string(notification.environment)),
            ("status", .integer(notification.status)),
        ])
    }

    public static func subscription(_ status: SubscriptionStatus) -> JSONValue {
        .object([
            ("product_id", .string(status.productID)),
            ("original_transaction_id", .string(status.originalTransactionID)),
            ("latest_transaction_id", .string(status.latestTransactionID)),
            ("expires_date", .string(status.expiresDate.rfc3339)),
            ("active", .bool(status.isActive)),
            ("cancelled", .bool(status.isCancelled)),
        ])
    }

    private static func date(_ date: ReceiptDate?) -> JSONValue { .string(date?.rfc3339) }
    private static func bool(_ value: Bool?) -> JSONValue { value.map(JSONValue.bool) ?? .null }
}
