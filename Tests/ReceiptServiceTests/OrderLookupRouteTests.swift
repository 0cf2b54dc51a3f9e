import AppStoreServerAPI
import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService
@testable import receiptd

/// `GET /v1/orders/{order_id}` and `receiptd lookup` against the fake App Store Server API.
struct OrderLookupRouteTests {
    static func transaction(_ id: String, by authority: JWSTestAuthority = JWSPKI.standard) throws -> String {
        var blueprint = JWSPKI.transaction(environment: "Production")
        blueprint.transactionID = id
        blueprint.originalTransactionID = id
        return try authority.sign(blueprint.payload)
    }

    static func scene(orders: JSONValue) throws -> StoreSyncTests.Scene {
        let scene = try StoreSyncTests.scene(history: [])
        try scene.fake.update([("orders", orders)])
        return scene
    }

    @Test func order_isLookedUp_verified_andEntersTheLedger_whileAForgeryIsDropped() throws {
        let orders: JSONValue = .object([
            ("MQR7Z2JTKS", .array([.string(try Self.transaction("8001")), .string(try Self.transaction("8002", by: JWSPKI.rogue))]))
        ])
        let scene = try Self.scene(orders: orders)
        let routes = try StoreSyncTests.routes(scene)
        let response = routes.handle(get("/v1/orders/MQR7Z2JTKS"), on: .main)
        #expect(response.status.code == 200)
        #expect(response.json?["order_id"] == .string("MQR7Z2JTKS"))
        guard case .array(let transactions)? = response.json?["transactions"] else {
            Issue.record("no transactions")
            return
        }
        #expect(transactions.map { $0["transaction_id"] } == [.string("8001")])
        let ledger = try openLedger(.sqlite(path: scene.ledgerPath))
        #expect(try ledger.transaction(id: "8001")?.sources[.serverAPI] != nil)
        #expect(try ledger.transaction(id: "8002") == nil)
    }

    @Test func unknownOrder_is404OrderNotFound() throws {
        let scene = try Self.scene(orders: .object([]))
        let response = try StoreSyncTests.routes(scene).handle(get("/v1/orders/NOSUCHORDER"), on: .main)
        #expect(response.status.code == 404)
        #expect(response.errorCode == "order_not_found")
    }

    @Test func appleDown_is503ServerAPIUnavailable() throws {
        let scene = try Self.scene(orders: .object([]))
        let fault: JSONValue = .object([("status", .integer(401))])
        try scene.fake.update([("faults", .object([("/inApps/v1/lookup/A1", .array([fault, fault]))]))])
        let routes = try StoreSyncTests.routes(scene)
        let response = routes.handle(get("/v1/orders/A1"), on: .main)
        #expect(response.status.code == 503)
        #expect(response.errorCode == "server_api_unavailable")
        #expect(routes.metrics.exposition().contains(#"receiptd_server_api_requests_total{endpoint="look_up_order_id",outcome="unauthorized"} 2"#))
    }

    @Test func withoutKeys_is503ServerAPINotConfigured() throws {
        let response = LedgerService.routes().handle(get("/v1/orders/A1"), on: .main)
        #expect(response.status.code == 503)
        #expect(response.errorCode == "server_api_not_configured")
    }

    @Test func lookupCommands_exitZeroWhenFound_andOneWhenNot() throws {
        let orders: JSONValue = .object([("MQR7Z2JTKS", .array([.string(try Self.transaction("8101"))]))])
        let scene = try Self.scene(orders: orders)
        try scene.fake.update([("orders", orders), ("transactions", .object([("8101", .array([.string(try Self.transaction("8101"))]))]))])
        #expect(runReceiptd(["lookup", "order", "MQR7Z2JTKS", "--config", scene.configPath]) == ExitStatus.success)
        #expect(runReceiptd(["lookup", "transaction", "8101", "--config", scene.configPath]) == ExitStatus.success)
        #expect(runReceiptd(["lookup", "order", "NOSUCHORDER", "--config", scene.configPath]) == ExitStatus.failure)
        #expect(runReceiptd(["lookup", "transaction", "9999", "--config", scene.configPath]) == ExitStatus.failure)
        #expect(runReceiptd(["lookup", "refund", "1", "--config", scene.configPath]) == ExitStatus.usage)
    }

