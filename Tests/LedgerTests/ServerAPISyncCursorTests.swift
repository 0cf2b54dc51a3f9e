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
