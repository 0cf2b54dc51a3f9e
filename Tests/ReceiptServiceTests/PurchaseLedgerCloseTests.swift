import Foundation
import Ledger
import TestSupport
import Testing

@testable import ReceiptService

/// `PurchaseLedger.close()`, what `serve` calls once the server stopped: the file is left whole and nothing reopens it.
struct PurchaseLedgerCloseTests {
    @Test func close_leavesTheSQLiteFileWhole_andLaterUseIsUnavailable_withoutReopening() throws {
        let path = Scratch.newPath("ledger.sqlite")
        let opens = OpenCount()
        let ledger = PurchaseLedger(
            opening: { () throws(LedgerError) in
                opens.increment()
                return try SQLiteLedger(path: path)
            }, isExclusiveWriter: true)
        try ledger.openNow()
        try ledger.withStore { (store) throws(LedgerError) in try store.ping() }
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))

        try ledger.close()

        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
        #expect(throws: PurchaseLedger.Unavailability.self) {
            try ledger.withStore { (store) throws(LedgerError) in try store.ping() }
        }
        #expect(!ledger.isReachable)
        #expect(opens.value == 1)
        try ledger.close()
    }

    private final class OpenCount: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        var value: Int { lock.withLock { count } }
        func increment() { lock.withLock { count += 1 } }
    }
}
