import Foundation
@testable import Ledger
import TestSupport
import Testing

/// A PostgreSQL server that goes away and comes back.
@Suite(.enabled(if: !Backend.skipPostgres))
struct PostgresRecoveryTests {
    typealias E = AppleEvents

    @Test func serverGoingAway_isUnavailable_andTheSameLedgerRecoversAfterRestart() throws {
        // Its own cluster: stopping the shared one would break the tests running beside this one.
        let cluster = try PostgresCluster()
        defer { PostgresCluster.stopPostmaster(directory: cluster.directory) }
        let ledger = try PostgresLedger(connectionString: try cluster.newDatabase(), clock: TestClock.fixed)
        #expect(try ledger.record(E.subscribed) == .stored)

        try cluster.stopImmediately()
        #expect(ledgerError { try ledger.ping() }?.code == .unavailable)
        #expect(ledgerError { _ = try ledger.record(E.refund) }?.code == .unavailable)
        #expect(ledgerError { _ = try ledger.subscription(originalTransactionID: E.original) }?.code == .unavailable)

        try cluster.start()
        try ledger.ping()
        #expect(try ledger.record(E.refund) == .stored)
        #expect(try ledger.subscription(originalTransactionID: E.original)?.status(at: E.t0 + 11 * E.day) == .revoked)
    }

    @Test func unreachableServer_isUnavailable() {
        let error = ledgerError {
            _ = try PostgresLedger(connectionString: "host=/nonexistent-socket-directory user=postgres dbname=x")
        }
        #expect(error?.code == .unavailable)
    }

    @Test func configuration_opensTheNamedBackend() throws {
        let ledger = try openLedger(.postgres(connectionString: try PostgresCluster.shared.get().newDatabase()))
        #expect(ledger is PostgresLedger)
        try ledger.ping()
    }
}
