import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService

/// A store the service cannot reach, made so on purpose, and brought back.
enum Outage: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// A SQLite file in a folder that does not exist (root may write anywhere, so no permission bit would do).
    case sqliteUnwritable = "sqlite-unwritable"
    /// A PostgreSQL cluster of the test's own, stopped after the ledger opened.
    case postgresStopped = "postgres-stopped"

    var testDescription: String { rawValue }

    static var tested: [Outage] { Backend.skipPostgres ? [.sqliteUnwritable] : allCases }

    /// A ledger that cannot be reached now, and what brings it back.
    func begin() throws -> (ledger: PurchaseLedger, restore: () throws -> Void, end: () -> Void) {
        switch self {
        case .sqliteUnwritable:
            let path = Scratch.newPath("absent/ledger.sqlite")
            let folder = (path as NSString).deletingLastPathComponent
            let ledger = PurchaseLedger(opening: { () throws(LedgerError) in try SQLiteLedger(path: path) })
            return (ledger, { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false) }, {})
        case .postgresStopped:
            // Its own cluster: stopping the shared one would break the tests running beside this one.
            let cluster = try PostgresCluster()
            let connection = try cluster.newDatabase()
            let ledger = PurchaseLedger(opening: { () throws(LedgerError) in
                try PostgresLedger(connectionString: connection, clock: TestClock.fixed)
            })
            try ledger.openNow()
            try cluster.stopImmediately()
            return (ledger, { try cluster.start() }, { PostgresCluster.stopPostmaster(directory: cluster.directory) })
        }
    }
}

/// What the service answers while its store is down, and that it recovers by itself when the store returns.
struct StoreOutageRouteTests {
    @Test(arguments: Outage.tested)
    func storeDown_stateAnswersAre503_verdictsSayLedgerUnavailable_andAllRecover(_ outage: Outage) throws {
        let (ledger, restore, end) = try outage.begin()
        defer { end() }
        let routes = LedgerService.routes(ledger)
        let receipt = try ReceiptLedgerRouteTests.receipt()

        // `/readyz` answers from what the ledger's background task last saw, within its heartbeat.
        for _ in 0..<600 where routes.handle(get("/readyz"), on: .main).status == 200 { usleep(10_000) }
        let ready = routes.handle(get("/readyz"), on: .main)
        #expect(ready.status == 503)
        #expect(ready.json?["status"] == .string("not_ready"))
        #expect(ready.json?["store"] == .string("unavailable"))
        #expect(ready.json?["reason"] == .string("unreachable"))
        let delivery = routes.deliver(try SignedEvents.subscribed())
        #expect(delivery.status == 503)
        #expect(delivery.errorCode == "store_unavailable")
        for path in ["/v1/subscriptions/7000", "/v1/transactions/7000"] {
            #expect(routes.handle(get(path), on: .main).errorCode == "store_unavailable", "\(path)")
        }
        #expect(routes.claim("7000", account: "alice").errorCode == "store_unavailable")

        // The verdict is the stateless one; only `ledger` and each subscription's source say the ledger was missed.
        let down = routes.handle(receipt, on: .main)
        let stateless = LedgerService.routes(.none).handle(receipt, on: .main)
        #expect(down.status == 200)
        #expect(down.json?["ledger"] == .string("unavailable"))
        #expect(down.json?["valid"] == .bool(true))
        for key in ["checks", "receipt", "environment", "kind"] {
            #expect(down.json?[key] == stateless.json?[key], "\(key)")
        }
        let entries = try #require(down.json?["subscriptions"]?.arrayValue)
        #expect(entries.count == stateless.json?["subscriptions"]?.arrayValue?.count)
        for (entry, plain) in zip(entries, stateless.json?["subscriptions"]?.arrayValue ?? []) {
            for key in plain.keys { #expect(entry[key] == plain[key], "\(key)") }
            #expect(entry["source"] == .string("receipt"))
        }
        let jws = routes.handle(JWSUpload.text.request(try JWSPKI.atFixedNow.sign(SignedEvents.firstMonth.payload)), on: .main)
        #expect(jws.status == 200)
        #expect(jws.json?["ledger"] == .string("unavailable"))

        try restore()
        // The ledger's background task alone tries the database again, with back-off: wait for it to see it back.
        for _ in 0..<600 where routes.handle(get("/readyz"), on: .main).status != 200 { usleep(10_000) }
        #expect(routes.handle(get("/readyz"), on: .main).status == 200)
        #expect(routes.handle(get("/readyz"), on: .main).json?["status"] == .string("ready"))
        let retried = routes.deliver(try SignedEvents.subscribed())
        #expect(retried.status == 200)
        #expect(retried.json?["duplicate"] == .bool(false))
        #expect(routes.handle(get("/v1/subscriptions/7000"), on: .main).json?["status"] == .string("active"))
        #expect(routes.handle(receipt, on: .main).json?["ledger"] == .string("available"))
    }
}
