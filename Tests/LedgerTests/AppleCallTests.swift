import TestSupport
import Testing

@testable import Ledger

/// A granted claim queues what it owes Apple in its own transaction; the worker's queries lease, retry and finish.
struct AppleCallTests {
    typealias E = AppleEvents

    static let both = AppleCallRules { bundleID in
        bundleID == "com.example.app" ? ClaimDuties(finishTransaction: true, setAppAccountToken: true) : ClaimDuties()
    }

    static func open(_ location: DatabaseLocation, rules: AppleCallRules = both) throws(LedgerError) -> any LedgerStore {
        switch location {
        case .sqlite(let path):
            try SQLiteLedger(path: path, clock: TestClock.fixed, appleCalls: rules)
        case .postgres(let connectionString):
            try PostgresLedger(connectionString: connectionString, clock: TestClock.fixed, appleCalls: rules)
        }
    }

    static func isUUID(_ text: String?) -> Bool {
        guard let text else { return false }
        let groups = text.split(separator: "-", omittingEmptySubsequences: false).map(\.count)
        return groups == [8, 4, 4, 4, 12] && text.allSatisfy { "0123456789abcdef-".contains($0) }
    }

    @Test(arguments: Backend.tested)
    func grantedClaim_queuesFinishAndAFreshTokenRegisteredToTheAccount_once(_ backend: Backend) throws {
        let ledger = try Self.open(try DatabaseLocation.fresh(backend))
        try ledger.record(transactions: [E.firstMonth], source: .jws)
        #expect(try ledger.claim(transactionID: "1000", account: "alice", at: 10) == .granted(first: true, claimedAt: 10))
        let calls = try ledger.appleCalls(transactionID: "1000")
        #expect(calls.map(\.callID) == ["finish:1000", "token:1000"])
        #expect(calls.map(\.kind) == [.finishTransaction, .setAppAccountToken])
        #expect(calls.allSatisfy { $0.state == .pending && $0.attempts == 0 && $0.nextAttemptAt == 10 })
        #expect(calls.allSatisfy { $0.bundleID == "com.example.app" && $0.environment == "Sandbox" })
        let token = calls[1].argument
        #expect(Self.isUUID(token))
        #expect(try ledger.account("alice")?.record.appAccountTokens == [try #require(token)])

        _ = try ledger.claim(transactionID: "1000", account: "alice", at: 20)
        #expect(try ledger.appleCalls(transactionID: "1000") == calls)
        #expect(try ledger.account("alice")?.record.appAccountTokens == [try #require(token)])
        // A later transaction of the same original is finished on its own claim; the token is the original's, once.
        try ledger.record(transactions: [E.transaction("1001", purchase: E.t0 + E.day, expires: nil, signed: E.t0)], source: .jws)
        _ = try ledger.claim(transactionID: "1001", account: "alice", at: 30)
        #expect(try ledger.appleCalls(transactionID: "1001").map(\.callID) == ["token:1000", "finish:1001"])
        #expect(try ledger.appleCalls(in: [.pending], limit: 10).count == 3)
    }

    @Test(arguments: Backend.tested)
    func claim_usesTheAccountsRegisteredToken_andNoneForAPurchaseCarryingOne(_ backend: Backend) throws {
        let ledger = try Self.open(try DatabaseLocation.fresh(backend))
        let registered = "6f2b9c1e-3a4d-4c5e-8f90-1a2b3c4d5e6f"
        _ = try ledger.registerAppAccountToken(registered, account: "alice", at: 5)
        try ledger.record(transactions: [E.firstMonth], source: .jws)
        _ = try ledger.claim(transactionID: "1000", account: "alice", at: 10)
        #expect(try ledger.appleCalls(transactionID: "1000").first { $0.kind == .setAppAccountToken }?.argument == registered)

        var carrying = E.transaction("2000", purchase: E.t0, expires: nil, signed: E.t0, original: "2000")
        carrying.appAccountToken = "0b1c2d3e-4f50-4617-8283-94a5b6c7d8e9"
        try ledger.record(transactions: [carrying], source: .jws)
        _ = try ledger.claim(transactionID: "2000", account: "bob", at: 10)
        #expect(try ledger.appleCalls(transactionID: "2000").map(\.callID) == ["finish:2000"])
    }

