import Foundation
import HTTP1Server
import JSONText
import ReceiptEngine
import ReceiptForge
import StoreKitJWS
import TestSupport
import Testing

@testable import ReceiptService

/// Issue 18 over HTTP: a body with the look of a JWS that is not a well-formed one is `malformed_jws` with a
/// `detail`; uploads that are something else say what (`reason`), as `receiptd verify` does; kinds, the ledger's
/// `not_stored`, and the verdict's subscriptions.
struct MalformedJWSRouteTests {
    static let jws = try! ValidateJWSRouteTests.forged("transaction")
    static var segments: [Substring] { jws.split(separator: ".", omittingEmptySubsequences: false) }

    /// The three cases the acceptance run pastes as text/plain, and their detail.
    static let damaged: [(name: String, text: String, detail: String, fragment: String)] = [
        ("two segments", segments[0...1].joined(separator: "."), "segment_count", "has 2"),
        ("four segments", jws + "." + segments[2], "segment_count", "has 4"),
        ("header not JSON", "bm90IGpzb24." + segments[1] + "." + segments[2], "header_not_json", "segment 1 of 3"),
        ("header only", String(segments[0].prefix(40)), "segment_count", "has 1"),
        ("signature not base64url", segments[0...1].joined(separator: ".") + ".A", "signature_not_base64url",
         "segment 3 of 3"),
    ]

