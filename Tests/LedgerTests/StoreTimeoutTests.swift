import Foundation
import TestSupport
import Testing

@testable import Ledger

/// `store_timeout` bounds every wait on the database, and each failure says what is wrong with it (`reason`).
struct StoreTimeoutTests {
    typealias E = AppleEvents

    /// A distinct notification per call, so that each one is a real write.
    static func notification(_ number: Int) -> NotificationFacts {
        E.notification("DID_RENEW", signed: E.t0 + Int64(number), uuid: "fault-\(number)", transaction: E.firstMonth)
    }

    // MARK: - PostgreSQL frozen (SIGSTOP), not shut down

    @Test(.enabled(if: !Backend.skipPostgres))
    func frozenServer_statementsAndConnectsFailWithTimeout_andTheLedgerRecoversAfterThaw() throws {
        // Its own cluster: freezing the shared one would hang the tests running beside this one.
        let cluster = try PostgresCluster()
        defer {
            try? cluster.thaw()
            PostgresCluster.stopPostmaster(directory: cluster.directory)
        }
        let connectionString = try cluster.newDatabase()
        let ledger = try PostgresLedger(connectionString: connectionString, timeout: 1, clock: TestClock.fixed)
        #expect(try ledger.record(Self.notification(1)) == .stored)

        try cluster.freeze()
        // A blocking libpq call would wait here for as long as the server stays frozen.
        let statement = ledgerError { _ = try ledger.record(Self.notification(2)) }
        #expect(statement?.code == .unavailable)
        #expect(statement?.reason == .timeout)
        let read = ledgerError { _ = try ledger.subscription(originalTransactionID: E.original) }
        #expect(read?.reason == .timeout)
        let connect = ledgerError {
            _ = try PostgresLedger(connectionString: connectionString, timeout: 1, clock: TestClock.fixed)
        }
        #expect(connect?.reason == .timeout)

        try cluster.thaw()
        try ledger.ping()
        #expect(try ledger.record(Self.notification(2)) == .stored)
    }

    @Test(.enabled(if: !Backend.skipPostgres))
    func statementTimeout_isStoreTimeout_unlessTheConnectionStringSetsOne() throws {
        let connectionString = try PostgresCluster.shared.get().newDatabase()
        let ours = try PostgresConnection(connectionString: connectionString, timeout: 1.5)
        #expect(try ours.query("SHOW statement_timeout", []).first?.string(0) == "1500ms")
        let theirs = try PostgresConnection(
            connectionString: connectionString + " options='-c statement_timeout=7s'", timeout: 1.5)
        #expect(try theirs.query("SHOW statement_timeout", []).first?.string(0) == "7s")
        let otherOptions = try PostgresConnection(
            connectionString: connectionString + " options='-c lock_timeout=3s'", timeout: 1.5)
        #expect(try otherOptions.query("SHOW statement_timeout", []).first?.string(0) == "1500ms")
        #expect(try otherOptions.query("SHOW lock_timeout", []).first?.string(0) == "3s")
    }

    @Test(.enabled(if: !Backend.skipPostgres))
    func statementRunningPastTheTimeout_isCancelledByTheServer() throws {
        let connection = try PostgresConnection(
            connectionString: try PostgresCluster.shared.get().newDatabase(), timeout: 0.2)
        let error = ledgerError { _ = try connection.query("SELECT pg_sleep(5)", []) }
        #expect(error?.reason == .timeout)
    }

    @Test func unreachableServer_isUnreachable_withoutThePassword() {
        let error = ledgerError {
            _ = try PostgresLedger(
                connectionString: "host=/nonexistent-socket-directory password=hunter2-secret dbname=x")
        }
        #expect(error?.reason == .unreachable)
        #expect(error?.message.contains("hunter2-secret") == false)
    }

    @Test(arguments: [
        ("53100", "disk_full"), ("25006", "read_only"), ("XX001", "corrupt"), ("XX002", "corrupt"),
        ("57014", "timeout"), ("55P03", "locked"), ("40P01", "locked"), ("40001", "locked"),
        ("08006", "unreachable"), ("57P01", "unreachable"), ("23505", "error"), ("42P01", "error"),
    ])
    func sqlState_mapsToItsReason(_ state: String, _ reason: String) {
        #expect(PostgresConnection.reason(sqlState: state).rawValue == reason)
    }

