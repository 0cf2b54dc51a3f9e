import AppStoreServerAPI
import Foundation
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService
@testable import receiptd

/// Apple's refund history into the ledger (`store sync --refunds`, the backfill), and `lookup app-transaction`,
/// against the fake App Store Server API with payloads signed by the test PKI.
struct RefundHistoryTests {
    static let day: TimeInterval = 86_400

    /// A one-time purchase of the customer `id`, signed when bought (at most 30 days ago, inside the test chain's
    /// validity), or later with its refund.
    static func purchase(_ id: String, daysAgo: Double, refundedDaysAgo: Double? = nil, by authority: JWSTestAuthority = JWSPKI.standard)
        throws -> String
    {
        let now = Date()
        var blueprint = JWSPKI.transaction(
            environment: "Production", signed: now.addingTimeInterval(-(refundedDaysAgo ?? min(daysAgo, 30)) * day))
        blueprint.transactionID = id
        blueprint.originalTransactionID = id
        blueprint.type = "Non-Consumable"
        blueprint.productID = "pro.lifetime"
        blueprint.purchaseDate = now.addingTimeInterval(-daysAgo * day)
        blueprint.expiresDate = nil
        if let refundedDaysAgo {
            blueprint.revocationDate = now.addingTimeInterval(-refundedDaysAgo * day)
            blueprint.revocationReason = 0
        }
        return try authority.sign(blueprint.payload)
    }

    /// The store-sync scene with a webhook that wants every event (never delivered: nothing runs a dispatcher), so
    /// the outbox keeps what the ledger emits.
    static func scene(_ fixture: [(key: String, value: JSONValue)]) throws -> StoreSyncTests.Scene {
        let fake = try FakeAppStoreServer(fixture: fixture)
        let folder = fake.directory + "/receiptd"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data(JWSPKI.standard.rootAnchor.derEncoded).write(to: URL(fileURLWithPath: folder + "/root.cer"))
        try Data("c2VjcmV0LW9mLWEtdGVzdC13ZWJob29rLXRoYXQtbmV2ZXItcnVucw".utf8)
            .write(to: URL(fileURLWithPath: folder + "/backend.secret"))
        let config = """
            {"trusted_roots": ["root.cer"], "store": {"sqlite": "ledger.sqlite"},
             "apps": [{"bundle_id": "\(JWSPKI.bundleID)", "app_apple_id": \(JWSPKI.appAppleID),
                       "versions": ["1.0", "1.1"],
                       "server_api": {"key_id": "\(FakeAppStoreServer.keyID)", "issuer_id": "\(FakeAppStoreServer.issuerID)",
                                      "private_key_file": "../key.p8"}}],
             "server_api": {"production_url": "\(fake.url)", "sandbox_url": "\(fake.url)", "ca_file": "../ca.pem",
                            "backfill": false},
             "webhooks": [{"name": "backend", "url": "https://hooks.example.com/events", "secret_file": "backend.secret",
                           "events": ["*"]}]}
            """
        try Data(config.utf8).write(to: URL(fileURLWithPath: folder + "/receiptd.json"))
        return StoreSyncTests.Scene(fake: fake, configPath: folder + "/receiptd.json", ledgerPath: folder + "/ledger.sqlite")
    }

    /// Customers the ledger knows, recorded as a lookup records them.
    static func know(_ signed: [String], in scene: StoreSyncTests.Scene) throws {
        let routes = try StoreSyncTests.routes(scene)
        #expect(routes.intake.takeLookedUp(signed).count == signed.count)
    }

    static func sync(_ scene: StoreSyncTests.Scene, _ extra: [String] = []) -> Int32 {
        runReceiptd(["store", "sync", "--config", scene.configPath, "--environment", "Production", "--refunds"] + extra)
    }

