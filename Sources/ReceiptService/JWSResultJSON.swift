public import JSONText
public import ReceiptEngine
public import StoreKitJWS

/// receiptd's answer for a StoreKit 2 verdict: the receipt answer's vocabulary, extended.
///
/// Keys and their order are a contract: `valid`, `kind`, `error` (only when invalid: `code`, `message`, and `reason`
/// when there is one), `environment`, `checks`, `signed_date`, `payload` (whenever the signature verified, exactly
/// as signed), then `transaction`, `renewal_info`, `app_transaction`, `notification` (each only when the JWS, or a
/// notification's verified nested JWS, carries one; every key present, absent values `null`), and `subscriptions`.
/// Dates are RFC 3339 in UTC, with milliseconds when they have them (`2023-10-19T01:45:36.049Z`, but
/// `2023-10-19T01:45:36Z`); numbers are numbers; `auto_renew_status` is a boolean; other values are as Apple sends
/// them (`price` in milli-units, enums as Apple's strings or numbers). Each normalized object lists the members of
/// the older answers first, then the rest of Apple's documented fields, snake_case; nested objects
/// (`commitment_info`, `advanced_commerce_info`) keep Apple's values with snake_case member names.
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

    /// `{"code", "message"}`, plus `"reason"` (`certificate_untrusted`, and `missing` for data that names no app or
    /// environment) and `"detail"` (`malformed_jws`: the part that failed) when there is one.
    public static func errorObject(_ error: ValidationError) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("code", .string(error.code.rawValue)), ("message", .string(error.message)),
        ]
        if let reason = error.reason { members.append(("reason", .string(reason.rawValue))) }
        if let detail = error.detail { members.append(("detail", .string(detail.rawValue))) }
        return .object(members)
    }

    static func checks(_ checks: ValidationChecks) -> JSONValue {
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
            ("price", .integer(transaction.price)),
            ("currency", .string(transaction.currency)),
            ("storefront", .string(transaction.storefront)),
            ("storefront_id", .string(transaction.storefrontID)),
            ("transaction_reason", .string(transaction.transactionReason)),
            ("is_upgraded", bool(transaction.isUpgraded)),
            ("subscription_group_identifier", .string(transaction.subscriptionGroupIdentifier)),
            ("offer_identifier", .string(transaction.offerIdentifier)),
            ("offer_discount_type", .string(transaction.offerDiscountType)),
            ("offer_period", .string(transaction.offerPeriod)),
            ("app_transaction_id", .string(transaction.appTransactionID)),
            ("revocation_type", .string(transaction.revocationType)),
            ("revocation_percentage", .integer(transaction.revocationPercentage)),
            ("billing_plan_type", .string(transaction.billingPlanType)),
            ("commitment_info", nested(transaction.commitmentInfo)),
            ("advanced_commerce_info", nested(transaction.advancedCommerceInfo)),
            ("device_verification", .string(transaction.deviceVerification)),
            ("device_verification_nonce", .string(transaction.deviceVerificationNonce)),
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
            ("price_increase_status", .integer(info.priceIncreaseStatus)),
            ("offer_type", .integer(info.offerType)),
            ("offer_identifier", .string(info.offerIdentifier)),
            ("recent_subscription_start_date", date(info.recentSubscriptionStartDate)),
            ("renewal_price", .integer(info.renewalPrice)),
            ("currency", .string(info.currency)),
            ("offer_discount_type", .string(info.offerDiscountType)),
            ("eligible_win_back_offer_ids", strings(info.eligibleWinBackOfferIDs)),
            ("app_account_token", .string(info.appAccountToken)),
            ("app_transaction_id", .string(info.appTransactionID)),
            ("offer_period", .string(info.offerPeriod)),
            ("advanced_commerce_info", nested(info.advancedCommerceInfo)),
            ("commitment_info", nested(info.commitmentInfo)),
            ("renewal_billing_plan_type", .string(info.renewalBillingPlanType)),
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
            ("version_external_identifier", .integer(transaction.versionExternalIdentifier)),
            ("device_verification", .string(transaction.deviceVerification)),
            ("device_verification_nonce", .string(transaction.deviceVerificationNonce)),
            ("preorder_date", date(transaction.preorderDate)),
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
            ("bundle_version", .string(notification.bundleVersion)),
            ("consumption_request_reason", .string(notification.consumptionRequestReason)),
            ("request_identifier", .string(notification.requestIdentifier)),
            ("succeeded_count", .integer(notification.succeededCount)),
            ("failed_count", .integer(notification.failedCount)),
            ("product_id", .string(notification.productID)),
            ("storefront_country_codes", strings(notification.storefrontCountryCodes)),
            ("external_purchase_id", .string(notification.externalPurchaseID)),
            ("token_creation_date", date(notification.tokenCreationDate)),
        ])
    }

    /// One `subscriptions` entry; `upgraded: true` only on an upgraded one (which is never active).
    public static func subscription(_ status: SubscriptionStatus) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("product_id", .string(status.productID)),
            ("original_transaction_id", .string(status.originalTransactionID)),
            ("latest_transaction_id", .string(status.latestTransactionID)),
            ("expires_date", date(status.expiresDate)),
            ("active", .bool(status.isActive)),
            ("cancelled", .bool(status.isCancelled)),
        ]
        if status.isUpgraded { members.append(("upgraded", .bool(true))) }
        return .object(members)
    }

    /// RFC 3339 in UTC, with the milliseconds StoreKit 2 dates carry unless they are zero.
    public static func date(_ date: ReceiptDate?) -> JSONValue {
        guard let date else { return .null }
        var text = date.rfc3339
        let (_, remainder) = date.millisecondsSince1970.quotientAndRemainder(dividingBy: 1000)
        let milliseconds = remainder < 0 ? remainder + 1000 : remainder
        guard milliseconds != 0, text.last == "Z" else { return .string(text) }
        text.removeLast()
        let digits = String(milliseconds)
        return .string(text + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z")
    }

    private static func bool(_ value: Bool?) -> JSONValue { value.map(JSONValue.bool) ?? .null }
    private static func strings(_ values: [String]?) -> JSONValue {
        values.map { .array($0.map(JSONValue.string)) } ?? .null
    }

    /// A nested object with Apple's values and snake_case member names, all the way down.
    private static func nested(_ value: JSONValue?) -> JSONValue {
        guard let value else { return .null }
        switch value {
        case .object(let members): return .object(members.map { (snakeCase($0.key), nested($0.value)) })
        case .array(let elements): return .array(elements.map(nested))
        default: return value
        }
    }

    /// `commitmentExpiresDate` → `commitment_expires_date`, `SKU` → `sku`, `dependentSKUs` → `dependent_skus`.
    static func snakeCase(_ name: String) -> String {
        // Byte by byte: only ASCII letters and digits take part in the rule, and no byte of a multi-byte character
        // is one, so this reads every name as its scalars would, at a fraction of the cost per answer.
        let bytes = Array(name.utf8)
        func isUpper(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "A") < 26 }
        func isLower(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "a") < 26 }
        func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 4)
        for (index, byte) in bytes.enumerated() {
            let upper = isUpper(byte)
            if upper, index > 0 {
                let previous = bytes[index - 1]
                let nextIsLower = index + 1 < bytes.count && isLower(bytes[index + 1])
                // A plural `s` after an acronym (`SKUs`) belongs to it.
                let pluralOfAcronym = nextIsLower && bytes[index + 1] == UInt8(ascii: "s") && index + 2 == bytes.count
                if isLower(previous) || isDigit(previous) || (isUpper(previous) && nextIsLower && !pluralOfAcronym) {
                    out.append(UInt8(ascii: "_"))
                }
            }
            out.append(upper ? byte + 32 : byte)
        }
        return String(decoding: out, as: UTF8.self)
    }
}
