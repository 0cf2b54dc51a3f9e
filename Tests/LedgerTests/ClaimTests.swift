@testable import Ledger
import Synchronization
import TestSupport
import Testing

/// A purchase is granted to one account, exactly once.
struct ClaimTests {
    typealias E = AppleEvents

    @Test(arguments: Backend.tested)
    func claim_firstRepeatOtherAccountAndUnknown(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        try ledger.record(transactions: [E.firstMonth], source: .jws)
        #expect(try ledger.claim(transactionID: "1000", account: "alice", at: 10)
            == .granted(first: true, claimedAt: 10))
        #expect(try ledger.claim(transactionID: "1000", account: "alice", at: 20)
            == .granted(first: false, claimedAt: 10))
        #expect(try ledger.claim(transactionID: "1000", account: "bob", at: 30)
            == .alreadyClaimed(Claim(account: "alice", claimedAt: 10)))
        #expect(try ledger.claim(transactionID: "9999", account: "alice", at: 40) == .unknownTransaction)
        #expect(try ledger.transaction(id: "1000")?.claim == Claim(account: "alice", claimedAt: 10))
        #expect(try ledger.counts().claims == 1)
    }

    @Test(arguments: Backend.tested)
    func concurrentClaims_haveExactlyOneWinner(_ backend: Backend) throws {
        let location = try DatabaseLocation.fresh(backend)
        // PostgreSQL: two ledgers on one database stand in for two receiptd processes.
        let ledgers = backend == .postgres ? [try location.open(), try location.open()] : [try location.open()]
        try ledgers[0].record(transactions: [E.firstMonth], source: .jws)
        let outcomes = Mutex<[ClaimOutcome]>([])
        onThreads(16) { index in
            let ledger = ledgers[index % ledgers.count]
            let outcome = (try? ledger.claim(transactionID: "1000", account: "account-\(index)", at: Int64(index)))
            outcomes.withLock { $0.append(outcome ?? .unknownTransaction) }
        }
        let all = outcomes.withLock { $0 }
        let winners = all.filter { if case .granted(first: true, _) = $0 { true } else { false } }
        #expect(all.count == 16)
        #expect(winners.count == 1)
        let stored = try #require(try ledgers[0].transaction(id: "1000")?.claim)
        #expect(all.filter { $0 == .alreadyClaimed(stored) }.count == 15)
    }
}