    static func refundRequests(_ scene: StoreSyncTests.Scene) throws -> [JSONValue] {
        try scene.fake.requests().filter {
            if case .string(let path)? = $0["path"] { return path.hasPrefix("/inApps/v2/refund/lookup/") }
            return false
        }
    }

    @Test func refundWhoseNotificationWasLost_reachesTheLedger_andEmitsREFUND_once() throws {
        let refunded = try Self.purchase("7001", daysAgo: 5, refundedDaysAgo: 1)
        let scene = try Self.scene([
            ("pageSize", .integer(1)),
            ("refunds", .object([("7001", .array([.string(refunded), .string(try Self.purchase("7001", daysAgo: 5, refundedDaysAgo: 1))]))])),
        ])
        try Self.know([try Self.purchase("7001", daysAgo: 5), try Self.purchase("7002", daysAgo: 3)], in: scene)

        #expect(Self.sync(scene) == ExitStatus.success)
        let ledger = try openLedger(.sqlite(path: scene.ledgerPath))
        let record = try #require(try ledger.transaction(id: "7001"))
        #expect(record.facts.revocationDate != nil)
        #expect(record.sources[.serverAPI] != nil)
        #expect(try ledger.transaction(id: "7002")?.facts.revocationDate == nil)
        let refunds = try ledger.events(OutboxQuery(limit: 100)).filter { $0.type == "REFUND" }
        #expect(refunds.map(\.originalTransactionID) == ["7001"])
        // Every page of each customer the ledger knows, by revision.
        let requests = try Self.refundRequests(scene)
        #expect(requests.filter { $0["path"] == .string("/inApps/v2/refund/lookup/7001") }.count == 2)
        #expect(requests.contains { $0["query"]?["revision"] == .array([.string("rev-1")]) })
        #expect(requests.contains { $0["path"] == .string("/inApps/v2/refund/lookup/7002") })

        // Read again: nothing new, and no second REFUND.
        #expect(Self.sync(scene) == ExitStatus.success)
        #expect(try ledger.events(OutboxQuery(limit: 100)).filter { $0.type == "REFUND" }.count == 1)
    }

    @Test func forgedRefund_isRefusedAndNotStored_andTheSyncFails() throws {
        let forged = try Self.purchase("7101", daysAgo: 5, refundedDaysAgo: 1, by: JWSPKI.rogue)
        let scene = try Self.scene([("refunds", .object([("7101", .array([.string(forged)]))]))])
        try Self.know([try Self.purchase("7101", daysAgo: 5)], in: scene)
        #expect(Self.sync(scene) == ExitStatus.failure)
        let ledger = try openLedger(.sqlite(path: scene.ledgerPath))
        #expect(try ledger.transaction(id: "7101")?.facts.revocationDate == nil)
        #expect(try ledger.events(OutboxQuery(limit: 100)).allSatisfy { $0.type != "REFUND" })
    }

    @Test func customersBeyondTheBounds_areNotAsked() throws {
        let scene = try Self.scene([])
        try Self.know(
            [try Self.purchase("7201", daysAgo: 400), try Self.purchase("7202", daysAgo: 2), try Self.purchase("7203", daysAgo: 1)],
            in: scene)
        // The default span is the last 180 days; the limit keeps the most recent purchases.
        #expect(Self.sync(scene, ["--refunds-limit", "1"]) == ExitStatus.success)
        #expect(try Self.refundRequests(scene).map(\.["path"]) == [.string("/inApps/v2/refund/lookup/7203")])
        let since = ReceiptDate(Date().addingTimeInterval(-500 * Self.day)).rfc3339
        #expect(Self.sync(scene, ["--refunds-since", since]) == ExitStatus.success)
        #expect(try Self.refundRequests(scene).count == 1 + 3)
    }

    @Test func refundFlags_withoutRefunds_areAUsageError() throws {
        #expect(runReceiptd(["store", "sync", "--refunds-limit", "5", "--config", "/dev/null/none.json"]) == ExitStatus.usage)
        #expect(runReceiptd(["store", "sync", "--refunds", "--refunds-limit", "0", "--config", "/dev/null/none.json"]) == ExitStatus.usage)
    }

