import AppStoreServerAPI
import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService
@testable import receiptd

/// Renewal extensions against the fake App Store Server API: Apple's answer is recorded as a fact and an event (the
/// same event as Apple's later notification), each of Apple's refusals is `extension_refused` with its code, a wrong
/// body names its member, and `subscriptions extend-all` follows a mass extension to completion.
@Suite(.serialized)
struct RenewalExtensionTests {
    typealias E = SignedEvents

    /// 2099-01-08T00:00:00Z: the new expiry the fake answers for `E.original`.
    static let effectiveDate: Int64 = 4_071_513_600_000

    struct Scene {
        let fake: FakeAppStoreServer
        let configPath: String
        let ledgerPath: String
        let routes: ReceiptRoutes
    }

    static func scene(always: JSONValue? = nil) throws -> Scene {
        var fixture: [(key: String, value: JSONValue)] = [
            (
                "extensions",
                .object([
                    (E.original, .object([("effectiveDate", .integer(effectiveDate))])),
                    ("8001", .object([("errorCode", .integer(4_030_004))])),
                    ("8002", .object([("errorCode", .integer(4_030_007))])),
                ])
            ),
            ("massStatusPolls", .integer(2)),
        ]
        if let always { fixture.append(("always", always)) }
        let fake = try FakeAppStoreServer(fixture: fixture)
        let folder = fake.directory + "/receiptd"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data(JWSPKI.atFixedNow.rootAnchor.derEncoded).write(to: URL(fileURLWithPath: folder + "/root.cer"))
        try Data("a-webhook-secret-of-enough-length-0123456789\n".utf8).write(to: URL(fileURLWithPath: folder + "/secret"))
        let config = """
            {"trusted_roots": ["root.cer"], "store": {"sqlite": "ledger.sqlite"},
             "apps": [{"bundle_id": "\(LedgerService.bundleID)", "app_apple_id": \(LedgerService.appAppleID),
                       "server_api": {"key_id": "\(FakeAppStoreServer.keyID)", "issuer_id": "\(FakeAppStoreServer.issuerID)",
                                      "private_key_file": "../key.p8"}}],
             "server_api": {"production_url": "\(fake.url)", "sandbox_url": "\(fake.url)", "ca_file": "../ca.pem",
                            "backfill": false, "request_deadline": 3},
             "webhooks": [{"name": "backend", "url": "http://127.0.0.1:9/hook", "secret_file": "secret",
                           "allow_http": true}]}
            """
        try Data(config.utf8).write(to: URL(fileURLWithPath: folder + "/receiptd.json"))
        let configuration = try ServiceConfiguration.load(contentsOfFile: folder + "/receiptd.json")
        let ledger = configuration.makeLedger()
        if let failure = try ledger.openNow() { throw failure }
        let routes = ReceiptRoutes(
            configuration: configuration, validator: configuration.makeValidator(),
            jwsVerifier: configuration.makeJWSVerifier(), ledger: ledger, metrics: ServiceMetrics(),
            clock: { fixedNow })
        return Scene(
            fake: fake, configPath: folder + "/receiptd.json", ledgerPath: folder + "/ledger.sqlite", routes: routes)
    }

    /// A subscription bought ten days before `fixedNow`, for a month, as Apple notifies it.
    static func subscribe(_ routes: ReceiptRoutes, original: String = E.original) throws {
        let transaction = E.transaction(original, purchased: -10, expires: 20, signed: -10, original: original)
        let notification = try E.notification(
            "SUBSCRIBED", "INITIAL_BUY", signed: -10, uuid: "subscribed-\(original)", transaction: transaction,
            renewal: E.renewal(signed: -10, original: original))
        #expect(routes.deliver(notification).status == 200)
    }

    static func extend(
        _ routes: ReceiptRoutes, _ original: String = E.original, body: String = #"{"days": 7, "reason": "service_issue_or_outage"}"#,
        headers: [(HTTPHeaderName, String)] = []
    ) -> HTTPResponse {
        routes.handle(
            post("/v1/subscriptions/\(original)/extend", contentType: "application/json", text: body, headers: headers),
            on: .main)
    }

    static func events(_ scene: Scene, type: String) throws -> [OutboxEvent] {
        try openLedger(.sqlite(path: scene.ledgerPath)).events(OutboxQuery(limit: 1000)).filter { $0.type == type }
    }

