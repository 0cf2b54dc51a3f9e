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

/// `receiptd store sync` against the fake App Store Server API, with notifications signed by the test PKI.
struct StoreSyncTests {
    struct Scene {
        let fake: FakeAppStoreServer
        let configPath: String
        let ledgerPath: String
    }

    static func notification(_ uuid: String, by authority: JWSTestAuthority = JWSPKI.standard) throws -> String {
        var blueprint = try JWSPKI.notification(type: "DID_RENEW", environment: "Production", by: authority)
        blueprint.notificationUUID = uuid
        return try authority.sign(blueprint.payload)
    }

    static func history(_ payloads: [String]) -> JSONValue {
        let yesterday = Int64(Date().timeIntervalSince1970 * 1000) - 86_400_000
        return .array(payloads.enumerated().map { index, payload in
            .object([("signedPayload", .string(payload)), ("date", .integer(yesterday + Int64(index)))])
        })
    }

    static func scene(history payloads: [String], backfill: Bool = false) throws -> Scene {
        let fake = try FakeAppStoreServer(fixture: [("pageSize", .integer(2)), ("notifications", history(payloads))])
        let folder = fake.directory + "/receiptd"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data(JWSPKI.standard.rootAnchor.derEncoded).write(to: URL(fileURLWithPath: folder + "/root.cer"))
        let config = """
            {"trusted_roots": ["root.cer"], "store": {"sqlite": "ledger.sqlite"},
             "apps": [{"bundle_id": "\(JWSPKI.bundleID)", "app_apple_id": \(JWSPKI.appAppleID),
                       "server_api": {"key_id": "\(FakeAppStoreServer.keyID)", "issuer_id": "\(FakeAppStoreServer.issuerID)",
                                      "private_key_file": "../key.p8"}}],
             "server_api": {"production_url": "\(fake.url)", "sandbox_url": "\(fake.url)", "ca_file": "../ca.pem",
                            "backfill": \(backfill)}}
            """
        try Data(config.utf8).write(to: URL(fileURLWithPath: folder + "/receiptd.json"))
        return Scene(fake: fake, configPath: folder + "/receiptd.json", ledgerPath: folder + "/ledger.sqlite")
    }

    static func routes(_ scene: Scene) throws -> ReceiptRoutes {
        let configuration = try ServiceConfiguration.load(contentsOfFile: scene.configPath)
        let ledger = configuration.makeLedger()
        if let failure = try ledger.openNow() { throw failure }
        return ReceiptRoutes(
            configuration: configuration, validator: configuration.makeValidator(),
            jwsVerifier: configuration.makeJWSVerifier(), ledger: ledger, metrics: ServiceMetrics())
    }

