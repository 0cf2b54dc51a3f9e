import ReceiptEngine
import Testing

@testable import ReceiptService
import JSONText

struct JSONValueTests {
    @Test(arguments: [
        ("plain", "\"plain\""),
        ("quote \" and backslash \\", #""quote \" and backslash \\""#),
        ("line\nbreak\ttab\r", #""line\nbreak\ttab\r""#),
        ("\u{0}\u{1F}\u{7F}", #""\u0000\u001f\u007f""#),
        ("</script><b>&", #""\u003c/script\u003e\u003cb\u003e\u0026""#),
        ("héllo ☃ 🧾", "\"héllo ☃ 🧾\""),
    ])
    func string_isEscapedPerRFC8259(input: String, expected: String) {
        #expect(String(decoding: JSONValue.string(input).serialized(), as: UTF8.self) == expected)
    }

    @Test func object_keepsMemberOrderAndTypes() {
        let value = JSONValue.object([
            ("z", .integer(1)), ("a", .bool(false)), ("m", .null), ("n", .integer(-9_007_199_254_740_993)),
            ("list", .array([.string("x"), .number(1.5)])),
        ])
        #expect(
            String(decoding: value.serialized(), as: UTF8.self)
                == #"{"z":1,"a":false,"m":null,"n":-9007199254740993,"list":["x",1.5]}"#)
    }

    /// The writer makes digits itself rather than through `String(value)`; both must agree at every length.
    @Test(arguments: [
        Int64(0), 7, 9, 10, 99, 100, 1_000_000_000, 340_001_196_262_039, 999_999_999_999_999_999, Int64.max, -1,
        Int64.min,
    ])
    func integer_isWrittenAsDecimalDigits(value: Int64) {
        #expect(String(decoding: JSONValue.integer(value).serialized(), as: UTF8.self) == String(value))
    }

    @Test func pretty_indentsByTwoSpaces() {
        let value = JSONValue.object([("a", .array([.integer(1)])), ("b", .object([]))])
        #expect(String(decoding: value.serialized(pretty: true), as: UTF8.self) == "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}\n")
    }

    @Test(arguments: [
        #"{"a": [1, -2.5e3, true, null, "x\u00e9\ud83e\uddfe"], "b": {}}"#,
        "  [ ]  ",
        #""\/\b\f""#,
    ])
    func parse_thenSerialize_roundTrips(text: String) throws {
        let value = try JSONValue(parsing: Array(text.utf8))
        let again = try JSONValue(parsing: value.serialized())
        #expect(value == again)
    }

    @Test func parse_readsIntegersAsIntegers() throws {
        let value = try JSONValue(parsing: Array(#"{"n": 12, "d": 12.0}"#.utf8))
        #expect(value["n"] == .integer(12))
        #expect(value["d"] == .number(12))
    }

    @Test(arguments: [
        "", "{", "[1,]", "{\"a\" 1}", "01", "1.", "\"unterminated", "\"\u{01}\"", "tru", "\"\\ud800\"", "[1] 2",
        "\"\\x\"",
    ])
    func parse_refusesInvalidJSON(text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: Array(text.utf8)) }
    }

    @Test func parse_refusesDeepNesting() {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: Array(deep.utf8)) }
    }

    @Test func parse_refusesInvalidUTF8InStrings() {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: [0x22, 0xC3, 0x28, 0x22]) }
    }
}

struct ResultJSONTests {
    static let receipt = Receipt(
        receiptType: "ProductionSandbox", appItemID: 0, bundleID: "com.example.\"quoted\"", applicationVersion: "3",
        originalApplicationVersion: nil, creationDate: ReceiptDate(millisecondsSince1970: 1_714_564_800_000),
        inAppPurchases: [
            InAppPurchase(
                quantity: 1, productID: "monthly", transactionID: "2", purchaseDate: ReceiptDate(millisecondsSince1970: 0),
                originalTransactionID: "1", expiresDate: ReceiptDate(millisecondsSince1970: 2_592_000_000),
                webOrderLineItemID: 77, isTrialPeriod: true)
        ])

    @Test func invalidResult_hasErrorAndNoReceiptKey() throws {
        let result = ValidationResult(error: ValidationError(.malformedReceipt, "not a receipt"))
        let json = try JSONValue(parsing: ResultJSON.encode(result))
        #expect(json.keys == ["valid", "kind", "error", "checks", "subscriptions"])
        #expect(json["valid"] == .bool(false))
        #expect(json["error"] == .object([("code", .string("malformed_receipt")), ("message", .string("not a receipt"))]))
        #expect(json["checks"]?.keys == ["signature", "bundle_id", "version", "device_hash", "environment"])
        #expect(json["checks"]?["signature"] == .string("skipped"))
    }

    @Test func validResult_hasEveryReceiptKeyWithNullsAndTypedValues() throws {
        var checks = ValidationChecks()
        checks.signature = .passed
        checks.bundleID = .passed
        // SubscriptionStatus has no public memberwise initializer; the engine's summary builds one.
        let statuses = SubscriptionStatus.summarize(
            Self.receipt.inAppPurchases, at: ReceiptDate(millisecondsSince1970: 1_714_564_800_000))
        let result = ValidationResult(checks: checks, receipt: Self.receipt, subscriptions: statuses)
        let json = try JSONValue(parsing: ResultJSON.encode(result))
        #expect(json.keys == ["valid", "kind", "environment", "checks", "receipt", "subscriptions"])
        #expect(json["environment"] == .string("Sandbox"))
        #expect(json["checks"]?["signature"] == .string("passed"))
        let receipt = try #require(json["receipt"])
        #expect(receipt.keys == [
            "receipt_type", "app_item_id", "bundle_id", "application_version", "original_application_version",
            "creation_date", "expiration_date", "original_purchase_date", "in_app",
        ])
        #expect(receipt["bundle_id"] == .string("com.example.\"quoted\""))
        #expect(receipt["app_item_id"] == .integer(0))
        #expect(receipt["original_application_version"] == .null)
        #expect(receipt["creation_date"] == .string("2024-05-01T12:00:00Z"))
        let purchase = try #require(receipt["in_app"]?.arrayValue?.first)
        #expect(purchase.keys == [
            "quantity", "product_id", "transaction_id", "original_transaction_id", "purchase_date",
            "original_purchase_date", "expires_date", "cancellation_date", "web_order_line_item_id",
            "is_trial_period", "is_in_intro_offer_period", "promotional_offer_id",
        ])
        #expect(purchase["quantity"] == .integer(1))
        #expect(purchase["purchase_date"] == .string("1970-01-01T00:00:00Z"))
        #expect(purchase["cancellation_date"] == .null)
        #expect(purchase["web_order_line_item_id"] == .integer(77))
        #expect(purchase["is_trial_period"] == .bool(true))
        #expect(purchase["is_in_intro_offer_period"] == .bool(false))
        let subscription = try #require(json["subscriptions"]?.arrayValue?.first)
        #expect(subscription.keys == [
            "product_id", "original_transaction_id", "latest_transaction_id", "expires_date", "active", "cancelled",
        ])
        #expect(subscription["expires_date"] == .string("1970-01-31T00:00:00Z"))
        #expect(subscription["active"] == .bool(false))
    }

    @Test func prettyAndCompactEncodings_holdTheSameValue() throws {
        let result = ValidationResult(receipt: Self.receipt)
        #expect(try JSONValue(parsing: ResultJSON.encode(result, pretty: true)) == JSONValue(parsing: ResultJSON.encode(result)))
    }
}