    @Test func extension_isAnsweredRecordedAndOneEvent_evenOnceApplesNotificationArrives() throws {
        let scene = try Self.scene()
        try Self.subscribe(scene.routes)

        let response = Self.extend(scene.routes, headers: [("X-Receiptd-Source", "support-page")])
        #expect(response.status == 200, "\(response.text)")
        let json = try #require(response.json)
        #expect(json.keys == [
            "original_transaction_id", "request_identifier", "effective_date", "web_order_line_item_id", "days", "reason",
        ])
        #expect(json["effective_date"] == .string("2099-01-08T00:00:00Z"))
        #expect(json["days"] == .integer(7))
        #expect(json["reason"] == .string("service_issue_or_outage"))
        let requestIdentifier = try #require(json["request_identifier"]?.stringValue)
        #expect(UUID(uuidString: requestIdentifier) != nil)

        // What Apple was sent: Apple's library's body, the identifier answered.
        let sent = try #require(try scene.fake.requests().last { $0["method"] == .string("PUT") })
        let body = try JSONValue(parsing: Array((sent["body"]?.stringValue ?? "").utf8))
        #expect(body.keys == ["extendByDays", "extendReasonCode", "requestIdentifier"])
        #expect(body["extendByDays"] == .integer(7) && body["extendReasonCode"] == .integer(3))
        #expect(body["requestIdentifier"] == .string(requestIdentifier))

        let ledger = try openLedger(.sqlite(path: scene.ledgerPath))
        let record = try #require(try ledger.renewalExtension(requestIdentifier: requestIdentifier))
        #expect(record.outcome == .extended)
        #expect(record.effectiveDate == Self.effectiveDate)
        #expect(record.originalTransactionID == E.original)
        #expect(record.requestedBy == "support-page")
        #expect(record.appleStatus == 200)
        #expect(try Self.events(scene, type: "RENEWAL_EXTENDED").count == 1)

        // The subscription lists it, and its expiry waits for Apple's signature.
        let subscription = try #require(scene.routes.handle(get("/v1/subscriptions/\(E.original)"), on: .main).json)
        #expect(subscription["expires_date"] == .string(ReceiptDate(E.at(20)).rfc3339))
        #expect(subscription["status"] == .string("active"))
        let extensions = try #require(subscription["extensions"])
        #expect(extensions[0]?["request_identifier"] == .string(requestIdentifier))
        #expect(extensions[0]?["outcome"] == .string("extended"))
        #expect(extensions[0]?["effective_date"] == .string("2099-01-08T00:00:00Z"))

        // Apple's notification of the same extension: the signed expiry moves, and it is still one event.
        var signed = E.transaction(E.original, purchased: -10, expires: 20, signed: -1)
        signed.expiresDate = Date(timeIntervalSince1970: Double(Self.effectiveDate) / 1000)
        let notification = try E.notification(
            "RENEWAL_EXTENDED", signed: -1, uuid: "renewal-extended-1", transaction: signed)
        #expect(scene.routes.deliver(notification).status == 200)
        let after = try #require(scene.routes.handle(get("/v1/subscriptions/\(E.original)"), on: .main).json)
        #expect(after["expires_date"] == .string("2099-01-08T00:00:00Z"))
        #expect(try Self.events(scene, type: "RENEWAL_EXTENDED").count == 1)
    }

    @Test(arguments: [
        ("8001", Int64(4_030_004), "only an active subscription"),
        ("8002", Int64(4_030_007), "family organizer"),
    ])
    func applesRefusal_isExtensionRefused_withItsCodeAndLimit(original: String, code: Int64, limit: String) throws {
        let scene = try Self.scene()
        try Self.subscribe(scene.routes, original: original)
        let response = Self.extend(scene.routes, original)
        #expect(response.status == 422)
        #expect(response.errorCode == "extension_refused")
        #expect(response.json?["error"]?["apple_error_code"] == .integer(code))
        #expect(response.json?["error"]?["message"]?.stringValue?.contains(limit) == true)
        let records = try openLedger(.sqlite(path: scene.ledgerPath)).renewalExtensions(originalTransactionID: original)
        #expect(records.map(\.outcome) == [.refused])
        #expect(records.first?.appleErrorCode == code)
        #expect(try Self.events(scene, type: "RENEWAL_EXTENDED").isEmpty)
    }

    @Test func thirdExtension_isRefusedWith4030005_explainingTwoAYear() throws {
        let scene = try Self.scene()
        try Self.subscribe(scene.routes)
        #expect(Self.extend(scene.routes).status == 200)
        #expect(Self.extend(scene.routes).status == 200)
        let third = Self.extend(scene.routes)
        #expect(third.status == 422)
        #expect(third.errorCode == "extension_refused")
        #expect(third.json?["error"]?["apple_error_code"] == .integer(4_030_005))
        #expect(third.json?["error"]?["message"]?.stringValue?.contains("at most twice in 365 days") == true)
        // The clock is fixed, so the three share `requested_at`: compared as a set of outcomes.
        let records = try openLedger(.sqlite(path: scene.ledgerPath)).renewalExtensions(originalTransactionID: E.original)
        #expect(records.map(\.outcome.rawValue).sorted() == ["extended", "extended", "refused"])
        #expect(Set(records.map(\.requestIdentifier)).count == 3)
    }

    @Test(arguments: [
        (#"{"days": 0, "reason": "other"}"#, "days"), (#"{"days": 91, "reason": "other"}"#, "days"),
        (#"{"days": "7", "reason": "other"}"#, "days"), (#"{"reason": "other"}"#, "days"),
        (#"{"days": 7, "reason": "outage"}"#, "reason"), (#"{"days": 7, "reason": 3}"#, "reason"),
        (#"{"days": 7}"#, "reason"), ("[]", "days"),
    ])
    func wrongBody_isInvalidField_andAppleIsNotAsked(body: String, field: String) throws {
        let scene = try Self.scene()
        try Self.subscribe(scene.routes)
        let response = Self.extend(scene.routes, body: body)
        #expect(response.status == 400)
        #expect(response.errorDetail == "invalid_field")
        #expect(response.json?["error"]?["field"] == .string(field))
        #expect(try scene.fake.requests().isEmpty)
    }

    /// A backend may extend a subscription before any of its purchases reached receiptd: Apple is asked.
    @Test func unknownSubscription_isAskedOfApple_andRecorded() throws {
        let scene = try Self.scene()
        let response = Self.extend(scene.routes, "9999")
        #expect(response.status == 200)
        #expect(try scene.fake.requests().map { $0["path"] } == [.string("/inApps/v1/subscriptions/extend/9999")])
        let records = try openLedger(.sqlite(path: scene.ledgerPath)).renewalExtensions(originalTransactionID: "9999")
        #expect(records.map(\.outcome) == [.extended])
    }

    @Test func appleRateLimitingPastTheDeadline_isServerAPIBusy_andRecordedAsFailed() throws {
        let scene = try Self.scene(always: .object([("status", .integer(429)), ("retryAfter", .string("60"))]))
        try Self.subscribe(scene.routes)
        let response = Self.extend(scene.routes)
        #expect(response.status == 503)
        #expect(response.errorCode == "server_api_busy")
        let records = try openLedger(.sqlite(path: scene.ledgerPath)).renewalExtensions(originalTransactionID: E.original)
        #expect(records.map(\.outcome) == [.failed])
    }

    @Test func extendAll_printsTheRequestAndFollowsItToCompletion_recordingTheCounts() throws {
        let scene = try Self.scene()
        #expect(
            runReceiptd([
                "subscriptions", "extend-all", "--product", "pro.monthly", "--days", "5", "--reason", "other",
                "--storefront", "USA", "--storefront", "CAN", "--environment", "Sandbox", "--poll-interval", "0.1",
                "--config", scene.configPath,
            ]) == ExitStatus.success)
        let requests = try scene.fake.requests()
        let mass = try #require(requests.first { $0["method"] == .string("POST") })
        let body = try JSONValue(parsing: Array((mass["body"]?.stringValue ?? "").utf8))
        #expect(body["productId"] == .string("pro.monthly"))
        #expect(body["storefrontCountryCodes"] == .array([.string("USA"), .string("CAN")]))
        #expect(body["extendByDays"] == .integer(5) && body["extendReasonCode"] == .integer(2))
        let requestIdentifier = try #require(body["requestIdentifier"]?.stringValue)
        #expect(requests.filter { $0["method"] == .string("GET") }.count == 2)

        let record = try #require(
            try openLedger(.sqlite(path: scene.ledgerPath)).renewalExtension(requestIdentifier: requestIdentifier))
        #expect(record.outcome == .extended)
        #expect(record.productID == "pro.monthly")
        #expect(record.storefronts == ["USA", "CAN"])
        #expect(record.succeededCount == 30 && record.failedCount == 2)
        #expect(record.requestedBy == "cli")
        #expect(record.completedAt != nil)
    }

    @Test func lookupPage_offersExtendForASubscription_postingToTheRoute() throws {
        let scene = try Self.scene()
        try Self.subscribe(scene.routes)
        let page = scene.routes.handle(get("/lookup?id=\(E.original)"), on: .main).text
        #expect(page.contains(#"<form class="extend-form" data-original-transaction-id="\#(E.original)">"#))
        #expect(page.contains(#"<option value="service_issue_or_outage">"#))
        #expect(page.contains("/v1/subscriptions/${encodeURIComponent(id)}/extend"))
        #expect(page.contains("confirm("))
    }

    @Test func extendAll_withoutAProduct_isAUsageError() {
        #expect(runReceiptd(["subscriptions", "extend-all", "--days", "5", "--reason", "other"]) == ExitStatus.usage)
        #expect(
            runReceiptd(["subscriptions", "extend", "7000", "--days", "91", "--reason", "other"]) == ExitStatus.usage)
    }
}

/// The test double that counts a request's store calls forwards the extensions' calls too.
extension ObservedStore {
    func record(renewalExtension record: RenewalExtensionRecord) throws(LedgerError) {
        try base.record(renewalExtension: record)
    }

    func renewalExtensions(originalTransactionID: String) throws(LedgerError) -> [RenewalExtensionRecord] {
        try base.renewalExtensions(originalTransactionID: originalTransactionID)
    }

    func renewalExtension(requestIdentifier: String) throws(LedgerError) -> RenewalExtensionRecord? {
        try base.renewalExtension(requestIdentifier: requestIdentifier)
    }
}