    @Test func syncAfterAnOutage_restoresExactlyTheMissingNotifications_andRefusesAForgery() throws {
        let uuids = (1...5).map { "sync-\($0)" }
        let genuine = try uuids.map { try Self.notification($0) }
        let forged = try Self.notification("forged-1", by: JWSPKI.rogue)
        let scene = try Self.scene(history: genuine + [forged])
        // Two arrived before the outage, the way Apple delivers them.
        let routes = try Self.routes(scene)
        for payload in genuine.prefix(2) {
            guard case .recorded = routes.intake.takeNotification(payload) else {
                Issue.record("a genuine notification was not recorded")
                return
            }
        }

        #expect(runReceiptd(["store", "sync", "--config", scene.configPath, "--environment", "Production"]) == ExitStatus.failure)
        let ledger = try openLedger(.sqlite(path: scene.ledgerPath))
        for uuid in uuids { #expect(try ledger.notification(uuid: uuid) != nil, "\(uuid) missing") }
        #expect(try ledger.notification(uuid: "forged-1") == nil)
        #expect(try ledger.counts().notifications == 5)
        // A refusal leaves the cursor where it was, so the span is read again once the cause is fixed.
        #expect(try ledger.syncCursor(bundleID: JWSPKI.bundleID, environment: "Production") == nil)

        try scene.fake.update([("pageSize", .integer(2)), ("notifications", Self.history(genuine))])
        #expect(runReceiptd(["store", "sync", "--config", scene.configPath, "--environment", "Production"]) == ExitStatus.success)
        #expect(try ledger.counts().notifications == 5)
        #expect(try ledger.syncCursor(bundleID: JWSPKI.bundleID, environment: "Production") != nil)
        let requests = try scene.fake.requests()
        #expect(requests.allSatisfy { $0["refusal"] == .null && $0["path"] == .string("/inApps/v1/notifications/history") })
        #expect(requests.count == 6)
    }

    @Test func serveSchedule_syncsAtStartUp_withoutAnyoneActing() throws {
        let uuids = (1...3).map { "schedule-\($0)" }
        let scene = try Self.scene(history: try uuids.map { try Self.notification($0) })
        let routes = try Self.routes(scene)
        let lines = CapturedLines()
        let schedule = try #require(ServerAPISync.start(routes.intake, log: ServiceLog(format: .text, sink: lines.sink)))
        let ledger = try openLedger(.sqlite(path: scene.ledgerPath))
        let healed = eventually(within: 30) {
            ((try? ledger.syncCursors()) ?? []).count == 2
        }
        schedule.stop()
        #expect(healed)
        for uuid in uuids { #expect(try ledger.notification(uuid: uuid) != nil, "\(uuid) missing") }
        #expect(lines.all.contains { $0.contains("server api sync") && $0.contains("3 new") })
        // The start-up log says which apps sync, one line per app and environment, and never shows the key.
        for environment in ["Production", "Sandbox"] {
            #expect(lines.all.contains { $0.hasSuffix("server api sync app=\(JWSPKI.bundleID) environment=\(environment) every=3600s") })
        }
        #expect(!lines.all.contains { $0.contains(FakeAppStoreServer.keyID) || $0.contains("key.p8") })
        // Two pages in each environment the config allows (Production and Sandbox: the fake answers both).
        let metrics = routes.metrics.exposition()
        #expect(metrics.contains(#"receiptd_server_api_requests_total{endpoint="get_notification_history",outcome="ok"} 4"#))
        #expect(metrics.contains(#"receiptd_server_api_last_sync_age_seconds{app="com.example.app",environment="Production"}"#))
    }

    @Test func serveSchedule_withoutKeys_doesNotRun() throws {
        let lines = CapturedLines()
        #expect(ServerAPISync.start(LedgerService.routes().intake, log: ServiceLog(format: .text, sink: lines.sink)) == nil)
        #expect(lines.all.count == 1 && lines.all[0].hasSuffix(#"server api sync off reason="no app has a server_api key""#))
    }

    @Test func syncLeasedByAnotherReplica_isSkipped() throws {
        let scene = try Self.scene(history: [try Self.notification("leased-1")])
        let lapses = Int64(Date().timeIntervalSince1970 * 1000) + 600_000
        _ = try Self.routes(scene).ledger.withStore { (store) throws(LedgerError) in
            try store.acquireSyncLease(
                bundleID: JWSPKI.bundleID, environment: "Production", holder: "another-replica", now: 0, until: lapses)
        }
        // Never 0 for a span it did not read: a script would take it for synced.
        #expect(runReceiptd(["store", "sync", "--config", scene.configPath, "--environment", "Production"]) == ExitStatus.skipped)
        #expect(try scene.fake.requests().isEmpty)
        #expect(try openLedger(.sqlite(path: scene.ledgerPath)).notification(uuid: "leased-1") == nil)
    }

    @Test func syncWithWait_waitsForAnotherReplicasLease_thenSyncs() throws {
        let scene = try Self.scene(history: [try Self.notification("leased-2")])
        let lapses = Int64(Date().timeIntervalSince1970 * 1000) + 1_500
        _ = try Self.routes(scene).ledger.withStore { (store) throws(LedgerError) in
            try store.acquireSyncLease(
                bundleID: JWSPKI.bundleID, environment: "Production", holder: "another-replica", now: 0, until: lapses)
        }
        let arguments = ["store", "sync", "--config", scene.configPath, "--environment", "Production", "--wait"]
        #expect(runReceiptd(arguments) == ExitStatus.success)
        #expect(try openLedger(.sqlite(path: scene.ledgerPath)).notification(uuid: "leased-2") != nil)
    }

    @Test func syncWithAppleUnreachable_exitsOne_andMovesNoCursor() throws {
        let scene = try Self.scene(history: [])
        let fault: JSONValue = .object([("status", .integer(401))])
        try scene.fake.update([("faults", .object([("/inApps/v1/notifications/history", .array([fault]))]))])
        #expect(runReceiptd(["store", "sync", "--config", scene.configPath, "--environment", "Production"]) == ExitStatus.failure)
        let ledger = try openLedger(.sqlite(path: scene.ledgerPath))
        #expect(try ledger.syncCursor(bundleID: JWSPKI.bundleID, environment: "Production") == nil)
    }

    @Test(arguments: [
        ["--since", "yesterday"], ["--environment", "Xcode"], ["--since", "2026-02-01", "--until", "2026-01-01"],
        ["--app", "com.example.unknown"], ["extra"],
    ])
    func sync_usageErrors_exitTwo(arguments: [String]) throws {
        let scene = try Self.scene(history: [])
        #expect(runReceiptd(["store", "sync", "--config", scene.configPath] + arguments) == ExitStatus.usage)
    }

    @Test(arguments: [
        ("2026-11-01", Int64(1_793_491_200_000)), ("2026-11-01T12:30:15Z", 1_793_536_215_000),
        ("1970-01-01T00:00:00.250Z", 250),
    ])
    func syncDate_readsUTCDates(text: String, milliseconds: Int64) throws {
        #expect(try syncDate(text) == milliseconds)
        #expect(syncDateText(milliseconds - milliseconds % 1000) .hasPrefix(String(text.prefix(10))))
    }
}
