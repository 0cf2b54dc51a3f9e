public import ReceiptEngine

/// receiptd's own answer for a verdict: the body of `POST /v1/validate` and of `receiptd verify --json`.
///
/// Keys and their order are a contract (see `docs/`): `valid`, `error` (only when invalid), `environment` (only when
/// known), `checks`, `receipt` (whenever the engine decoded one; every key present, absent values `null`),
/// `subscriptions`. Dates are RFC 3339 in UTC, numbers are numbers and flags are booleans.
public enum ResultJSON {
    /// The verdict as UTF-8 JSON text.
    public static func encode(_ result: ValidationResult, pretty: Bool = false) -> [UInt8] {
        value(of: result).serialized(pretty: pretty)
    }

    /// The verdict as a JSON value, for callers that embed it.
    public static func value(of result: ValidationResult) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [("valid", .bool(result.isValid))]
        if let error = result.error {
            members.append(("error", errorObject(code: error.code.rawValue, message: error.message)))
        }
        if let environment = result.environment {
            members.append(("environment", .string(environment.rawValue)))
        }
        members.append(("checks", checks(result.checks)))
        if let receipt = result.receipt {
            members.append(("receipt", self.receipt(receipt)))
        }
        members.append(("subscriptions", .array(result.subscriptions.map(subscription))))
        return .object(members)
    }

    /// `{"code": …, "message": …}`, the error shape every receiptd answer shares.
    static func errorObject(code: String, message: String) -> JSONValue {
        .object([("code", .string(code)), ("message", .string(message))])
    }

    static func checks(_ checks: ValidationChecks) -> JSONValue {
        .object([
            ("signature", .string(checks.signature.rawValue)),
            ("bundle_id", .string(checks.bundleID.rawValue)),
            ("version", .string(checks.version.rawValue)),
            ("device_hash", .string(checks.deviceHash.rawValue)),
            ("environment", .string(checks.environment.rawValue)),
        ])
    }

    static func receipt(_ receipt: Receipt) -> JSONValue {
        .object([
            ("receipt_type", .string(receipt.receiptType)),
            ("app_item_id", .integer(receipt.appItemID)),
            ("bundle_id", .string(receipt.bundleID)),
            ("application_version", .string(receipt.applicationVersion)),
            ("original_application_version", .string(receipt.originalApplicationVersion)),
            ("creation_date", .string(receipt.creationDate.rfc3339)),
            ("expiration_date", date(receipt.expirationDate)),
            ("original_purchase_date", date(receipt.originalPurchaseDate)),
            ("in_app", .array(receipt.inAppPurchases.map(purchase))),
        ])
    }

    static func purchase(_ purchase: InAppPurchase) -> JSONValue {
        .object([
            ("quantity", .integer(purchase.quantity)),
            ("product_id", .string(purchase.productID)),
            ("transaction_id", .string(purchase.transactionID)),
            ("original_transaction_id", .string(purchase.originalTransactionID)),
            ("purchase_date", date(purchase.purchaseDate)),
            ("original_purchase_date", date(purchase.originalPurchaseDate)),
            ("expires_date", date(purchase.expiresDate)),
            ("cancellation_date", date(purchase.cancellationDate)),
            ("web_order_line_item_id", .integer(purchase.webOrderLineItemID)),
            ("is_trial_period", .bool(purchase.isTrialPeriod)),
            ("is_in_intro_offer_period", .bool(purchase.isInIntroOfferPeriod)),
            ("promotional_offer_id", .string(purchase.promotionalOfferID)),
        ])
    }

    static func subscription(_ status: SubscriptionStatus) -> JSONValue {
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
}
