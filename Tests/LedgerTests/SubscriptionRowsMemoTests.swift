import Synchronization
import TestSupport
import Testing

@testable import Ledger

/// The SQLite writer's memo of subscriptions' rows: what a write decides its events on must be what the tables hold,
/// whatever happened since the memo kept them. (Debug builds also compare every row the memo answers with the tables
/// and stop at the first that differs; the ledger tests below fail on the state the rules saw either way.)
struct SubscriptionRowsMemoTests {
    typealias E = AppleEvents

    static func transaction(_ id: String, original: String, signed: Int64 = E.t0) -> TransactionFacts {
        E.transaction(id, purchase: E.t0, expires: E.t0 + 30 * E.day, signed: signed, original: original)
    }

    /// Runs a write on `memo` as the writer does: it reads `originals` (all empty), stores `stored`, and ends.
    static func write(
        _ memo: SubscriptionRowsMemo, reading originals: [String], storing stored: [String: String],
        released: Bool = true
    ) {
        var rows = SubscriptionRows()
        for original in originals { rows.originals[original] = SubscriptionRows.Original() }
        let before = OutboxBefore(
            originalTransactionIDs: originals, rows: rows, owners: [:], followsWrites: true, locksOriginalStreams: false
        )
        for (id, original) in stored.sorted(by: { $0.key < $1.key }) {
            before.stored(transaction(id, original: original), at: 7, replacing: false)
        }
        memo.noteRunning(before)
        memo.endWrite(released: released)
    }

    static func ids(_ memo: SubscriptionRowsMemo, _ original: String) -> [String]? {
        memo.rows(of: original)?.transactions.map(\.facts.transactionID)
    }

    // MARK: - the memo

    @Test func aReleasedWrite_isSeenInItsGroup_andKeptOnceTheGroupCommits() {
        let memo = SubscriptionRowsMemo()
        memo.beginGroup(dataVersion: 1)
        Self.write(memo, reading: ["o", "p"], storing: ["t1": "o"])
        #expect(Self.ids(memo, "o") == ["t1"])
        memo.endGroup(committed: true)
        memo.beginGroup(dataVersion: 1)
        #expect(Self.ids(memo, "o") == ["t1"])
        // An original read and left without rows is known to have none.
        #expect(Self.ids(memo, "p") == [])
        #expect(Self.ids(memo, "q") == nil)
    }

    @Test func aWriteRolledBack_orAGroupNotCommitted_leavesNothing() {
        let memo = SubscriptionRowsMemo()
        memo.beginGroup(dataVersion: 1)
        Self.write(memo, reading: ["o"], storing: ["t1": "o"], released: false)
        #expect(Self.ids(memo, "o") == nil)
        Self.write(memo, reading: ["p"], storing: ["t2": "p"])
        memo.endGroup(committed: false)
        memo.beginGroup(dataVersion: 1)
        #expect(Self.ids(memo, "p") == nil)
    }

    @Test func anotherConnectionsCommit_forgetsEverything() {
        let memo = SubscriptionRowsMemo()
        memo.beginGroup(dataVersion: 1)
        Self.write(memo, reading: ["o"], storing: ["t1": "o"])
        memo.endGroup(committed: true)
        memo.beginGroup(dataVersion: 2)
        #expect(Self.ids(memo, "o") == nil)
        // A version that could not be read is a move too.
        Self.write(memo, reading: ["o"], storing: ["t1": "o"])
        memo.endGroup(committed: true)
        memo.beginGroup(dataVersion: nil)
        #expect(Self.ids(memo, "o") == nil)
    }

    @Test func aWriteThatStoredRowsOfAnOriginalItDidNotRead_forgetsEverything() {
        let memo = SubscriptionRowsMemo()
        memo.beginGroup(dataVersion: 1)
        Self.write(memo, reading: ["o"], storing: ["t1": "o"])
        Self.write(memo, reading: ["p"], storing: ["t2": "q"])
        #expect(Self.ids(memo, "o") == nil && Self.ids(memo, "p") == nil)
    }