    @Test(arguments: 0..<damaged.count, [JWSUpload.text, .raw, .json])
    func damagedJWS_isMalformedJWSWithDetail(_ index: Int, _ upload: JWSUpload) {
        let damaged = Self.damaged[index]
        let response = LedgerService.routes().handle(upload.request(damaged.text), on: .main)
        #expect([400, 422].contains(response.status.code), "\(damaged.name)")
        #expect(response.errorCode == "malformed_jws", "\(damaged.name): \(response.text)")
        #expect(response.json?["error"]?["detail"] == .string(damaged.detail), "\(damaged.name)")
        let message = response.json?["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains(damaged.fragment), "\(damaged.name): \(message)")
    }

    static let pem = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ==\n-----END CERTIFICATE-----\n"

    @Test(arguments: [
        ("text/plain", pem, "pem"),
        ("text/plain", "not the receipt, sorry! see ticket #42", "text"),
        ("application/octet-stream", pem, "pem"),
        // PEM whose base64 decodes: still PEM, not a damaged receipt.
        ("application/octet-stream", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "pem"),
        ("text/plain", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "pem"),
        ("application/json", #"{"receipt": "-----BEGIN CERTIFICATE-----\nMIIB==\n-----END CERTIFICATE-----"}"#, "pem"),
    ])
    func uploadThatIsSomethingElse_saysItsReason(_ contentType: String, _ body: String, _ reason: String) {
        let response = LedgerService.routes().handle(post("/v1/validate", contentType: contentType, text: body), on: .main)
        #expect(response.status == 400)
        #expect(response.errorCode == "bad_request")
        #expect(response.json?["error"]?["reason"] == .string(reason), "\(response.text)")
        if reason == "pem" {
            #expect(response.json?["error"]?["message"]?.stringValue?.contains("not valid base64") == false)
        }
    }

    @Test func jsonUploadedAsAFile_isMalformedReceiptWithReason() {
        let body = multipartBody(
            boundary: "XyZ", parts: [("receipt", "request.json", Array(#"{"receipt-data": "…", "password": "…"}"#.utf8))])
        let response = LedgerService.routes().handle(
            post("/v1/validate", contentType: "multipart/form-data; boundary=XyZ", body: body), on: .main)
        #expect(response.status == 422)
        #expect(response.errorCode == "malformed_receipt")
        #expect(response.json?["error"]?["reason"] == .string("json"))
    }

    @Test func reasonIsOnTheHTMLPageToo() {
        let response = LedgerService.routes().handle(
            post("/v1/validate", contentType: "text/plain", text: Self.pem, headers: [("Accept", "text/html")]), on: .main)
        #expect(response.headers["Content-Type"]?.hasPrefix("text/html") == true)
        #expect(response.text.contains(ResultHTML.escape(SupportPage.reasonSentences["pem"]!)))
    }

    @Test func wellSignedPayloadOfNoKind_is422UnknownKind() throws {
        let jws = try JWSPKI.atFixedNow.sign(.object([
            ("environment", .string("Sandbox")), ("signedDate", .integer(milliseconds(SignedEvents.at(-1)))),
        ]))
        let response = LedgerService.routes().handle(JWSUpload.text.request(jws), on: .main)
        #expect(response.status == 422)
        #expect(response.errorCode == "unknown_kind")
        #expect(response.json?["checks"]?["signature"] == .string("passed"))
        let named = LedgerService.routes().handle(JWSUpload.text.request(jws, query: "?kind=renewal_info"), on: .main)
        #expect(named.status == 200)
        #expect(named.json?["kind"] == .string("renewal_info"))
    }

    /// Apple's own test transaction has no `transactionId`: verified, answered, and said not to be stored.
    @Test(arguments: [Backend.sqlite])
    func verifiedButLackingLedgerMembers_isNotStoredAndSaysSo(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        let jws = try JWSPKI.atFixedNow.sign(.object([
            ("environment", .string("Sandbox")), ("bundleId", .string(LedgerService.bundleID)),
            ("signedDate", .integer(milliseconds(SignedEvents.at(-1)))),
        ]))
        let response = routes.handle(JWSUpload.text.request(jws, query: "?kind=transaction"), on: .main)
        #expect(response.status == 200)
        #expect(response.json?["valid"] == .bool(true))
        #expect(response.json?["ledger"] == .string("not_stored"))
        #expect(response.json?["ledger_reason"]?["code"] == .string("missing_members"))
        #expect(response.json?["ledger_reason"]?["missing"] == .array([.string("transactionId")]))

        let complete = routes.handle(JWSUpload.text.request(try ValidateJWSRouteTests.forged("transaction")), on: .main)
        #expect(complete.json?["ledger"] == .string("available"))
        #expect(complete.json?["ledger_reason"] == nil)
    }

    @Test func upgradedTransaction_isNotActive_andSaysUpgraded() throws {
        var blueprint = SignedEvents.firstMonth
        blueprint.edits.set.append(("isUpgraded", .bool(true)))
        let response = LedgerService.routes().handle(JWSUpload.text.request(try JWSPKI.atFixedNow.sign(blueprint.payload)), on: .main)
        let entry = response.json?["subscriptions"]?[0]
        #expect(entry?["active"] == .bool(false))
        #expect(entry?["upgraded"] == .bool(true))
        #expect(response.json?["transaction"]?["is_upgraded"] == .bool(true))
    }

    @Test(arguments: ["Consumable", "Non-Consumable", "Non-Renewing Subscription"])
    func oneTimePurchase_isNoSubscription(_ type: String) throws {
        var blueprint = SignedEvents.firstMonth
        blueprint.type = type
        let response = LedgerService.routes().handle(JWSUpload.text.request(try JWSPKI.atFixedNow.sign(blueprint.payload)), on: .main)
        #expect(response.status == 200)
        #expect(response.json?["subscriptions"] == .array([]))
    }

    @Test func pageHeadline_namesTheFieldThatFailed() throws {
        var blueprint = AppTransactionBlueprint(
            bundleID: LedgerService.bundleID, receiptCreationDate: SignedEvents.at(-1), receiptType: "Sandbox")
        blueprint.bind(to: try #require(DeviceIdentifier(ValidateJWSRouteTests.device)))
        let jws = try JWSPKI.atFixedNow.sign(blueprint.payload)
        let response = LedgerService.routes().handle(JWSUpload.text.request(
            jws, query: "?device_id=00000000-1111-2222-3333-444444444444", headers: [("Accept", "text/html")]), on: .main)
        #expect(response.status == 422)
        #expect(response.text.contains("<h1>Device id does not match</h1>"))
        #expect(response.text.contains("Not valid: Device id does not match"))
    }
}

private func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
