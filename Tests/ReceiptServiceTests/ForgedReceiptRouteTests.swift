import Foundation
import HTTP1Server
import ReceiptEngine
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService
import JSONText

/// Routes over receipts forged by the engine's test authority, whose exact contents the tests choose.
struct ForgedReceiptRouteTests {
    static let bundleID = "com.example.forged"

    private func date(_ text: String) -> ReceiptDate { ReceiptDate(rfc3339: text)! }

    /// A sandbox receipt with two renewals of one subscription (the later one summer, cancelled), one renewal of
    /// another (winter), and a consumable.
    private func blueprint(receiptType: String = "ProductionSandbox") -> ReceiptBlueprint {
        var blueprint = ReceiptBlueprint(
            bundleID: Self.bundleID, applicationVersion: "42", deviceIdentifier: DeviceIdentifier("00:11:22:33:44:55"),
            creationDate: date("2024-07-04T18:30:00Z"))
        blueprint.receiptType = receiptType
        blueprint.appItemID = 123_456
        var first = PurchaseBlueprint(
            productID: "pro.monthly", transactionID: "1000", purchaseDate: date("2024-05-01T12:00:00Z"),
            expiresDate: date("2024-06-01T12:00:00Z"))
        first.webOrderLineItemID = 9001
        first.isTrialPeriod = true
        var renewal = PurchaseBlueprint(
            productID: "pro.monthly", transactionID: "1001", originalTransactionID: "1000",
            purchaseDate: date("2024-06-01T12:00:00Z"), expiresDate: date("2024-07-01T12:00:00Z"))
        renewal.cancellationDate = date("2024-06-15T08:00:00Z")
        let winter = PurchaseBlueprint(
            productID: "pro.yearly", transactionID: "2000", purchaseDate: date("2024-01-15T03:30:15Z"),
            expiresDate: date("2025-01-15T03:30:15Z"))
        let consumable = PurchaseBlueprint(
            productID: "coins.100", transactionID: "3000", purchaseDate: date("2024-02-02T02:02:02Z"))
        blueprint.purchases = [first, renewal, winter, consumable]
        return blueprint
    }

    private func routes(trusting: Bool = true, apps: [ServiceConfiguration.App] = []) throws -> ReceiptRoutes {
        var configuration = ServiceConfiguration()
        if trusting { configuration.trustAnchors = [TestPKI.atFixedNow.rootAnchor] }
        configuration.apps = apps
        configuration.environments = [.production, .sandbox, .xcode]
        return makeRoutes(configuration)
    }

    private func forged(_ blueprint: ReceiptBlueprint) throws -> [UInt8] {
        try blueprint.forge(with: TestPKI.atFixedNow)
    }

    private func appleAnswer(_ routes: ReceiptRoutes, _ receipt: [UInt8], extra: String = "") -> JSONValue {
        let body = "{\"receipt-data\": \"\(base64(receipt))\"\(extra)}"
        let response = routes.handle(post("/sandbox/verifyReceipt", contentType: nil, text: body), on: .main)
        #expect(response.status == 200)
        return response.json ?? .null
    }

    @Test func verifyReceipt_rendersEveryFieldTheAppleWay() throws {
        let answer = appleAnswer(try routes(), try forged(blueprint()))
        #expect(answer["status"] == .integer(0))
        #expect(answer["environment"] == .string("Sandbox"))
        let receipt = try #require(answer["receipt"])
        #expect(receipt["receipt_type"] == .string("ProductionSandbox"))
        #expect(receipt["adam_id"] == .integer(123_456))
        #expect(receipt["app_item_id"] == .integer(123_456))
        #expect(receipt["bundle_id"] == .string(Self.bundleID))
        #expect(receipt["application_version"] == .string("42"))
        #expect(receipt["original_application_version"] == .string("1.0"))
        #expect(receipt["receipt_creation_date"] == .string("2024-07-04 18:30:00 Etc/GMT"))
        #expect(receipt["receipt_creation_date_ms"] == .string("1720117800000"))
        #expect(receipt["receipt_creation_date_pst"] == .string("2024-07-04 11:30:00 America/Los_Angeles"))
        #expect(receipt["request_date_pst"] == .string("2024-05-01 05:00:00 America/Los_Angeles"))

        let purchases = try #require(receipt["in_app"]?.arrayValue)
        #expect(purchases.count == 4)
        let trial = try #require(purchases.first { $0["transaction_id"] == .string("1000") })
        #expect(trial["quantity"] == .string("1"))
        #expect(trial["product_id"] == .string("pro.monthly"))
        #expect(trial["original_transaction_id"] == .string("1000"))
        #expect(trial["purchase_date"] == .string("2024-05-01 12:00:00 Etc/GMT"))
        #expect(trial["purchase_date_ms"] == .string("1714564800000"))
        #expect(trial["purchase_date_pst"] == .string("2024-05-01 05:00:00 America/Los_Angeles"))
        #expect(trial["web_order_line_item_id"] == .string("9001"))
        #expect(trial["is_trial_period"] == .string("true"))
        #expect(trial["is_in_intro_offer_period"] == .string("false"))
        #expect(trial["cancellation_date"] == nil)

        let cancelled = try #require(purchases.first { $0["transaction_id"] == .string("1001") })
        #expect(cancelled["cancellation_date"] == .string("2024-06-15 08:00:00 Etc/GMT"))
        #expect(cancelled["cancellation_date_pst"] == .string("2024-06-15 01:00:00 America/Los_Angeles"))

        let winter = try #require(purchases.first { $0["transaction_id"] == .string("2000") })
        #expect(winter["purchase_date_pst"] == .string("2024-01-14 19:30:15 America/Los_Angeles"))
        #expect(winter["expires_date"] == .string("2025-01-15 03:30:15 Etc/GMT"))

        let consumable = try #require(purchases.first { $0["transaction_id"] == .string("3000") })
        #expect(consumable["expires_date"] == nil)

        let latest = try #require(answer["latest_receipt_info"]?.arrayValue)
        #expect(latest.compactMap { $0["transaction_id"]?.stringValue } == ["2000", "1001", "1000"])
    }