    @Test func pastItsByteLimit_theMemoStartsAfresh() {
        let memo = SubscriptionRowsMemo(byteLimit: 4096)
        memo.beginGroup(dataVersion: 1)
        Self.write(memo, reading: ["o"], storing: ["t1": "o"])
        memo.endGroup(committed: true)
        #expect(Self.ids(memo, "o") == ["t1"])
        Self.write(
            memo, reading: ["p"], storing: Dictionary(uniqueKeysWithValues: (0..<20).map { ("p\($0)", "p") }))
        memo.endGroup(committed: true)
        #expect(Self.ids(memo, "o") == nil && Self.ids(memo, "p") == nil)
    }

    // MARK: - a ledger's writes

    /// Rules that keep every change they are shown and store no event.
    final class Seen: Sendable {
        let changes = Mutex<[LedgerChange]>([])
        /// A transaction whose change makes the event's body unstorable (a NUL), failing its write after its rows.
        let poison: String?

        init(poison: String? = nil) { self.poison = poison }

        var outbox: OutboxRules {
            OutboxRules(
                events: { [self] change in
                    changes.withLock { $0.append(change) }
                    guard let poison, change.after?.transactions.contains(where: { $0.transactionID == poison }) == true
                    else { return [] }
                    return [
                        EventDraft(
                            type: "POISON", dedupeKey: "POISON", account: nil,
                            originalTransactionID: change.originalTransactionID, bundleID: nil, environment: nil,
                            bodyMembers: "\"a\u{0}b\":1")
                    ]
                },
                subscribers: { _ in ["backend"] }, formatTime: { String($0) })
        }

        /// The last change of `original`: its transactions' ids before and after.
        func last(_ original: String) -> (before: [String], after: [String])? {
            changes.withLock { changes in
                changes.last { $0.originalTransactionID == original }.map {
                    (
                        ($0.before?.transactions ?? []).map(\.transactionID).sorted(),
                        ($0.after?.transactions ?? []).map(\.transactionID).sorted()
                    )
                }
            }
        }
    }

    static func ledger(_ path: String, _ seen: Seen) throws -> SQLiteLedger {
        try SQLiteLedger(path: path, clock: TestClock.fixed, outbox: seen.outbox)
    }

    @Test func anotherProcessesWriteOfAnOriginal_isInTheNextWritesStateBefore() throws {
        let path = Scratch.newPath("memo.sqlite")
        let seen = Seen()
        let server = try Self.ledger(path, seen)
        try server.record(transactions: [Self.transaction("t1", original: "o")], source: .jws)
        try server.record(transactions: [Self.transaction("t2", original: "o")], source: .jws)
        let commandLine = try Self.ledger(path, Seen())
        try commandLine.record(transactions: [Self.transaction("t3", original: "o")], source: .serverAPI)
        try commandLine.close()
        try server.record(transactions: [Self.transaction("t4", original: "o")], source: .jws)
        #expect(seen.last("o")?.before == ["t1", "t2", "t3"])
        #expect(seen.last("o")?.after == ["t1", "t2", "t3", "t4"])
        try server.close()
    }

    @Test func aTransactionMovedToAnotherOriginal_isGoneFromTheFirstOnesNextState() throws {
        let seen = Seen()
        let ledger = try Self.ledger(Scratch.newPath("memo.sqlite"), seen)
        try ledger.record(transactions: [Self.transaction("a1", original: "a")], source: .jws)
        try ledger.record(transactions: [Self.transaction("m", original: "a")], source: .jws)
        // Signed later: the stored row takes the new original id.
        try ledger.record(transactions: [Self.transaction("m", original: "b", signed: E.t0 + 1)], source: .jws)
        try ledger.record(transactions: [Self.transaction("a2", original: "a")], source: .jws)
        #expect(seen.last("a")?.before == ["a1"])
        #expect(seen.last("a")?.after == ["a1", "a2"])
        try ledger.close()
    }

    @Test func aWriteUndoneToItsSavepoint_isNotInTheNextWritesStateBefore() throws {
        let seen = Seen(poison: "bad")
        let ledger = try Self.ledger(Scratch.newPath("memo.sqlite"), seen)
        try ledger.record(transactions: [Self.transaction("t1", original: "o")], source: .jws)
        let failure = ledgerError {
            try ledger.record(transactions: [Self.transaction("bad", original: "o")], source: .jws)
        }
        #expect(failure?.code == .invalidData)
        try ledger.record(transactions: [Self.transaction("t2", original: "o")], source: .jws)
        #expect(seen.last("o")?.before == ["t1"])
        #expect(seen.last("o")?.after == ["t1", "t2"])
        try ledger.close()
    }
}
