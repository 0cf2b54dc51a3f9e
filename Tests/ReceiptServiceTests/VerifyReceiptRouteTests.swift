import Foundation
import HTTP1Server
import ReceiptEngine
import TestSupport
import Testing

@testable import ReceiptService
import ReceiptForge
import JSONText

/// `POST /verifyReceipt` and `/sandbox/verifyReceipt`: Apple's drop-in, answered with HTTP 200 and a status.
struct VerifyReceiptRouteTests {
    let routes = makeRoutes()

    func verify(
        _ routes: ReceiptRoutes, path: String = "/verifyReceipt", _ body: String, contentType: String? = nil
    ) -> JSONValue {
        let response = routes.handle(post(path, contentType: contentType, text: body), on: .main)
        #expect(response.status == 200)
        #expect(response.headers["Content-Type"] == "application/json")
        return response.json ?? .null
    }

    @Test(arguments: ["", "not json", "[]", "\"receipt-data\"", "5", "null"])
    func bodyNotAJSONObject_isStatus21000(body: String) {
        let answer = verify(routes, body)
        #expect(answer["status"] == .integer(21000))
        #expect(answer["is-retryable"] == .bool(false))
        #expect(answer["is_retryable"] == .bool(false))
        #expect(answer["receipt"] == nil)
    }

    @Test(arguments: ["/verifyReceipt", "/sandbox/verifyReceipt"])
    func getRequest_isHTTP200WithStatus21000(path: String) {
        let response = routes.handle(get(path), on: .main)
        #expect(response.status == 200)
        #expect(response.json?["status"] == .integer(21000))
    }

    // Apple: 21002, "the data in the receipt-data property was malformed or missing".
    @Test(arguments: ["{}", "{\"receipt-data\": 5}", "{\"receipt-data\": null}", "{\"receipt-data\": \"\"}",
        "{\"password\": \"x\"}", "{\"receipt-data\": \" \\n\"}"])
    func missingOrEmptyReceiptData_isStatus21002(body: String) {
        let answer = verify(routes, body)
        #expect(answer["status"] == .integer(21002))
        #expect(answer["receipt"] == nil)
        #expect(answer["is_retryable"] == .bool(false))
    }

    @Test(arguments: [nil, "application/octet-stream", "application/x-www-form-urlencoded", "text/plain"])
    func bodyIsReadAsJSONWhateverTheContentType(contentType: String?) {
        let answer = verify(routes, "{\"receipt-data\": \"\(base64(junkDER))\"}", contentType: contentType)
        #expect(answer["status"] == .integer(21002))
    }

    @Test(arguments: ["!!!!", "abcde", "QUJD=RA=="])
    func badBase64_isStatus21002(receiptData: String) {
        let answer = verify(routes, "{\"receipt-data\": \"\(receiptData)\"}")
        #expect(answer["status"] == .integer(21002))
    }

    @Test func downloadID_isAttribute15_or0WhenTheReceiptHasNone() throws {
        var configuration = ServiceConfiguration()
        configuration.trustAnchors = [TestPKI.atFixedNow.rootAnchor]
        let routes = makeRoutes(configuration)
        var blueprint = ReceiptBlueprint(bundleID: "com.example.app", applicationVersion: "1.0")
        blueprint.purchases = [PurchaseBlueprint(productID: "p", transactionID: "1", purchaseDate: blueprint.creationDate)]
        let without = verify(routes, "{\"receipt-data\": \"\(base64(try blueprint.forge(with: TestPKI.atFixedNow)))\"}")
        #expect(without["status"] == .integer(0))
        #expect(without["receipt"]?["download_id"] == .integer(0))
        blueprint.downloadID = 70_000_123_456
        let with = verify(routes, "{\"receipt-data\": \"\(base64(try blueprint.forge(with: TestPKI.atFixedNow)))\"}")
        #expect(with["receipt"]?["download_id"] == .integer(70_000_123_456))
        #expect(with["receipt"]?["in_app"]?.arrayValue?.first?["in_app_ownership_type"] == .string("PURCHASED"))
    }

