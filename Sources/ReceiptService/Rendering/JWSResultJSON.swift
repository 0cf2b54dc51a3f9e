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
        .building { write(result, to: &$0) }
    }

    /// `value(of:)` as UTF-8 JSON text. Compact text is written straight from the verdict, with no value made.
    public static func encode(_ result: JWSValidationResult, pretty: Bool = false) -> [UInt8] {
        guard !pretty else { return value(of: result).serialized(pretty: true) }
        // An answer with its payload is a few kilobytes: room for it at once rather than by doublings.
        var writer = JSONWriter(capacity: 4096)
        write(result, to: &writer)
        return writer.bytes
    }

    static func write(_ result: JWSValidationResult, to sink: inout some JSONSink) {
        sink.beginObject()
        sink.key("valid")
        sink.bool(result.isValid)
        sink.member("kind", result.kind?.rawValue)
        if let error = result.error {
            sink.key("error")
            write(error, to: &sink)
        }
        sink.member("environment", result.environment?.rawValue)
        sink.key("checks")
        write(result.checks, to: &sink)
        sink.member("signed_date", date: result.signedDate)
        if let payload = result.payload {
            sink.key("payload")
            sink.value(payload, serializedText: result.payloadText)
        }
        if let transaction = result.transaction {
            sink.key("transaction")
            write(transaction, to: &sink)
        }
        if let renewalInfo = result.renewalInfo {
            sink.key("renewal_info")
            write(renewalInfo, to: &sink)
        }
        if let appTransaction = result.appTransaction {
            sink.key("app_transaction")
            write(appTransaction, to: &sink)
        }
        if let notification = result.notification {
            sink.key("notification")
            write(notification, to: &sink)
        }
        sink.key("subscriptions")
        sink.beginArray()
        for status in result.subscriptions { write(status, to: &sink) }
        sink.endArray()
        sink.endObject()
    }

    /// `{"code", "message"}`, plus `"reason"` (`certificate_untrusted`, and `missing` for data that names no app or
    /// environment) and `"detail"` (`malformed_jws`: the part that failed) when there is one.
    public static func errorObject(_ error: ValidationError) -> JSONValue {
        .building { write(error, to: &$0) }
    }

    static func write(_ error: ValidationError, to sink: inout some JSONSink) {
        sink.beginObject()
        sink.member("code", error.code.rawValue)
        sink.member("message", error.message)
        if let reason = error.reason { sink.member("reason", reason.rawValue) }
        if let detail = error.detail { sink.member("detail", detail.rawValue) }
        sink.endObject()
    }

    static func write(_ checks: ValidationChecks, to sink: inout some JSONSink) {
        sink.beginObject()
        sink.member("signature", checks.signature.rawValue)
        sink.member("bundle_id", checks.bundleID.rawValue)
        sink.member("environment", checks.environment.rawValue)
        sink.member("app_apple_id", checks.appAppleID.rawValue)
        sink.member("version", checks.version.rawValue)
        sink.member("device_hash", checks.deviceHash.rawValue)
        sink.endObject()
    }

    public static func transaction(_ transaction: SignedTransaction) -> JSONValue {
        .building { write(transaction, to: &$0) }
    }

    static func write(_ transaction: SignedTransaction, to sink: inout some JSONSink) {
        sink.beginObject()
        sink.member("transaction_id", transaction.transactionID)
        sink.member("original_transaction_id", transaction.originalTransactionID)
        sink.member("web_order_line_item_id", transaction.webOrderLineItemID)
        sink.member("product_id", transaction.productID)
        sink.member("bundle_id", transaction.bundleID)
        sink.member("type", transaction.type)
        sink.member("quantity", transaction.quantity)
        sink.member("purchase_date", date: transaction.purchaseDate)
        sink.member("original_purchase_date", date: transaction.originalPurchaseDate)
        sink.member("expires_date", date: transaction.expiresDate)
        sink.member("revocation_date", date: transaction.revocationDate)
        sink.member("revocation_reason", transaction.revocationReason)
        sink.member("in_app_ownership_type", transaction.inAppOwnershipType)
        sink.member("app_account_token", transaction.appAccountToken)
        sink.member("offer_type", transaction.offerType)
        sink.member("environment", transaction.environment)
        sink.member("signed_date", date: transaction.signedDate)
        sink.member("price", transaction.price)
        sink.member("currency", transaction.currency)
        sink.member("storefront", transaction.storefront)
        sink.member("storefront_id", transaction.storefrontID)
        sink.member("transaction_reason", transaction.transactionReason)
        sink.member("is_upgraded", transaction.isUpgraded)
        sink.member("subscription_group_identifier", transaction.subscriptionGroupIdentifier)
        sink.member("offer_identifier", transaction.offerIdentifier)
        sink.member("offer_discount_type", transaction.offerDiscountType)
        sink.member("offer_period", transaction.offerPeriod)
        sink.member("app_transaction_id", transaction.appTransactionID)
        sink.member("revocation_type", transaction.revocationType)
        sink.member("revocation_percentage", transaction.revocationPercentage)
        sink.member("billing_plan_type", transaction.billingPlanType)
        sink.member("commitment_info", nested: transaction.commitmentInfo)
        sink.member("advanced_commerce_info", nested: transaction.advancedCommerceInfo)
        sink.member("device_verification", transaction.deviceVerification)
        sink.member("device_verification_nonce", transaction.deviceVerificationNonce)
        sink.endObject()
    }

    public static func renewalInfo(_ info: SignedRenewalInfo) -> JSONValue {
        .building { write(info, to: &$0) }
    }

    static func write(_ info: SignedRenewalInfo, to sink: inout some JSONSink) {
        sink.beginObject()
        sink.member("original_transaction_id", info.originalTransactionID)
        sink.member("product_id", info.productID)
        sink.member("auto_renew_product_id", info.autoRenewProductID)
        sink.member("auto_renew_status", info.autoRenewStatus)
        sink.member("expiration_intent", info.expirationIntent)
        sink.member("is_in_billing_retry_period", info.isInBillingRetryPeriod)
        sink.member("grace_period_expires_date", date: info.gracePeriodExpiresDate)
        sink.member("renewal_date", date: info.renewalDate)
        sink.member("environment", info.environment)
        sink.member("signed_date", date: info.signedDate)
        sink.member("price_increase_status", info.priceIncreaseStatus)
        sink.member("offer_type", info.offerType)
        sink.member("offer_identifier", info.offerIdentifier)
        sink.member("recent_subscription_start_date", date: info.recentSubscriptionStartDate)
        sink.member("renewal_price", info.renewalPrice)
        sink.member("currency", info.currency)
        sink.member("offer_discount_type", info.offerDiscountType)
        sink.member("eligible_win_back_offer_ids", info.eligibleWinBackOfferIDs)
        sink.member("app_account_token", info.appAccountToken)
        sink.member("app_transaction_id", info.appTransactionID)
        sink.member("offer_period", info.offerPeriod)
        sink.member("advanced_commerce_info", nested: info.advancedCommerceInfo)
        sink.member("commitment_info", nested: info.commitmentInfo)
        sink.member("renewal_billing_plan_type", info.renewalBillingPlanType)
        sink.endObject()
    }

    public static func appTransaction(_ transaction: SignedAppTransaction) -> JSONValue {
        .building { write(transaction, to: &$0) }
    }

    static func write(_ transaction: SignedAppTransaction, to sink: inout some JSONSink) {
        sink.beginObject()
        sink.member("bundle_id", transaction.bundleID)
        sink.member("app_apple_id", transaction.appAppleID)
        sink.member("application_version", transaction.applicationVersion)
        sink.member("original_application_version", transaction.originalApplicationVersion)
        sink.member("receipt_type", transaction.receiptType)
        sink.member("receipt_creation_date", date: transaction.receiptCreationDate)
        sink.member("original_purchase_date", date: transaction.originalPurchaseDate)
        sink.member("app_transaction_id", transaction.appTransactionID)
        sink.member("original_platform", transaction.originalPlatform)
        sink.member("version_external_identifier", transaction.versionExternalIdentifier)
        sink.member("device_verification", transaction.deviceVerification)
        sink.member("device_verification_nonce", transaction.deviceVerificationNonce)
        sink.member("preorder_date", date: transaction.preorderDate)
        sink.endObject()
    }

    public static func notification(_ notification: SignedNotification) -> JSONValue {
        .building { write(notification, to: &$0) }
    }

    static func write(_ notification: SignedNotification, to sink: inout some JSONSink) {
        sink.beginObject()
        sink.member("notification_type", notification.notificationType)
        sink.member("subtype", notification.subtype)
        sink.member("notification_uuid", notification.notificationUUID)
        sink.member("version", notification.version)
        sink.member("signed_date", date: notification.signedDate)
        sink.member("bundle_id", notification.bundleID)
        sink.member("app_apple_id", notification.appAppleID)
        sink.member("environment", notification.environment)
        sink.member("status", notification.status)
        sink.member("bundle_version", notification.bundleVersion)
        sink.member("consumption_request_reason", notification.consumptionRequestReason)
        sink.member("request_identifier", notification.requestIdentifier)
        sink.member("succeeded_count", notification.succeededCount)
        sink.member("failed_count", notification.failedCount)
        sink.member("product_id", notification.productID)
        sink.member("storefront_country_codes", notification.storefrontCountryCodes)
        sink.member("external_purchase_id", notification.externalPurchaseID)
        sink.member("token_creation_date", date: notification.tokenCreationDate)
        sink.endObject()
    }

    /// One `subscriptions` entry; `upgraded: true` only on an upgraded one (which is never active).
    public static func subscription(_ status: SubscriptionStatus) -> JSONValue {
        .building { write(status, to: &$0) }
    }

    static func write(_ status: SubscriptionStatus, to sink: inout some JSONSink) {
        sink.beginObject()
        sink.member("product_id", status.productID)
        sink.member("original_transaction_id", status.originalTransactionID)
        sink.member("latest_transaction_id", status.latestTransactionID)
        sink.member("expires_date", date: status.expiresDate)
        sink.member("active", status.isActive)
        sink.member("cancelled", status.isCancelled)
        if status.isUpgraded { sink.member("upgraded", true) }
        sink.endObject()
    }

    /// RFC 3339 in UTC, with the milliseconds StoreKit 2 dates carry unless they are zero.
    public static func date(_ date: ReceiptDate?) -> JSONValue {
        .building { write(date, to: &$0) }
    }

    static func write(_ date: ReceiptDate?, to sink: inout some JSONSink) {
        guard let date else { return sink.null() }
        sink.plainString { text in
            date.appendRFC3339(to: &text)
            let (_, remainder) = date.millisecondsSince1970.quotientAndRemainder(dividingBy: 1000)
            let milliseconds = remainder < 0 ? remainder + 1000 : remainder
            guard milliseconds != 0, text.last == UInt8(ascii: "Z") else { return }
            text[text.count - 1] = UInt8(ascii: ".")
            text.append(UInt8(ascii: "0") + UInt8(milliseconds / 100))
            text.append(UInt8(ascii: "0") + UInt8(milliseconds / 10 % 10))
            text.append(UInt8(ascii: "0") + UInt8(milliseconds % 10))
            text.append(UInt8(ascii: "Z"))
        }
    }

    /// A nested object with Apple's values and snake_case member names, all the way down.
    static func writeNested(_ value: JSONValue, to sink: inout some JSONSink) {
        switch value {
        case .object(let members):
            sink.beginObject()
            for member in members {
                sink.key(utf8: snakeCase(member.key))
                writeNested(member.value, to: &sink)
            }
            sink.endObject()
        case .array(let elements):
            sink.beginArray()
            for element in elements { writeNested(element, to: &sink) }
            sink.endArray()
        default: sink.value(value)
        }
    }

    /// `commitmentExpiresDate` → `commitment_expires_date`, `SKU` → `sku`, `dependentSKUs` → `dependent_skus`.
    static func snakeCase(_ name: String) -> [UInt8] {
        // Byte by byte: only ASCII letters and digits take part in the rule, and no byte of a multi-byte character
        // is one, so this reads every name as its scalars would, at a fraction of the cost per answer.
        var name = name
        return name.withUTF8 { bytes in snakeCase(utf8: bytes) }
    }

    private static func snakeCase(utf8 bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
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
        return out
    }
}

extension JSONSink {
    fileprivate mutating func member(_ name: StaticString, _ value: String?) {
        key(name)
        string(value)
    }

    fileprivate mutating func member(_ name: StaticString, _ value: Int64?) {
        key(name)
        integer(value)
    }

    fileprivate mutating func member(_ name: StaticString, _ value: Bool?) {
        key(name)
        bool(value)
    }

    fileprivate mutating func member(_ name: StaticString, _ values: [String]?) {
        key(name)
        guard let values else { return null() }
        beginArray()
        for value in values { string(value) }
        endArray()
    }

    fileprivate mutating func member(_ name: StaticString, date: ReceiptDate?) {
        key(name)
        JWSResultJSON.write(date, to: &self)
    }

    fileprivate mutating func member(_ name: StaticString, nested: JSONValue?) {
        key(name)
        guard let nested else { return null() }
        JWSResultJSON.writeNested(nested, to: &self)
    }
}
