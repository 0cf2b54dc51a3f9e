public import ReceiptEngine
public import JSONText
import StoreKitJWS

/// receiptd's own answer for a verdict: the body of `POST /v1/validate` and of `receiptd verify --json`.
///
/// Keys and their order are a contract (see `docs/`): `valid`, `error` (only when invalid), `environment` (only when
/// known), `checks`, `receipt` (whenever the engine decoded one; every key present, absent values `null`),
/// `subscriptions`. Dates are RFC 3339 in UTC, numbers are numbers and flags are booleans.
public enum ResultJSON {
    /// The verdict as UTF-8 JSON text. Compact text is written straight from the verdict, with no value made: the
    /// same description as `value(of:)`, told to a `JSONWriter` instead of a tree builder.
    public static func encode(_ result: ValidationResult, pretty: Bool = false) -> [UInt8] {
        guard !pretty else { return value(of: result).serialized(pretty: true) }
        var writer = JSONWriter(capacity: estimatedSize(of: result))
        write(result, to: &writer)
        return writer.bytes
    }

    /// The compact verdict with the ledger's view of its subscriptions in place of the receipt's own, and
    /// `"ledger"` last: byte for byte `view.applied(to: value(of: result)).serialized()`, without the tree.
    static func encode(_ result: ValidationResult, ledger view: LedgerView) -> [UInt8] {
        var writer = JSONWriter(capacity: estimatedSize(of: result))
        write(result, ledger: view, to: &writer)
        return writer.bytes
    }

    /// The verdict as a JSON value, for callers that embed it.
    public static func value(of result: ValidationResult) -> JSONValue {
        .building { write(result, to: &$0) }
    }

    /// Enough for the answer when no string needs escapes, so that the array is allocated once.
    private static func estimatedSize(of result: ValidationResult) -> Int {
        512 + 640 * (result.receipt?.inAppPurchases.count ?? 0) + 256 * result.subscriptions.count
    }

    /// The one description of the answer. With `view`, its subscriptions replace the receipt's own and `ledger`
    /// follows them.
    static func write(_ result: ValidationResult, ledger view: LedgerView? = nil, to sink: inout some JSONSink) {
        sink.beginObject()
        sink.key("valid")
        sink.bool(result.isValid)
        sink.key("kind")
        sink.string(SignedDataKind.receipt.rawValue)
        if let error = result.error {
            sink.key("error")
            JWSResultJSON.write(error, to: &sink)
        }
        if let environment = result.environment {
            sink.key("environment")
            sink.string(environment.rawValue)
        }
        sink.key("checks")
        write(result.checks, to: &sink)
        if let receipt = result.receipt {
            sink.key("receipt")
            write(receipt, to: &sink)
        }
        sink.key("subscriptions")
        sink.beginArray()
        if let view {
            for entry in view.subscriptions { sink.value(entry) }
        } else {
            // By index, so that each element is borrowed where it lies rather than copied out (a retain and release
            // per string it holds).
            for index in result.subscriptions.indices { JWSResultJSON.write(result.subscriptions[index], to: &sink) }
        }
        sink.endArray()
        if let view {
            sink.key("ledger")
            sink.string(view.availability)
        }
        sink.endObject()
    }

    /// A verdict's error: the shared shape, plus `reason` when the code has one. One writer for receipts and
    /// StoreKit 2 alike.
    public static func errorObject(_ error: ValidationError) -> JSONValue { JWSResultJSON.errorObject(error) }

    /// `{"code": …, "message": …}`, the error shape every receiptd answer shares, with `reason` when the request's
    /// upload was recognizably something else (`pem`, `text`, `json`…) and `detail` when it says which part of a
    /// malformed request failed.
    /// `apple_error_code` is Apple's numeric `errorCode` when the error is one Apple answered.
    static func errorObject(
        code: String, message: String, reason: String? = nil, detail: String? = nil, field: String? = nil,
        appleErrorCode: Int64? = nil
    ) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [("code", .string(code)), ("message", .string(message))]
        if let reason { members.append(("reason", .string(reason))) }
        if let detail { members.append(("detail", .string(detail))) }
        if let field { members.append(("field", .string(field))) }
        if let appleErrorCode { members.append(("apple_error_code", .integer(appleErrorCode))) }
        return .object(members)
    }

    private static func write(_ checks: ValidationChecks, to sink: inout some JSONSink) {
        sink.beginObject()
        sink.key("signature")
        sink.string(checks.signature.rawValue)
        sink.key("bundle_id")
        sink.string(checks.bundleID.rawValue)
        sink.key("version")
        sink.string(checks.version.rawValue)
        sink.key("device_hash")
        sink.string(checks.deviceHash.rawValue)
        sink.key("environment")
        sink.string(checks.environment.rawValue)
        sink.endObject()
    }

    private static func write(_ receipt: borrowing Receipt, to sink: inout some JSONSink) {
        sink.beginObject()
        sink.key("receipt_type")
        sink.string(receipt.receiptType)
        sink.key("app_item_id")
        sink.integer(receipt.appItemID)
        sink.key("bundle_id")
        sink.string(receipt.bundleID)
        sink.key("application_version")
        sink.string(receipt.applicationVersion)
        sink.key("original_application_version")
        sink.string(receipt.originalApplicationVersion)
        sink.key("creation_date")
        write(receipt.creationDate, to: &sink)
        sink.key("expiration_date")
        write(receipt.expirationDate, to: &sink)
        sink.key("original_purchase_date")
        write(receipt.originalPurchaseDate, to: &sink)
        sink.key("in_app")
        sink.beginArray()
        for index in receipt.inAppPurchases.indices { write(receipt.inAppPurchases[index], to: &sink) }
        sink.endArray()
        sink.endObject()
    }

    private static func write(_ purchase: borrowing InAppPurchase, to sink: inout some JSONSink) {
        sink.beginObject()
        sink.key("quantity")
        sink.integer(purchase.quantity)
        sink.key("product_id")
        sink.string(purchase.productID)
        sink.key("transaction_id")
        sink.string(purchase.transactionID)
        sink.key("original_transaction_id")
        sink.string(purchase.originalTransactionID)
        sink.key("purchase_date")
        write(purchase.purchaseDate, to: &sink)
        sink.key("original_purchase_date")
        write(purchase.originalPurchaseDate, to: &sink)
        sink.key("expires_date")
        write(purchase.expiresDate, to: &sink)
        sink.key("cancellation_date")
        write(purchase.cancellationDate, to: &sink)
        sink.key("web_order_line_item_id")
        sink.integer(purchase.webOrderLineItemID)
        sink.key("is_trial_period")
        sink.bool(purchase.isTrialPeriod)
        sink.key("is_in_intro_offer_period")
        sink.bool(purchase.isInIntroOfferPeriod)
        sink.key("promotional_offer_id")
        sink.string(purchase.promotionalOfferID)
        sink.endObject()
    }

    /// A receipt's dates are whole seconds: RFC 3339 without a fraction, digits and punctuation that need no escape.
    private static func write(_ date: ReceiptDate?, to sink: inout some JSONSink) {
        guard let date else { return sink.null() }
        sink.plainString { date.appendRFC3339(to: &$0) }
    }
}