    @Test func sandboxPathAnswersSandboxEnvironmentForUnreadableReceipts() {
        let answer = verify(routes, path: "/sandbox/verifyReceipt", "{\"receipt-data\": \"\(base64(junkDER))\"}")
        #expect(answer["status"] == .integer(21002))
        #expect(answer["environment"] == .string("Sandbox"))
    }
}

/// The same endpoints with real App Store receipts from `../shared/fixtures/apple/`.
@Suite(.enabled(if: AppleFixtures.available, "../shared/fixtures/apple is not here"))
struct VerifyReceiptFixtureTests {
    func request(_ file: String, password: String? = nil, excludeOld: Bool? = nil) throws -> String {
        var body = "{\"receipt-data\": \"\(base64(try AppleFixtures.bytes(file)))\""
        if let password { body += ", \"password\": \"\(password)\"" }
        if let excludeOld { body += ", \"exclude-old-transactions\": \(excludeOld)" }
        return body + "}"
    }

    func verify(_ routes: ReceiptRoutes, path: String = "/verifyReceipt", _ body: String) -> JSONValue {
        let response = routes.handle(post(path, contentType: nil, text: body), on: .main)
        #expect(response.status == 200)
        return response.json ?? .null
    }

    @Test func genuineProductionReceipt_isStatus0WithAppleShape() throws {
        let answer = verify(makeRoutes(), try request(AppleFixtures.productionReceipt))
        #expect(answer["status"] == .integer(0))
        #expect(answer["environment"] == .string("Production"))
        let receipt = try #require(answer["receipt"])
        #expect(receipt["bundle_id"] == .string(AppleFixtures.productionBundleID))
        #expect(receipt["application_version"] == .string("2.5.5"))
        #expect(receipt["adam_id"]?.integerValue != nil)
        #expect(receipt["receipt_type"] == .string("Production"))
        // 2017-09-04T09:01:20Z, in summer: PDT.
        #expect(receipt["receipt_creation_date"] == .string("2017-09-04 09:01:20 Etc/GMT"))
        #expect(receipt["receipt_creation_date_ms"] == .string("1504515680000"))
        #expect(receipt["receipt_creation_date_pst"] == .string("2017-09-04 02:01:20 America/Los_Angeles"))
        #expect(receipt["request_date"] == .string("2024-05-01 12:00:00 Etc/GMT"))
        #expect(receipt["request_date_ms"] == .string("1714564800000"))
        #expect(receipt["in_app"] == .array([]))
        #expect(answer["latest_receipt_info"] == .array([]))
        #expect(answer["pending_renewal_info"] == .array([]))
        #expect(answer["latest_receipt"] == .string(base64(try AppleFixtures.bytes(AppleFixtures.productionReceipt))))
        // Attribute 15 of arv_1.der.
        #expect(receipt["download_id"] == .integer(0x3A3D_9C2F_539C))
        #expect(answer["is-retryable"] == .bool(false))
    }

    @Test func sandboxReceipt_hasStringTransactionValues() throws {
        let answer = verify(makeRoutes(), try request(AppleFixtures.sandboxReceipt))
        #expect(answer["status"] == .integer(0))
        #expect(answer["environment"] == .string("Sandbox"))
        let purchases = try #require(answer["receipt"]?["in_app"]?.arrayValue)
        #expect(purchases.count == 7)
        let first = try #require(purchases.first)
        #expect(first["quantity"]?.stringValue == "1")
        #expect(first["is_trial_period"] == .string("false") || first["is_trial_period"] == .string("true"))
        #expect(first["is_in_intro_offer_period"]?.stringValue != nil)
        #expect(first["purchase_date"]?.stringValue?.hasSuffix(" Etc/GMT") == true)
        #expect(first["purchase_date_pst"]?.stringValue?.hasSuffix(" America/Los_Angeles") == true)
        #expect(first["purchase_date_ms"]?.stringValue.flatMap { Int64($0) } != nil)
        // Sandbox receipts carry 0 in attribute 15.
        #expect(answer["receipt"]?["download_id"] == .integer(0))
        for entry in purchases + (answer["latest_receipt_info"]?.arrayValue ?? []) {
            #expect(entry["in_app_ownership_type"] == .string("PURCHASED"))
        }
    }

