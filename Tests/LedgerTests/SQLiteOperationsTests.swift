import Foundation
@testable import Ledger
import Synchronization
import TestSupport
import Testing

/// What only the SQLite backend does: online backup, and failing to open.
struct SQLiteOperationsTests {
    typealias E = AppleEvents

    @Test func backupWhileWriting_isAConsistentReadableCopy() throws {
        let ledger = try SQLiteLedger(path: Scratch.newPath("live.sqlite"), clock: TestClock.fixed)
        let backupPath = Scratch.newPath("backup.sqlite")
        let written = Atomic<Int>(0)
        let backedUp = Atomic<Bool>(false)
        onThreads(3) { thread in
            if thread == 0 {
                while written.load(ordering: .relaxed) < 50 { usleep(1_000) }
                backedUp.store((try? ledger.backup(to: backupPath)) != nil, ordering: .relaxed)
                return
            }
            for index in 0..<150 {
                let number = thread * 1000 + index
                _ = try? ledger.record(
                    E.notification(
                        "SUBSCRIBED", signed: E.t0, uuid: "n\(number)",
                        transaction: E.transaction("t\(number)", purchase: E.t0, expires: nil, signed: E.t0)
                    )
                )
                written.add(1, ordering: .relaxed)
            }
        }
        let didBackUp = backedUp.load(ordering: .relaxed)
        #expect(didBackUp)
        let copy = try SQLiteLedger(path: backupPath, clock: TestClock.fixed)
        let counts = try copy.counts()
        #expect(counts.notifications >= 50)
        #expect(counts.notifications == counts.transactions)
        #expect(try copy.schemaVersion() == LedgerSchema.latestVersion)
        #expect(try SQLiteConnection(path: backupPath).query("PRAGMA integrity_check", []).first?.string(0) == "ok")
        // A backup never overwrites a file.
        #expect(ledgerError { try ledger.backup(to: backupPath) } != nil)
    }

    @Test func unopenablePath_isUnavailable() {
        let error = ledgerError { _ = try SQLiteLedger(path: "/nonexistent-directory/ledger.sqlite") }
        #expect(error?.code == .unavailable)
    }

    @Test func configuration_opensTheNamedBackend() throws {
        let ledger = try openLedger(.sqlite(path: Scratch.newPath("configured.sqlite")))
        #expect(ledger is SQLiteLedger)
        try ledger.ping()
    }

    @Test func placeholders_becomePositionalForSQLite() {
        #expect(SQLiteConnection.sqliteParameters("VALUES ($1, $12, '$')") == "VALUES (?1, ?12, '$')")
    }
}