    // MARK: - SQLite

    /// SQLite's result codes by number (sqlite3.h): FULL 13, READONLY 8 (1032 READONLY_DBMOVED), CORRUPT 11,
    /// NOTADB 26, BUSY 5, LOCKED 6, CANTOPEN 14, IOERR 10 (778 IOERR_WRITE), CONSTRAINT 19.
    @Test(arguments: [
        (13, "disk_full"), (8, "read_only"), (1032, "read_only"), (11, "corrupt"), (26, "corrupt"), (5, "locked"),
        (6, "locked"), (14, "unreachable"), (778, "error"), (19, "error"),
    ] as [(Int32, String)])
    func sqliteResultCode_mapsToItsReason(_ status: Int32, _ reason: String) {
        #expect(SQLiteConnection.reason(status).rawValue == reason)
    }

    @Test func busyTimeout_isStoreTimeout() throws {
        let connection = try SQLiteConnection(path: Scratch.newPath("busy.sqlite"), timeout: 0.25)
        #expect(try connection.query("PRAGMA busy_timeout", []).first?.int64(0) == 250)
    }

    @Test func writeLockHeldElsewhere_failsAsLocked_afterStoreTimeout() throws {
        let path = Scratch.newPath("locked.sqlite")
        let ledger = try SQLiteLedger(path: path, timeout: 0.2, clock: TestClock.fixed)
        let other = try SQLiteConnection(path: path, timeout: 0.2)
        try other.execute("BEGIN IMMEDIATE")
        let error = ledgerError { _ = try ledger.record(Self.notification(1)) }
        #expect(error?.reason == .locked)
        try other.execute("ROLLBACK")
        #expect(try ledger.record(Self.notification(2)) == .stored)
    }

    @Test func fullDatabase_failsAsDiskFull_withSQLitesCode() throws {
        let ledger = try SQLiteLedger(path: Scratch.newPath("full.sqlite"), clock: TestClock.fixed)
        #expect(try ledger.record(Self.notification(0)) == .stored)
        // What a full volume does to SQLite (SQLITE_FULL), on a file that may not grow by a page.
        try ledger.executeOnWriter("PRAGMA max_page_count = 1")
        var failure: LedgerError?
        for number in 1...200 where failure == nil {
            failure = ledgerError { _ = try ledger.record(Self.notification(number)) }
        }
        #expect(failure?.reason == .diskFull)
        #expect(failure?.message.contains("(13)") == true)
        try ledger.executeOnWriter("PRAGMA max_page_count = 1073741823")
        #expect(try ledger.record(Self.notification(1000)) == .stored)
    }

    @Test func readOnlyDatabase_failsAsReadOnly() throws {
        let ledger = try SQLiteLedger(path: Scratch.newPath("read-only.sqlite"), clock: TestClock.fixed)
        // Root writes through any permission bit, so the connection itself refuses writes, as on a read-only volume.
        try ledger.executeOnWriter("PRAGMA query_only = 1")
        let error = ledgerError { _ = try ledger.record(Self.notification(1)) }
        #expect(error?.reason == .readOnly)
        try ledger.executeOnWriter("PRAGMA query_only = 0")
        #expect(try ledger.record(Self.notification(1)) == .stored)
    }

    @Test func fileThatIsNotADatabase_failsAsCorrupt() throws {
        let path = Scratch.newPath("garbage.sqlite")
        try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: path))
        let error = ledgerError { _ = try SQLiteLedger(path: path, clock: TestClock.fixed) }
        #expect(error?.reason == .corrupt)
    }

    @Test func missingFolder_isUnreachable() {
        let error = ledgerError { _ = try SQLiteLedger(path: "/nonexistent-directory/ledger.sqlite") }
        #expect(error?.reason == .unreachable)
    }

    @Test func valueThatCannotBeStored_blamesTheCall_notTheDatabase() throws {
        let ledger = try SQLiteLedger(path: Scratch.newPath("nul.sqlite"), clock: TestClock.fixed)
        let error = ledgerError {
            _ = try ledger.record(E.notification("TEST", signed: E.t0, uuid: "a\u{0}b", transaction: E.firstMonth))
        }
        #expect(error?.code == .invalidData)
        #expect(error?.reason == nil)
    }
}
