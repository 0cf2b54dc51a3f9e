import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService

/// Backfill: a customer first met in one notification gets their whole history from the fake App Store Server API.
struct ServerAPIBackfillTests {
    static func transaction(_ id: String, purchasedDaysAgo: Double, expiresInDays: Double) throws -> String {
        let now = Date()
        var blueprint = JWSPKI.transaction(environment: "Production", signed: now.addingTimeInterval(-purchasedDaysAgo * 86_400))
        blueprint.transactionID = id
        blueprint.originalTransactionID = "7100"
        blueprint.webOrderLineItemID = "w\(id)"
        blueprint.purchaseDate = now.addingTimeInterval(-purchasedDaysAgo * 86_400)
        blueprint.expiresDate = now.addingTimeInterval(expiresInDays * 86_400)
        return try JWSPKI.standard.sign(blueprint.payload)
    }

    @Test func firstSeenSubscription_isBackfilled_andItsStatusIsRight() throws {
        let first = try Self.transaction("7101", purchasedDaysAgo: 40, expiresInDays: -10)
        let renewed = try Self.transaction("7102", purchasedDaysAgo: 10, expiresInDays: 20)
        var renewal = JWSPKI.renewalInfo(environment: "Production")
        renewal.originalTransactionID = "7100"
        let renewalInfo = try JWSPKI.standard.sign(renewal.payload)
        let forged = try JWSPKI.rogue.sign(JWSPKI.transaction(environment: "Production").payload)
        let last: JSONValue = .object([
            ("status", .integer(1)), ("originalTransactionId", .string("7100")),
            ("signedTransactionInfo", .string(renewed)), ("signedRenewalInfo", .string(renewalInfo)),
        ])
        let scene = try StoreSyncTests.scene(history: [], backfill: true)
        try scene.fake.update([
            ("transactions", .object([("7100", .array([.string(first), .string(renewed), .string(forged)]))])),
            ("subscriptions", .object([("7100", .array([.object([("subscriptionGroupIdentifier", .string("21000")), ("lastTransactions", .array([last]))])]))])),
        ])
        var notification = try JWSPKI.notification(type: "SUBSCRIBED", environment: "Production")
        notification.notificationUUID = "backfill-1"
        notification.signedTransactionInfo = first
        notification.signedRenewalInfo = nil
        let routes = try StoreSyncTests.routes(scene)
        guard case .recorded = routes.intake.takeNotification(try JWSPKI.standard.sign(notification.payload)) else {
            Issue.record("the notification was not recorded")
            return
        }
        let ledger = try openLedger(.sqlite(path: scene.ledgerPath))
        #expect(eventually(within: 30) { (try? ledger.renewalInfos(originalTransactionIDs: ["7100"]))?.isEmpty == false })
        #expect(try ledger.transaction(id: "7102")?.sources[.serverAPI] != nil)
        #expect(try ledger.transaction(id: "2000000000000001") == nil)
        let answer = routes.handle(get("/v1/subscriptions/7100"), on: .main)
        #expect(answer.json?["status"] == .string("active"))
        #expect(answer.json?["latest_transaction"]?["transaction_id"] == .string("7102"))
    }

    @Test func appleHanging_changesNoValidationAnswer_andNotReadiness() throws {
        let transaction = try Self.transaction("7201", purchasedDaysAgo: 1, expiresInDays: 29)
        let hang: JSONValue = .object([("hang", .integer(8))])
        let scene = try StoreSyncTests.scene(history: [], backfill: true)
        try scene.fake.update([
            ("faults", .object([("/inApps/v2/history/7100", .array([hang, hang, hang, hang]))]))
        ])
        let routes = try StoreSyncTests.routes(scene)
        let body = #"{"jws":"\#(transaction)"}"#
        let withBackfill = routes.handle(post("/v1/validate", contentType: "application/json", text: body), on: .main)
        var quiet = try ServiceConfiguration.load(contentsOfFile: scene.configPath)
        quiet.serverAPI.backfill = false
        let quietLedger = quiet.makeLedger()
        if let failure = try quietLedger.openNow() { throw failure }
        let withoutBackfill = ReceiptRoutes(
            configuration: quiet, validator: quiet.makeValidator(), jwsVerifier: quiet.makeJWSVerifier(),
            ledger: quietLedger, metrics: ServiceMetrics()
        ).handle(post("/v1/validate", contentType: "application/json", text: body), on: .main)
        #expect(withBackfill.status.code == 200)
        #expect(withBackfill.json?["valid"] == .bool(true))
        #expect(withoutBackfill.json?["valid"] == .bool(true))
        #expect(withBackfill.json?["subscriptions"] == withoutBackfill.json?["subscriptions"])
        #expect(routes.handle(get("/readyz"), on: .main).status.code == 200)
    }
}
