@testable import Ledger
import TestSupport
import Testing

/// What Apple revoked is granted to nobody; a claim made before the revocation stays on record.
struct RevokedClaimTests {
    typealias E = AppleEvents

    @Test(arguments: Backend.tested)
    func claimOfARefundedTransaction_isRevoked_andStoresNoClaim(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        _ = try ledger.record(E.subscribed)
        _ = try ledger.record(E.refund)
        #expect(try ledger.claim(transactionID: "1000", account: "alice", at: 10)
            == .revoked(date: E.t0 + 10 * E.day, reason: 0, claim: nil))
        #expect(try ledger.transaction(id: "1000")?.claim == nil)
        #expect(try ledger.counts().claims == 0)
    }

    @Test(arguments: Backend.tested)
    func familySharingRevoked_isRevoked(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        _ = try ledger.record(E.revoke)
        guard case .revoked(let date, _, nil) = try ledger.claim(transactionID: "1000", account: "alice", at: 10) else {
            Issue.record("a transaction revoked by family sharing was granted")
            return
        }
        #expect(date == E.t0 + 10 * E.day)
    }

    @Test(arguments: Backend.tested)
    func claimBeforeARefund_stays_andAnyLaterClaimIsRevoked(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        _ = try ledger.record(E.subscribed)
        #expect(try ledger.claim(transactionID: "1000", account: "alice", at: 10) == .granted(first: true, claimedAt: 10))
        _ = try ledger.record(E.refund)

        let alice = Claim(account: "alice", claimedAt: 10)
        let revoked = ClaimOutcome.revoked(date: E.t0 + 10 * E.day, reason: 0, claim: alice)
        #expect(try ledger.claim(transactionID: "1000", account: "alice", at: 20) == revoked)
        #expect(try ledger.claim(transactionID: "1000", account: "bob", at: 30) == revoked)
        let record = try #require(try ledger.transaction(id: "1000"))
        #expect(record.claim == alice)
        #expect(record.facts.revocationDate == E.t0 + 10 * E.day)

        // Apple reversed the refund: the purchase counts again, and it is still alice's.
        _ = try ledger.record(E.refundReversed)
        #expect(try ledger.claim(transactionID: "1000", account: "alice", at: 40) == .granted(first: false, claimedAt: 10))
    }
}