    @Test func appleDown_stopsAtTheFirstCustomer_andFails() throws {
        let scene = try Self.scene([("always", .object([("status", .integer(500)), ("pathPrefix", .string("/inApps/v2/refund/"))]))])
        try Self.know([try Self.purchase("7301", daysAgo: 2), try Self.purchase("7302", daysAgo: 1)], in: scene)
        #expect(Self.sync(scene) == ExitStatus.failure)
        let asked = Set(try Self.refundRequests(scene).compactMap(\.["path"]))
        #expect(asked.count == 1)
    }

    @Test func backfill_readsTheNewCustomersRefundHistory() throws {
        let refunded = try Self.purchase("7401", daysAgo: 5, refundedDaysAgo: 1)
        let scene = try Self.scene([
            ("transactions", .object([("7401", .array([.string(try Self.purchase("7401", daysAgo: 5))]))])),
            ("subscriptions", .object([("7401", .array([]))])),
            ("refunds", .object([("7401", .array([.string(refunded)]))])),
        ])
        var configuration = try ServiceConfiguration.load(contentsOfFile: scene.configPath)
        configuration.serverAPI.backfill = true
        let ledger = configuration.makeLedger()
        if let failure = try ledger.openNow() { throw failure }
        let routes = ReceiptRoutes(
            configuration: configuration, validator: configuration.makeValidator(),
            jwsVerifier: configuration.makeJWSVerifier(), ledger: ledger, metrics: ServiceMetrics())
        routes.intake.backfill(routes.intake.verifiedTransactionFacts([try Self.purchase("7401", daysAgo: 5)]))
        let store = try openLedger(.sqlite(path: scene.ledgerPath))
        #expect(eventually(within: 30) { (try? store.transaction(id: "7401"))?.facts.revocationDate != nil })
        #expect(try Self.refundRequests(scene).count == 1)
    }

    // MARK: lookup app-transaction

    @Test func appTransaction_isVerifiedAndPrinted_aForgeryIsRefused_anUnknownIdIsNotFound() throws {
        let genuine = try JWSPKI.standard.sign(JWSPKI.appTransaction().payload)
        let forged = try JWSPKI.rogue.sign(JWSPKI.appTransaction().payload)
        let scene = try Self.scene([("appTransactions", .object([("8001", .string(genuine)), ("8002", .string(forged))]))])
        let routes = try StoreSyncTests.routes(scene)
        guard case .found(let bundleID, let environment, let appTransaction) = routes.lookUpAppTransaction("8001") else {
            Issue.record("the genuine app transaction was not found")
            return
        }
        #expect(bundleID == JWSPKI.bundleID && environment == .production)
        #expect(appTransaction["bundle_id"] == .string(JWSPKI.bundleID))
        #expect(appTransaction["app_apple_id"] == .integer(JWSPKI.appAppleID))
        guard case .refused(let error) = routes.lookUpAppTransaction("8002") else {
            Issue.record("a forged app transaction was not refused")
            return
        }
        #expect(error.code == .certificateUntrusted)
        guard case .unanswered(.notFound) = routes.lookUpAppTransaction("8003") else {
            Issue.record("an unknown id was not reported as not found")
            return
        }
        let paths = try scene.fake.requests().map(\.["path"])
        #expect(paths.first == .string("/inApps/v1/transactions/appTransactions/8001"))

        #expect(runReceiptd(["lookup", "app-transaction", "8001", "--config", scene.configPath]) == ExitStatus.success)
        #expect(runReceiptd(["lookup", "app-transaction", "8002", "--config", scene.configPath]) == ExitStatus.failure)
        #expect(runReceiptd(["lookup", "app-transaction", "8003", "--config", scene.configPath]) == ExitStatus.failure)
    }
}