    @Test func whenTheAppleLaneIsFull_orderIs503ServerAPIBusy_withoutAskingApple() throws {
        let scene = try Self.scene(orders: .object([("A1", .array([]))]))
        let routes = try StoreSyncTests.routes(scene)
        let response = routes.handle(get("/v1/orders/A1"), on: .main, apple: .busy)
        #expect(response.status.code == 503)
        #expect(response.errorCode == "server_api_busy")
        #expect(response.headers["Retry-After"] == "1")
        #expect(try scene.fake.requests().isEmpty)
    }

    @Test func rateLimitLongerThanTheDeadline_is503ServerAPIBusy_withApplesRetryAfter() throws {
        let scene = try Self.scene(orders: .object([]))
        try scene.fake.update([("always", .object([("status", .integer(429)), ("retryAfter", .string("7"))]))])
        let response = try StoreSyncTests.routes(scene).handle(get("/v1/orders/A1"), on: .main)
        #expect(response.status.code == 503)
        #expect(response.errorCode == "server_api_busy")
        #expect(response.headers["Retry-After"] == "7")
        #expect(response.json?["error"]?["apple_error_code"] == .integer(4_290_000))
    }

    @Test func anErrorFromApple_carriesApplesErrorCode() throws {
        let scene = try Self.scene(orders: .object([]))
        try scene.fake.update([("always", .object([("status", .integer(400)), ("errorCode", .integer(4_000_006))]))])
        let response = try StoreSyncTests.routes(scene).handle(get("/v1/orders/A1"), on: .main)
        #expect(response.status.code == 503)
        #expect(response.errorCode == "server_api_unavailable")
        #expect(response.json?["error"]?["apple_error_code"] == .integer(4_000_006))
    }

    @Test func routeTable_sendsExactlyTheRoutesThatAskAppleToItsLane() throws {
        let waiting = ReceiptRoutes.Route.allCases.filter(\.waitsOnApple)
        #expect(Set(waiting) == [.order, .lookup, .renewalExtension])
        let routes = LedgerService.routes()
        #expect(!routes.mayAnswerInline(get("/v1/orders/A1")))
        let lane = routes.appleLane(on: .main)
        #expect(lane.accepts(get("/v1/orders/A1")) && lane.accepts(get("/lookup?id=A1")))
        #expect(!lane.accepts(get("/v1/transactions/1")) && !lane.accepts(get("/healthz")))
    }

    @Test func routesThatWaitOnTheLedger_runInTheLedgersLane_onlyWhenThereIsALedger() throws {
        let notification = post("/v1/notifications", contentType: "application/json", text: "{}")
        let stored = try LedgerService.routes(.sqlite).ledgerLane(on: .main)
        #expect(stored.accepts(notification) && stored.accepts(get("/v1/transactions/1")))
        #expect(!stored.accepts(get("/v1/orders/A1")) && !stored.accepts(get("/healthz")))
        let stateless = LedgerService.routes().ledgerLane(on: .main)
        #expect(!stateless.accepts(notification) && !stateless.accepts(get("/v1/transactions/1")))
    }

    @Test func missingOrForeignKeyFile_stopsServeAtStart_namingTheFile() throws {
        let scene = try Self.scene(orders: .object([]))
        #expect(throws: Never.self) { try ServiceConfiguration.load(contentsOfFile: scene.configPath).checkServerAPIKeys() }
        let keyFile = scene.fake.directory + "/key.p8"
        for content in [nil, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"] {
            try? FileManager.default.removeItem(atPath: keyFile)
            if let content { try Data(content.utf8).write(to: URL(fileURLWithPath: keyFile)) }
            let configuration = try ServiceConfiguration.load(contentsOfFile: scene.configPath)
            do {
                try configuration.checkServerAPIKeys()
                Issue.record("a bad key passed the start-up check")
            } catch {
                #expect(error.code == .invalidServerAPIKey)
                #expect(error.message.contains("key.p8"))
            }
        }
    }
}