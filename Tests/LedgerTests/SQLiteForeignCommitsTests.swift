import Foundation
import Synchronization
import Testing
import TestSupport

@testable import Ledger

/// `SQLiteLedger.commitsByOthers()`: what a server's memory of the file is checked against before it is used.
struct SQLiteForeignCommitsTests {
    static func facts(_ id: String, signed: Int64 = 0) -> TransactionFacts {
        TransactionFacts(
            transactionID: id, originalTransactionID: id, productID: "coins", bundleID: "com.example.app",
            type: "Consumable", purchaseDate: 0, originalPurchaseDate: 0, expiresDate: nil, revocationDate: nil,
            revocationReason: nil, inAppOwnershipType: "PURCHASED", webOrderLineItemID: nil, environment: "Sandbox",
            signedDate: signed, payloadJSON: "{}")
    }

    @Test func ownCommits_areNotCounted_anotherConnectionsAre() throws {
        let path = Scratch.newPath("foreign.sqlite")
        let ledger = try SQLiteLedger(path: path)
        let before = ledger.commitsByOthers()
        for index in 0..<5 { try ledger.record(transactions: [Self.facts("own\(index)")], source: .receipt) }
        try ledger.checkWritable()
        #expect(ledger.commitsByOthers() == before)

        let other = try SQLiteLedger(path: path)
        try other.record(transactions: [Self.facts("theirs")], source: .serverAPI)
        #expect(ledger.commitsByOthers() > before)
        try other.close()
        try ledger.close()
    }

    /// Another connection's commit landing right after one of this ledger's own (the race the writer's check must
    /// not lose): every one that ended before the call is counted, however the two interleave.
    @Test func everyForeignCommit_isCounted_whileOwnCommitsRunBesideIt() throws {
        let path = Scratch.newPath("race.sqlite")
        let ledger = try SQLiteLedger(path: path)
        // The other connection waits for the file's write lock against a writer that takes it back at once, over and
        // over; on a loaded machine (the whole suite in CI) that wait passed the default 2 s store_timeout. What is
        // tested is the count, not how soon the lock comes.
        let other = try SQLiteLedger(path: path, timeout: 30)
        let done = Atomic(false)
        let stopped = DispatchSemaphore(value: 0)
        let ownWrites = Thread {
            var index = 0
            while !done.load(ordering: .relaxed) {
                try? ledger.record(transactions: [Self.facts("own\(index % 50)", signed: Int64(index))], source: .receipt)
                index += 1
            }
            stopped.signal()
        }
        ownWrites.start()
        defer {
            done.store(true, ordering: .relaxed)
            stopped.wait()
        }
        var missed = 0
        for index in 0..<200 {
            let seen = ledger.commitsByOthers()
            try other.record(transactions: [Self.facts("theirs", signed: Int64(index + 1))], source: .serverAPI)
            if ledger.commitsByOthers() <= seen { missed += 1 }
        }
        #expect(missed == 0, "\(missed) of 200 foreign commits were not counted")
    }
}
