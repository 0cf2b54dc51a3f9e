import Ledger
import TestSupport
import Testing

struct ServerAPISyncCursorTests {
    @Test(arguments: Backend.tested)
    func cursor_isKeptPerAppAndEnvironment_andNeverMovesBack(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        #expect(try ledger.syncCursor(bundleID: "com.example.app", environment: "Production") == nil)
        try ledger.record(syncCursor: ServerAPISyncCursor(bundleID: "com.example.app", environment: "Production", syncedUntil: 2_000, lastSuccessAt: 2_001))
        try ledger.record(syncCursor: ServerAPISyncCursor(bundleID: "com.example.app", environment: "Sandbox", syncedUntil: 500, lastSuccessAt: 501))
        // An older span synced later: the cursor stays, the time of the last success moves.
        try ledger.record(syncCursor: ServerAPISyncCursor(bundleID: "com.example.app", environment: "Production", syncedUntil: 1_000, lastSuccessAt: 3_000))
        #expect(
            try ledger.syncCursor(bundleID: "com.example.app", environment: "Production")
                == ServerAPISyncCursor(bundleID: "com.example.app", environment: "Production", syncedUntil: 2_000, lastSuccessAt: 3_000))
        try ledger.record(syncCursor: ServerAPISyncCursor(bundleID: "com.example.app", environment: "Production", syncedUntil: 4_000, lastSuccessAt: 4_001))
        #expect(try ledger.syncCursors().map(\.syncedUntil) == [4_000, 500])
    }
}

struct ServerAPISyncLeaseTests {
    @Test(arguments: Backend.tested)
    func lease_isHeldByOneHolder_untilReleasedOrLapsed(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        func acquire(_ holder: String, now: Int64) throws -> Bool {
            try ledger.acquireSyncLease(bundleID: "com.example.app", environment: "Production", holder: holder, now: now, until: now + 100)
        }
        #expect(try acquire("a", now: 1_000))
        #expect(try !acquire("b", now: 1_050))
        #expect(try acquire("a", now: 1_060))
        try ledger.releaseSyncLease(bundleID: "com.example.app", environment: "Production", holder: "a")
        #expect(try acquire("b", now: 1_070))
        // b's lease runs to 1_170; past it, a may take over from a holder that died.
        #expect(try !acquire("a", now: 1_169))
        #expect(try acquire("a", now: 1_170))
        // A lease alone is no cursor.
        #expect(try ledger.syncCursor(bundleID: "com.example.app", environment: "Production") == nil)
        #expect(try ledger.syncCursors().isEmpty)
    }
}
