public import ReceiptEngine

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
        var writer = CompactWriter()
        writer.write(result)
        return writer.output
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

    /// The compact form of `value(of:)`, member for member in the same order.
    private struct CompactWriter {
        var output: [UInt8] = []
        /// Per open object or array: whether a member or element was written yet (the next one needs a comma).
        private var hasItems: [Bool] = []

        init() { output.reserveCapacity(2048) }

        mutating func write(_ result: ValidationResult) {
            open(UInt8(ascii: "{"))
            key(Keys.valid)
            bool(result.isValid)
            if let error = result.error {
                key(Keys.error)
                open(UInt8(ascii: "{"))
                key(Keys.code)
                string(error.code.rawValue)
                key(Keys.message)
                string(error.message)
                close(UInt8(ascii: "}"))
            }
            if let environment = result.environment {
                key(Keys.environment)
                string(environment.rawValue)
            }
            key(Keys.checks)
            open(UInt8(ascii: "{"))
            key(Keys.signature)
            string(result.checks.signature.rawValue)
            key(Keys.bundleID)
            string(result.checks.bundleID.rawValue)
            key(Keys.version)
            string(result.checks.version.rawValue)
            key(Keys.deviceHash)
            string(result.checks.deviceHash.rawValue)
            key(Keys.environment)
            string(result.checks.environment.rawValue)
            close(UInt8(ascii: "}"))
            if let receipt = result.receipt {
                key(Keys.receipt)
                write(receipt)
            }
            key(Keys.subscriptions)
            open(UInt8(ascii: "["))
            for status in result.subscriptions {
                element()
                write(status)
            }
            close(UInt8(ascii: "]"))
            close(UInt8(ascii: "}"))
        }

        private mutating func write(_ receipt: Receipt) {
            open(UInt8(ascii: "{"))
            key(Keys.receiptType)
            string(receipt.receiptType)
            key(Keys.appItemID)
            integer(receipt.appItemID)
            key(Keys.bundleID)
            string(receipt.bundleID)
            key(Keys.applicationVersion)
            string(receipt.applicationVersion)
            key(Keys.originalApplicationVersion)
            string(receipt.originalApplicationVersion)
            key(Keys.creationDate)
            date(receipt.creationDate)
            key(Keys.expirationDate)
            date(receipt.expirationDate)
            key(Keys.originalPurchaseDate)
            date(receipt.originalPurchaseDate)
            key(Keys.inApp)
            open(UInt8(ascii: "["))
            for purchase in receipt.inAppPurchases {
                element()
                write(purchase)
            }
            close(UInt8(ascii: "]"))
            close(UInt8(ascii: "}"))
        }

        private mutating func write(_ purchase: InAppPurchase) {
            open(UInt8(ascii: "{"))
            key(Keys.quantity)
            integer(purchase.quantity)
            key(Keys.productID)
            string(purchase.productID)
            key(Keys.transactionID)
            string(purchase.transactionID)
            key(Keys.originalTransactionID)
            string(purchase.originalTransactionID)
            key(Keys.purchaseDate)
            date(purchase.purchaseDate)
            key(Keys.originalPurchaseDate)
            date(purchase.originalPurchaseDate)
            key(Keys.expiresDate)
            date(purchase.expiresDate)
            key(Keys.cancellationDate)
            date(purchase.cancellationDate)
            key(Keys.webOrderLineItemID)
            integer(purchase.webOrderLineItemID)
            key(Keys.isTrialPeriod)
            bool(purchase.isTrialPeriod)
            key(Keys.isInIntroOfferPeriod)
            bool(purchase.isInIntroOfferPeriod)
            key(Keys.promotionalOfferID)
            string(purchase.promotionalOfferID)
            close(UInt8(ascii: "}"))
        }

        private mutating func write(_ status: SubscriptionStatus) {
            open(UInt8(ascii: "{"))
            key(Keys.productID)
            string(status.productID)
            key(Keys.originalTransactionID)
            string(status.originalTransactionID)
            key(Keys.latestTransactionID)
            string(status.latestTransactionID)
            key(Keys.expiresDate)
            date(status.expiresDate)
            key(Keys.active)
            bool(status.isActive)
            key(Keys.cancelled)
            bool(status.isCancelled)
            close(UInt8(ascii: "}"))
        }

        private mutating func open(_ bracket: UInt8) {
            output.append(bracket)
            hasItems.append(false)
        }

        private mutating func close(_ bracket: UInt8) {
            output.append(bracket)
            hasItems.removeLast()
        }

        /// Before a member's key or an array element.
        private mutating func element() {
            if hasItems[hasItems.count - 1] { output.append(UInt8(ascii: ",")) }
            hasItems[hasItems.count - 1] = true
        }

        /// `key` is the quoted name and colon, made once.
        private mutating func key(_ key: [UInt8]) {
            element()
            output.append(contentsOf: key)
        }

        private mutating func string(_ value: String?) {
            guard let value else { return null() }
            JSONValue.writeString(value, into: &output)
        }

        private mutating func integer(_ value: Int64?) {
            guard let value else { return null() }
            JSONValue.writeInteger(value, into: &output)
        }

        private mutating func bool(_ value: Bool) {
            output.append(contentsOf: value ? Keys.true : Keys.false)
        }

        /// RFC 3339 text is digits and punctuation only: nothing to escape.
        private mutating func date(_ value: ReceiptDate?) {
            guard let value else { return null() }
            output.append(UInt8(ascii: "\""))
            value.appendRFC3339(to: &output)
            output.append(UInt8(ascii: "\""))
        }

        private mutating func null() { output.append(contentsOf: Keys.null) }
    }

    /// Member names as written: quoted, with the colon.
    private enum Keys {
        static func key(_ name: String) -> [UInt8] { Array("\"\(name)\":".utf8) }
        static let valid = key("valid"), error = key("error"), code = key("code"), message = key("message")
        static let environment = key("environment"), checks = key("checks"), signature = key("signature")
        static let bundleID = key("bundle_id"), version = key("version"), deviceHash = key("device_hash")
        static let receipt = key("receipt"), subscriptions = key("subscriptions"), receiptType = key("receipt_type")
        static let appItemID = key("app_item_id"), applicationVersion = key("application_version")
        static let originalApplicationVersion = key("original_application_version")
        static let creationDate = key("creation_date"), expirationDate = key("expiration_date")
        static let originalPurchaseDate = key("original_purchase_date"), inApp = key("in_app")
        static let quantity = key("quantity"), productID = key("product_id"), transactionID = key("transaction_id")
        static let originalTransactionID = key("original_transaction_id"), purchaseDate = key("purchase_date")
        static let expiresDate = key("expires_date"), cancellationDate = key("cancellation_date")
        static let webOrderLineItemID = key("web_order_line_item_id"), isTrialPeriod = key("is_trial_period")
        static let isInIntroOfferPeriod = key("is_in_intro_offer_period")
        static let promotionalOfferID = key("promotional_offer_id"), latestTransactionID = key("latest_transaction_id")
        static let active = key("active"), cancelled = key("cancelled")
        static let `true` = Array("true".utf8), `false` = Array("false".utf8), null = Array("null".utf8)
    }
}