    @Test func verifyReceipt_excludeOldTransactions_keepsNewestRenewalPerSubscription() throws {
        let answer = appleAnswer(try routes(), try forged(blueprint()), extra: ", \"exclude-old-transactions\": true")
        let latest = try #require(answer["latest_receipt_info"]?.arrayValue)
        #expect(latest.compactMap { $0["transaction_id"]?.stringValue } == ["2000", "1001"])
        // in_app is the receipt as it is; exclusion applies to latest_receipt_info only.
        #expect(answer["receipt"]?["in_app"]?.arrayValue?.count == 4)
    }

    @Test func verifyReceipt_untrustedTestRoot_is21003() throws {
        let answer = appleAnswer(try routes(trusting: false), try forged(blueprint()))
        #expect(answer["status"] == .integer(21003))
        #expect(answer["receipt"] == nil)
    }

    @Test func verifyReceipt_tamperedSignature_is21003() throws {
        var bytes = try forged(blueprint())
        // The signature is the last thing in the SignerInfo: flipping the final byte breaks it.
        bytes[bytes.count - 1] ^= 0xFF
        let answer = appleAnswer(try routes(), bytes)
        #expect(answer["status"] == .integer(21003))
    }

    @Test func verifyReceipt_xcodeReceiptOnSandboxPath_is21003() throws {
        let answer = appleAnswer(try routes(), try forged(blueprint(receiptType: "Xcode")))
        #expect(answer["status"] == .integer(21003))
    }

    @Test func verifyReceipt_sharedSecretOfConfiguredApp_isEnforced() throws {
        let routes = try routes(apps: [.init(bundleID: Self.bundleID, sharedSecret: "topsecret")])
        let receipt = try forged(blueprint())
        #expect(appleAnswer(routes, receipt, extra: ", \"password\": \"guess\"")["status"] == .integer(21004))
        #expect(appleAnswer(routes, receipt, extra: ", \"password\": \"topsecret\"")["status"] == .integer(0))
    }

    @Test func validate_validForgedReceipt_is200WithSubscriptions() throws {
        let response = try routes().handle(
            post("/v1/validate", contentType: "application/octet-stream", body: try forged(blueprint()),
                 headers: [("X-Device-Id", "00:11:22:33:44:55")]), on: .main)
        #expect(response.status == 200)
        let json = try #require(response.json)
        #expect(json["valid"] == .bool(true))
        #expect(json["checks"]?["device_hash"] == .string("passed"))
        #expect(json["checks"]?["signature"] == .string("passed"))
        #expect(json["receipt"]?["app_item_id"] == .integer(123_456))
        let subscriptions = try #require(json["subscriptions"]?.arrayValue)
        let monthly = try #require(subscriptions.first { $0["original_transaction_id"] == .string("1000") })
        #expect(monthly["latest_transaction_id"] == .string("1001"))
        #expect(monthly["cancelled"] == .bool(true))
        #expect(monthly["active"] == .bool(false))
        let yearly = try #require(subscriptions.first { $0["original_transaction_id"] == .string("2000") })
        // fixedNow is 2024-05-01; the yearly plan runs to 2025-01-15.
        #expect(yearly["active"] == .bool(true))
        #expect(yearly["expires_date"] == .string("2025-01-15T03:30:15Z"))
    }

    @Test func validate_bundleNotConfigured_is422WithReceiptForStaff() throws {
        let response = try routes(apps: [.init(bundleID: "com.example.other")]).handle(
            post("/v1/validate", contentType: "application/octet-stream", body: try forged(blueprint())), on: .main)
        #expect(response.status == 422)
        #expect(response.errorCode == "bundle_id_mismatch")
        #expect(response.json?["checks"]?["bundle_id"] == .string("failed"))
        #expect(response.json?["receipt"]?["bundle_id"] == .string(Self.bundleID))
    }

    @Test func validate_htmlVerdict_escapesReceiptStrings() throws {
        var hostile = blueprint()
        hostile.bundleID = "<script>alert(1)</script>"
        hostile.purchases[0].productID = "\"><img src=x onerror=alert(2)>"
        let response = try routes().handle(
            post("/v1/validate", contentType: "application/octet-stream", body: try forged(hostile),
                 headers: [("Accept", "text/html")]), on: .main)
        #expect(response.status == 200)
        #expect(!response.text.contains("<script>alert"))
        #expect(!response.text.contains("<img"))
        #expect(response.text.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        #expect(response.text.contains("id=\"purchases\""))
        #expect(response.text.contains("id=\"subscriptions\""))
    }

    @Test func validate_untrustedReceipt_saysWhyInAStableReason() throws {
        let response = try routes(trusting: false).handle(
            post("/v1/validate", contentType: "application/octet-stream", body: try forged(blueprint())), on: .main)
        #expect(response.status == 422)
        #expect(response.errorCode == "certificate_untrusted")
        #expect(response.json?["error"]?["reason"] == .string("no_trusted_root"))
        #expect(response.json?["kind"] == .string("receipt"))
    }
}
