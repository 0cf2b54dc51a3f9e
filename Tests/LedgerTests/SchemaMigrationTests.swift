@testable import Ledger
import TestSupport
import Testing

/// The schema moves forward at open, from nothing or from the previous version, and never backwards.
struct SchemaMigrationTests {
    typealias E = AppleEvents

    @Test(arguments: Backend.tested)
    func emptyDatabase_migratesToTheLatestVersion(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        #expect(try ledger.schemaVersion() == LedgerSchema.latestVersion)
        #expect(try ledger.counts() == LedgerCounts(
            transactions: 0, transactionSources: 0, renewalInfos: 0, notifications: 0, claims: 0))
        try ledger.ping()
    }

    @Test(arguments: Backend.tested)
    func previousVersion_migratesKeepingItsRows(_ backend: Backend) throws {
        let location = try DatabaseLocation.fresh(backend)
        let previous = LedgerSchema.latestVersion - 1
        do {
            let old = try location.open(schemaVersion: previous)
            #expect(try old.schemaVersion() == previous)
            // As the previous version wrote it: today's statements need today's columns.
            try VersionOrderMigrationTests.insertAsVersion2(E.firstMonth, sources: [.receipt], location.rawConnection())
        }
        let ledger = try location.open()
        #expect(try ledger.schemaVersion() == LedgerSchema.latestVersion)
        #expect(try ledger.transaction(id: "1000")?.facts == E.firstMonth)
        var renewal = E.renewal(signed: E.t0)
        renewal.priceIncreaseStatus = 1
        try ledger.record(renewal: renewal, source: .jws)
        #expect(try ledger.renewalInfos(originalTransactionIDs: [E.original]).first?.priceIncreaseStatus == 1)
        // Opening again is a no-op.
        #expect(try location.open().schemaVersion() == LedgerSchema.latestVersion)
    }

    @Test(arguments: Backend.tested)
    func newerSchema_isAClearError(_ backend: Backend) throws {
        let location = try DatabaseLocation.fresh(backend)
        _ = try location.open()
        let newer = LedgerSchema.latestVersion + 7
        try location.rawConnection().execute("UPDATE ledger_schema SET version = $1", [.integer(Int64(newer))])
        let error = ledgerError { _ = try location.open() }
        #expect(error?.code == .schemaTooNew)
        #expect(error?.message.contains("\(newer)") == true)
        #expect(error?.message.contains("\(LedgerSchema.latestVersion)") == true)
    }

    /// Base64 does not compress: PostgreSQL's default TOAST compression tried on every signed payload, and failed.
    @Test(.enabled(if: !Backend.skipPostgres))
    func postgres_storesSignedPayloadsOutOfLineUncompressed() throws {
        let location = try DatabaseLocation.fresh(.postgres)
        let ledger = try location.open()
        let storage = try location.rawConnection().query(
            "SELECT attstorage FROM pg_attribute WHERE attrelid = 'notifications'::regclass AND attname = $1",
            [.text("signed_payload")]
        ).first?.string(0)
        #expect(storage == "e")
        // Large enough to be stored out of line; read back whole, or the retry would count as a conflict.
        var notification = E.notification("DID_RENEW", signed: E.t0, uuid: "n-out-of-line")
        notification.signedPayload = String(repeating: "eyJhbGciOiJFUzI1NiJ9", count: 700)
        #expect(try ledger.record(notification) == .stored)
        #expect(try ledger.record(notification) == .duplicate)
        notification.signedPayload += "x"
        #expect(try ledger.record(notification) == .conflict)
    }

    @Test func migrations_areNumberedInOrderFromOne() {
        #expect(LedgerSchema.migrations.map(\.version) == Array(1...LedgerSchema.migrations.count))
    }
}