    @Test func sandboxReceiptToProductionPath_isStatus21007WhenSandboxNotAccepted() throws {
        var configuration = ServiceConfiguration()
        configuration.environments = [.production]
        let answer = verify(makeRoutes(configuration), try request(AppleFixtures.sandboxReceipt))
        #expect(answer["status"] == .integer(21007))
        #expect(answer["receipt"] == nil)
    }

    /// An operator who removes Sandbox from `environments` wants no Sandbox receipt accepted anywhere: the retry a
    /// client makes after 21007 is refused too, as docs/testing.md and Config/README.md say.
    @Test func retryAfter21007_onAProductionOnlyServer_isRefusedWith21003() throws {
        var configuration = ServiceConfiguration()
        configuration.environments = [.production]
        let routes = makeRoutes(configuration)
        #expect(verify(routes, try request(AppleFixtures.sandboxReceipt))["status"] == .integer(21007))
        let retried = verify(routes, path: "/sandbox/verifyReceipt", try request(AppleFixtures.sandboxReceipt))
        #expect(retried["status"] == .integer(21003))
        #expect(retried["receipt"] == nil)
    }

    @Test func productionReceiptToSandboxPath_isStatus21008() throws {
        let answer = verify(makeRoutes(), path: "/sandbox/verifyReceipt", try request(AppleFixtures.productionReceipt))
        #expect(answer["status"] == .integer(21008))
    }

    @Test func sandboxReceiptToSandboxPath_isStatus0() throws {
        let answer = verify(makeRoutes(), path: "/sandbox/verifyReceipt", try request(AppleFixtures.sandboxReceipt))
        #expect(answer["status"] == .integer(0))
        #expect(answer["environment"] == .string("Sandbox"))
    }

    @Test func untrustedSigner_isStatus21003() throws {
        let answer = verify(makeRoutes(), try request(AppleFixtures.untrustedReceipt))
        #expect(answer["status"] == .integer(21003))
    }

    @Test func bundleIDNotConfigured_isStatus21010() throws {
        var configuration = ServiceConfiguration()
        configuration.apps = [.init(bundleID: "com.example.other")]
        let answer = verify(makeRoutes(configuration), try request(AppleFixtures.productionReceipt))
        #expect(answer["status"] == .integer(21010))
    }

    @Test func versionNotAccepted_isStatus21003() throws {
        var configuration = ServiceConfiguration()
        configuration.apps = [.init(bundleID: AppleFixtures.productionBundleID, versions: ["9.9"])]
        let answer = verify(makeRoutes(configuration), try request(AppleFixtures.productionReceipt))
        #expect(answer["status"] == .integer(21003))
    }

    @Test(arguments: [(nil, 21004), ("wrong", 21004), ("s3cret", 0)] as [(String?, Int64)])
    func sharedSecret_mustMatchPassword(password: String?, expectedStatus: Int64) throws {
        var configuration = ServiceConfiguration()
        configuration.apps = [.init(bundleID: AppleFixtures.productionBundleID, sharedSecret: "s3cret")]
        let answer = verify(makeRoutes(configuration), try request(AppleFixtures.productionReceipt, password: password))
        #expect(answer["status"] == .integer(expectedStatus))
    }

