public import ReceiptEngine
public import JSONText
import StoreKitJWS

/// receiptd's own answer for a verdict: the body of `POST /v1/validate` and of `receiptd verify --json`.
///
/// Keys and their order are a contract (see `docs/`): `valid`, `error` (only when invalid), `environment` (only when
/// known), `checks`, `receipt` (whenever the engine decoded one; every key present, absent values `null`),
/// `subscriptions`. Dates are RFC 3339 in UTC, numbers are numbers and flags are booleans.
public enum ResultJSON {
    /// The verdict as UTF-8 JSON text.
    ///
    /// Compact text is written straight to bytes: `POST /v1/validate` answers every request with it, and building
    /// the `JSONValue` tree first cost as much as the rest of a validation. It is byte for byte
    /// `value(of:).serialized()`, which `ResultJSONEncodingTests` checks.
    public static func encode(_ result: ValidationResult, pretty: Bool = false) -> [UInt8] {
        guard !pretty else { return value(of: result).serialized(pretty: true) }
        var writer = CompactWriter(capacity: CompactWriter.estimatedSize(of: result))
        writer.write(result)
        writer.close()
        return writer.output
    }

    /// The compact verdict with the ledger's view of its subscriptions in place of the receipt's own, and
    /// `"ledger"` last: byte for byte `view.applied(to: value(of: result)).serialized()`, without the tree.
    static func encode(_ result: ValidationResult, ledger view: LedgerView) -> [UInt8] {
        var writer = CompactWriter(capacity: CompactWriter.estimatedSize(of: result))
        writer.write(result, subscriptions: view.subscriptions)
        writer.output += Array(#","ledger":"#.utf8) + JSONValue.string(view.availability).serialized()
        writer.close()
        return writer.output
    }

    /// The verdict as a JSON value, for callers that embed it.
    public static func value(of result: ValidationResult) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [("valid", .bool(result.isValid)), ("kind", .string("receipt"))]
        if let error = result.error {
            members.append(("error", errorObject(error)))
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

    /// A verdict's error: the shared shape, plus `reason` when the code has one. One writer for receipts and
    /// StoreKit 2 alike.
    public static func errorObject(_ error: ValidationError) -> JSONValue { JWSResultJSON.errorObject(error) }

    /// `{"code": …, "message": …}`, the error shape every receiptd answer shares, with `reason` when the request's
    /// upload was recognizably something else (`pem`, `text`, `json`…) and `detail` when it says which part of a
    /// malformed request failed.
    static func errorObject(code: String, message: String, reason: String? = nil, detail: String? = nil) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [("code", .string(code)), ("message", .string(message))]
        if let reason { members.append(("reason", .string(reason))) }
        if let detail { members.append(("detail", .string(detail))) }
        return .object(members)
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

    /// One `subscriptions` entry, as a StoreKit 2 verdict writes it.
    static func subscription(_ status: SubscriptionStatus) -> JSONValue { JWSResultJSON.subscription(status) }

    private static func date(_ date: ReceiptDate?) -> JSONValue { .string(date?.rfc3339) }

    /// The compact form of `value(of:)`, member for member in the same order.
    ///
    /// Each member's comma, quoted name and colon go out as one literal (with the value too for booleans), since
    /// the shape is fixed: every append into the array costs a capacity check, and a bulk one about a hundred
    /// instructions however short it is, so fewer and larger appends are what makes this cheap.
    private struct CompactWriter {
        var output: [UInt8] = []

        init(capacity: Int) { output.reserveCapacity(capacity) }

        /// Enough for the answer when no string needs escapes, so that the array is allocated once.
        static func estimatedSize(of result: ValidationResult) -> Int {
            512 + 640 * (result.receipt?.inAppPurchases.count ?? 0) + 256 * result.subscriptions.count
        }

        /// Everything but the closing brace, so that members can follow.
        mutating func write(_ result: ValidationResult, subscriptions replacement: [JSONValue]? = nil) {
            literal(result.isValid ? Literals.validTrue : Literals.validFalse)
            literal(Literals.kindReceipt)
            if let error = result.error {
                literal(Literals.errorCode)
                string(error.code.rawValue)
                literal(Literals.message)
                string(error.message)
                if let reason = error.reason {
                    literal(Literals.reason)
                    string(reason.rawValue)
                }
                if let detail = error.detail {
                    literal(Literals.detail)
                    string(detail.rawValue)
                }
                byte(UInt8(ascii: "}"))
            }
            if let environment = result.environment {
                literal(Literals.environment)
                string(environment.rawValue)
            }
            literal(Literals.checksSignature)
            string(result.checks.signature.rawValue)
            literal(Literals.bundleID)
            string(result.checks.bundleID.rawValue)
            literal(Literals.version)
            string(result.checks.version.rawValue)
            literal(Literals.deviceHash)
            string(result.checks.deviceHash.rawValue)
            literal(Literals.environment)
            string(result.checks.environment.rawValue)
            byte(UInt8(ascii: "}"))
            if result.receipt != nil {
                literal(Literals.receiptType)
                write(result.receipt!)
            }
            literal(Literals.subscriptions)
            if let replacement {
                for (index, entry) in replacement.enumerated() {
                    if index > 0 { byte(UInt8(ascii: ",")) }
                    output += entry.serialized()
                }
            } else {
                // By index, so that each element is borrowed where it lies rather than copied out (a retain and
                // release per string it holds).
                for index in result.subscriptions.indices {
                    if index > 0 { byte(UInt8(ascii: ",")) }
                    write(result.subscriptions[index])
                }
            }
            byte(UInt8(ascii: "]"))
        }

        mutating func close() { byte(UInt8(ascii: "}")) }

        /// From the value of `receipt_type` on: its `{"receipt_type":` is written with the key before it.
        private mutating func write(_ receipt: borrowing Receipt) {
            string(receipt.receiptType)
            literal(Literals.appItemID)
            integer(receipt.appItemID)
            literal(Literals.bundleID)
            string(receipt.bundleID)
            literal(Literals.applicationVersion)
            string(receipt.applicationVersion)
            literal(Literals.originalApplicationVersion)
            string(receipt.originalApplicationVersion)
            literal(Literals.creationDate)
            date(receipt.creationDate)
            literal(Literals.expirationDate)
            date(receipt.expirationDate)
            literal(Literals.originalPurchaseDate)
            date(receipt.originalPurchaseDate)
            literal(Literals.inApp)
            for index in receipt.inAppPurchases.indices {
                if index > 0 { byte(UInt8(ascii: ",")) }
                write(receipt.inAppPurchases[index])
            }
            byte(UInt8(ascii: "]"))
            byte(UInt8(ascii: "}"))
        }

        private mutating func write(_ purchase: borrowing InAppPurchase) {
            literal(Literals.quantity)
            integer(purchase.quantity)
            literal(Literals.productID)
            string(purchase.productID)
            literal(Literals.transactionID)
            string(purchase.transactionID)
            literal(Literals.originalTransactionID)
            string(purchase.originalTransactionID)
            literal(Literals.purchaseDate)
            date(purchase.purchaseDate)
            literal(Literals.originalPurchaseDate)
            date(purchase.originalPurchaseDate)
            literal(Literals.expiresDate)
            date(purchase.expiresDate)
            literal(Literals.cancellationDate)
            date(purchase.cancellationDate)
            literal(Literals.webOrderLineItemID)
            integer(purchase.webOrderLineItemID)
            literal(purchase.isTrialPeriod ? Literals.isTrialPeriodTrue : Literals.isTrialPeriodFalse)
            literal(purchase.isInIntroOfferPeriod ? Literals.introOfferTrue : Literals.introOfferFalse)
            literal(Literals.promotionalOfferID)
            string(purchase.promotionalOfferID)
            byte(UInt8(ascii: "}"))
        }

        private mutating func write(_ status: borrowing SubscriptionStatus) {
            literal(Literals.firstProductID)
            string(status.productID)
            literal(Literals.originalTransactionID)
            string(status.originalTransactionID)
            literal(Literals.latestTransactionID)
            string(status.latestTransactionID)
            literal(Literals.expiresDate)
            date(status.expiresDate)
            literal(status.isActive ? Literals.activeTrue : Literals.activeFalse)
            literal(status.isCancelled ? Literals.cancelledTrue : Literals.cancelledFalse)
            byte(UInt8(ascii: "}"))
        }

        private mutating func literal(_ text: StaticString) {
            output.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
        }

        private mutating func byte(_ byte: UInt8) { output.append(byte) }

        private mutating func string(_ value: String?) {
            guard let value else { return null() }
            JSONValue.writeString(value, into: &output)
        }

        private mutating func integer(_ value: Int64?) {
            guard let value else { return null() }
            JSONValue.writeInteger(value, into: &output)
        }

        /// RFC 3339 text is digits and punctuation only: nothing to escape.
        private mutating func date(_ value: ReceiptDate?) {
            guard let value else { return null() }
            output.append(UInt8(ascii: "\""))
            value.appendRFC3339(to: &output)
            output.append(UInt8(ascii: "\""))
        }

        /// Four bytes are cheaper appended one by one than as a literal.
        private mutating func null() {
            output.append(UInt8(ascii: "n"))
            output.append(UInt8(ascii: "u"))
            output.append(UInt8(ascii: "l"))
            output.append(UInt8(ascii: "l"))
        }
    }

    /// What goes between values, as written: the comma before a member, its quoted name and the colon, and
    /// whatever opens or closes around it. Static strings, so that writing one is a copy of constant bytes with no
    /// lazy global to check and no array to retain.
    private enum Literals {
        static let validTrue: StaticString = #"{"valid":true"#
        static let validFalse: StaticString = #"{"valid":false"#
        static let errorCode: StaticString = #","error":{"code":"#
        static let kindReceipt: StaticString = #","kind":"receipt""#
        static let message: StaticString = #","message":"#
        static let reason: StaticString = #","reason":"#
        static let environment: StaticString = #","environment":"#
        static let detail: StaticString = #","detail":"#
        static let checksSignature: StaticString = #","checks":{"signature":"#
        static let bundleID: StaticString = #","bundle_id":"#
        static let version: StaticString = #","version":"#
        static let deviceHash: StaticString = #","device_hash":"#
        static let receiptType: StaticString = #","receipt":{"receipt_type":"#
        static let subscriptions: StaticString = #","subscriptions":["#
        static let appItemID: StaticString = #","app_item_id":"#
        static let applicationVersion: StaticString = #","application_version":"#
        static let originalApplicationVersion: StaticString = #","original_application_version":"#
        static let creationDate: StaticString = #","creation_date":"#
        static let expirationDate: StaticString = #","expiration_date":"#
        static let originalPurchaseDate: StaticString = #","original_purchase_date":"#
        static let inApp: StaticString = #","in_app":["#
        static let quantity: StaticString = #"{"quantity":"#
        static let productID: StaticString = #","product_id":"#
        static let firstProductID: StaticString = #"{"product_id":"#
        static let transactionID: StaticString = #","transaction_id":"#
        static let originalTransactionID: StaticString = #","original_transaction_id":"#
        static let purchaseDate: StaticString = #","purchase_date":"#
        static let expiresDate: StaticString = #","expires_date":"#
        static let cancellationDate: StaticString = #","cancellation_date":"#
        static let webOrderLineItemID: StaticString = #","web_order_line_item_id":"#
        static let isTrialPeriodTrue: StaticString = #","is_trial_period":true"#
        static let isTrialPeriodFalse: StaticString = #","is_trial_period":false"#
        static let introOfferTrue: StaticString = #","is_in_intro_offer_period":true"#
        static let introOfferFalse: StaticString = #","is_in_intro_offer_period":false"#
        static let promotionalOfferID: StaticString = #","promotional_offer_id":"#
        static let latestTransactionID: StaticString = #","latest_transaction_id":"#
        static let activeTrue: StaticString = #","active":true"#
        static let activeFalse: StaticString = #","active":false"#
        static let cancelledTrue: StaticString = #","cancelled":true"#
        static let cancelledFalse: StaticString = #","cancelled":false"#
    }
}