    @Test(arguments: Backend.tested)
    func appWithoutDuties_orAClaimNotGranted_queuesNothing(_ backend: Backend) throws {
        let ledger = try Self.open(try DatabaseLocation.fresh(backend), rules: .none)
        try ledger.record(transactions: [E.firstMonth], source: .jws)
        _ = try ledger.claim(transactionID: "1000", account: "alice", at: 10)
        #expect(try ledger.appleCalls(transactionID: "1000").isEmpty)

        let dutiful = try Self.open(try DatabaseLocation.fresh(backend))
        try dutiful.record(transactions: [E.transaction("1000", purchase: E.t0, expires: nil, signed: E.t0, revoked: E.t0 + 1)], source: .jws)
        _ = try dutiful.claim(transactionID: "1000", account: "alice", at: 10)
        #expect(try dutiful.appleCalls(in: AppleCallState.allCases, limit: 10).isEmpty)
    }

    /// The claim commits its calls with itself: a process that dies right after answering leaves them to the next.
    @Test(arguments: Backend.tested)
    func crashBetweenClaimAndCall_losesNothing(_ backend: Backend) throws {
        let location = try DatabaseLocation.fresh(backend)
        let first = try Self.open(location)
        try first.record(transactions: [E.firstMonth], source: .jws)
        _ = try first.claim(transactionID: "1000", account: "alice", at: 10)
        // Leased by a worker that then dies: the lease runs out and the next one takes them.
        #expect(try first.claimAppleCalls(holder: "dead", now: 10, leaseUntil: 1_000, limit: 10).count == 2)
        if backend == .sqlite { try first.close() }
        let reopened = try Self.open(location)
        #expect(try reopened.claimAppleCalls(holder: "next", now: 500, leaseUntil: 2_000, limit: 10).isEmpty)
        let taken = try reopened.claimAppleCalls(holder: "next", now: 1_000, leaseUntil: 2_000, limit: 10)
        #expect(taken.map(\.callID) == ["finish:1000", "token:1000"])
        #expect(try reopened.finishAppleCall(callID: "finish:1000", holder: "dead", result: .done, at: 1_100) == false)
        #expect(try reopened.finishAppleCall(callID: "finish:1000", holder: "next", result: .done, at: 1_100))
    }

    @Test(arguments: Backend.tested)
    func finish_retriesAtItsTime_failsForGood_andIsDoneOnce(_ backend: Backend) throws {
        let ledger = try Self.open(try DatabaseLocation.fresh(backend))
        try ledger.record(transactions: [E.firstMonth], source: .jws)
        _ = try ledger.claim(transactionID: "1000", account: "alice", at: 10)
        _ = try ledger.claimAppleCalls(holder: "w", now: 10, leaseUntil: 100, limit: 10)
        #expect(try ledger.finishAppleCall(
            callID: "finish:1000", holder: "w",
            result: .retry(at: 5_000, status: 503, appleErrorCode: nil, error: "server_api_unavailable"), at: 20))
        #expect(try ledger.finishAppleCall(
            callID: "token:1000", holder: "w",
            result: .failed(status: 400, appleErrorCode: 4000006, error: "server_api_rejected"), at: 20))
        #expect(try ledger.claimAppleCalls(holder: "w", now: 4_999, leaseUntil: 6_000, limit: 10).isEmpty)
        #expect(try ledger.claimAppleCalls(holder: "w", now: 5_000, leaseUntil: 6_000, limit: 10).map(\.callID) == ["finish:1000"])
        #expect(try ledger.finishAppleCall(callID: "finish:1000", holder: "w", result: .done, at: 5_100))
        #expect(try ledger.finishAppleCall(callID: "finish:1000", holder: "w", result: .done, at: 5_200) == false)

        let calls = try ledger.appleCalls(transactionID: "1000")
        let finish = try #require(calls.first { $0.kind == .finishTransaction })
        #expect(finish.state == .done && finish.doneAt == 5_100 && finish.attempts == 2)
        let token = try #require(calls.first { $0.kind == .setAppAccountToken })
        #expect(token.state == .failed && token.appleErrorCode == 4000006 && token.lastStatus == 400 && token.attempts == 1)
        #expect(try ledger.appleCalls(in: [.pending, .failed], limit: 10).map(\.callID) == ["token:1000"])
        #expect(try ledger.claimAppleCalls(holder: "w", now: 1_000_000, leaseUntil: 2_000_000, limit: 10).isEmpty)
    }
}