    @Test func excludeOldTransactions_keepsLatestRenewalPerOriginalTransaction() throws {
        // A sandbox receipt with many auto-renewable renewals.
        let file = "receipts/tpinapp_3.der"
        let all = verify(makeRoutes(), try request(file, excludeOld: false))
        let latest = verify(makeRoutes(), try request(file, excludeOld: true))
        let allInfo = try #require(all["latest_receipt_info"]?.arrayValue)
        let latestInfo = try #require(latest["latest_receipt_info"]?.arrayValue)
        #expect(allInfo.count > latestInfo.count)
        let originals = latestInfo.compactMap { $0["original_transaction_id"]?.stringValue }
        #expect(Set(originals).count == originals.count)
        let expiries = allInfo.compactMap { $0["expires_date_ms"]?.stringValue.flatMap { Int64($0) } }
        #expect(expiries.count == allInfo.count)
        #expect(expiries == expiries.sorted(by: >))
        // The newest renewal overall survives exclusion.
        #expect(latestInfo.first == allInfo.first)
    }

    @Test func validateRoute_genuineReceiptWithMatchingDeviceHeader_is200WithPassedDeviceHash() throws {
        let response = makeRoutes().handle(
            post(
                "/v1/validate", contentType: "application/octet-stream",
                body: try AppleFixtures.bytes(AppleFixtures.productionReceipt),
                headers: [("X-Device-Id", AppleFixtures.productionDeviceID)]), on: .main)
        #expect(response.status == 200)
        let json = try #require(response.json)
        #expect(json["valid"] == .bool(true))
        #expect(json["error"] == nil)
        #expect(json["environment"] == .string("Production"))
        #expect(json["checks"]?["device_hash"] == .string("passed"))
        #expect(json["receipt"]?["creation_date"] == .string("2017-09-04T09:01:20Z"))
    }

    @Test func validateRoute_wrongDeviceInQuery_is422DeviceHashMismatch() throws {
        let response = makeRoutes().handle(
            post(
                "/v1/validate?device_id=00:11:22:33:44:55", contentType: "application/octet-stream",
                body: try AppleFixtures.bytes(AppleFixtures.productionReceipt)), on: .main)
        #expect(response.status == 422)
        #expect(response.errorCode == "device_hash_mismatch")
        #expect(response.json?["checks"]?["device_hash"] == .string("failed"))
        #expect(response.json?["receipt"] != nil)
    }

    @Test func validateRoute_matchingDeviceInMultipart_is200() throws {
        let body = multipartBody(
            boundary: "XyZ",
            parts: [
                ("receipt", "r.der", try AppleFixtures.bytes(AppleFixtures.productionReceipt)),
                ("device_id", nil, Array(AppleFixtures.productionDeviceID.utf8)),
            ])
        let response = makeRoutes().handle(
            post("/v1/validate", contentType: "multipart/form-data; boundary=XyZ", body: body), on: .main)
        #expect(response.status == 200)
        #expect(response.json?["checks"]?["device_hash"] == .string("passed"))
    }

    @Test func validateRoute_matchingDeviceInJSON_is200() throws {
        let receipt = base64(try AppleFixtures.bytes(AppleFixtures.productionReceipt))
        let body = "{\"receipt\": \"\(receipt)\", \"device_id\": \"\(AppleFixtures.productionDeviceID)\"}"
        let response = makeRoutes().handle(post("/v1/validate", contentType: "application/json", text: body), on: .main)
        #expect(response.status == 200)
        #expect(response.json?["checks"]?["device_hash"] == .string("passed"))
    }

    @Test func validateRoute_browserGetsHTMLWithPurchasesTable() throws {
        let response = makeRoutes().handle(
            post(
                "/v1/validate", contentType: "application/octet-stream",
                body: try AppleFixtures.bytes(AppleFixtures.sandboxReceipt),
                headers: [("Accept", "text/html,*/*;q=0.8")]), on: .main)
        #expect(response.status == 200)
        #expect(response.text.contains("Valid receipt"))
        #expect(response.text.contains("Purchases"))
        #expect(response.text.contains(AppleFixtures.sandboxBundleID))
    }
}
