public import Ledger
import Synchronization

/// The ledger as the service uses it: configured or not, reachable or not, and never the cause of a wrong answer.
///
/// The store is opened on first use and again after a failure to open, so a server started while its PostgreSQL is
/// down serves stateless answers (and 503 where state is promised) until the database appears, then recovers by
/// itself. A schema newer than this binary is never retried: it needs a newer receiptd.
public final class PurchaseLedger: Sendable {
    /// Why an operation that needs the ledger cannot run.
    public enum Unavailability: Error, Sendable, Equatable {
        /// No `store` key: receiptd runs stateless.
        case notConfigured
        /// Configured but unreachable or failing; the ledger's error says how.
        case unavailable(LedgerError)
    }

    private let open: (@Sendable () throws(LedgerError) -> any LedgerStore)?
    private let store = Mutex<(any LedgerStore)?>(nil)
    private let isClosed = Atomic(false)
    /// What this process already wrote, by source and transaction id, with the signing time and a hash of the
    /// payload it wrote: a receipt validated again (backends re-check stored receipts nightly) then costs the ledger
    /// a read, not a write. Another payload signed at the same time still goes to the ledger, whose tie-breaks decide.
    private let written = Mutex<[String: (signedDate: Int64, payload: Int)]>([:])
    /// Bounds `written` and `subscriptions`; past it the memory starts over, which costs only reads and writes.
    static let memoryCapacity = 100_000
    /// Whether this process is the ledger's only writer (SQLite, one replica), so that what it read stays true until
    /// it writes again: subscriptions are then remembered between writes, and a validation that changes nothing
    /// costs no database work at all. With PostgreSQL other replicas write too, and every read goes to the database.
    private let isExclusiveWriter: Bool
    private let subscriptions = Mutex(SubscriptionMemory())

    /// A stateless service.
    public static let none = PurchaseLedger(opening: nil)

    /// - Parameters:
    ///   - open: makes (connects, migrates) the store; called until it succeeds.
    ///   - isExclusiveWriter: nothing but this process writes to the store.
    public init(opening open: (@Sendable () throws(LedgerError) -> any LedgerStore)?, isExclusiveWriter: Bool = false) {
        self.open = open
        self.isExclusiveWriter = isExclusiveWriter
    }

    /// A ledger on a store that is already open (tests, benchmarks); a SQLite one is taken to be this process's own.
    public convenience init(store: any LedgerStore) {
        self.init(opening: { store }, isExclusiveWriter: store is SQLiteLedger)
    }

    public var isConfigured: Bool { open != nil }

    /// Runs `body` on the store, opening it first if need be.
    public func withStore<Result>(
        _ body: (any LedgerStore) throws(LedgerError) -> Result
    ) throws(Unavailability) -> Result {
        guard let open else { throw .notConfigured }
        let current: any LedgerStore
        do {
            current = try store.withLock { (store) throws(LedgerError) -> any LedgerStore in
                if let store { return store }
                guard !isClosed.load(ordering: .relaxed) else { throw LedgerError(.unavailable, "the ledger is closed") }
                let opened = try open()
                store = opened
                return opened
            }
        } catch {
            throw .unavailable(error)
        }
        do {
            return try body(current)
        } catch {
            throw .unavailable(error)
        }
    }

    /// Whether a transaction from `source` signed at that time is news to what this process wrote; the answer lets
    /// a caller skip building facts that `record` would skip anyway.
    public func needsRecording(source: TransactionSource) -> (_ transactionID: String, _ signedDate: Int64) -> Bool {
        { transactionID, signedDate in
            // The same signing time counts as known: two receipts made in one millisecond show the same entries.
            self.written.withLock { $0[Self.key(source, transactionID)].map { $0.signedDate < signedDate } ?? true }
        }
    }

    private static func key(_ source: TransactionSource, _ transactionID: String) -> String {
        source.rawValue + " " + transactionID
    }

    /// Records transactions unless this process already recorded each of them from `source` as of a later signing
    /// time, or the same payload as of the same time; the ledger would keep its state anyway, so skipping changes
    /// nothing it holds.
    public func record(
        _ transactions: [TransactionFacts], source: TransactionSource, in store: any LedgerStore
    ) throws(LedgerError) {
        func key(_ facts: TransactionFacts) -> String { Self.key(source, facts.transactionID) }
        let new = written.withLock { written in
            transactions.filter { facts in
                guard let known = written[key(facts)] else { return true }
                return (known.signedDate, known.payload) != (facts.signedDate, facts.payloadJSON.hashValue)
                    && known.signedDate <= facts.signedDate
            }
        }
        guard !new.isEmpty else { return }
        defer { forget(new.map(\.originalTransactionID)) }
        try store.record(transactions: new, source: source)
        written.withLock { written in
            if written.count + new.count > Self.memoryCapacity { written.removeAll(keepingCapacity: true) }
            for facts in new where (written[key(facts)]?.signedDate ?? .min) <= facts.signedDate {
                written[key(facts)] = (facts.signedDate, facts.payloadJSON.hashValue)
            }
        }
    }

    public func record(renewal: RenewalFacts, source: TransactionSource, in store: any LedgerStore) throws(LedgerError) {
        defer { forget([renewal.originalTransactionID]) }
        try store.record(renewal: renewal, source: source)
    }

    public func record(_ notification: NotificationFacts, in store: any LedgerStore) throws(LedgerError)
        -> NotificationWrite
    {
        defer {
            forget([notification.transaction?.originalTransactionID, notification.renewal?.originalTransactionID]
                .compactMap { $0 })
        }
        return try store.record(notification)
    }

    /// A subscription's facts; while this process is the only writer, from memory when nothing was written since.
    public func subscription(
        originalTransactionID: String, in store: any LedgerStore
    ) throws(LedgerError) -> SubscriptionFacts? {
        guard isExclusiveWriter else { return try store.subscription(originalTransactionID: originalTransactionID) }
        let (remembered, generation) = subscriptions.withLock { ($0.facts[originalTransactionID], $0.generation) }
        if let remembered { return remembered }
        let facts = try store.subscription(originalTransactionID: originalTransactionID)
        subscriptions.withLock { memory in
            // A write since the read began may have made it stale: keep it only if none happened.
            guard memory.generation == generation else { return }
            if memory.facts.count >= Self.memoryCapacity { memory.facts.removeAll(keepingCapacity: true) }
            memory.facts[originalTransactionID] = .some(facts)
        }
        return facts
    }

    /// Called after every write (also a failed one, which may have committed before it failed).
    private func forget(_ originalTransactionIDs: [String]) {
        guard isExclusiveWriter else { return }
        subscriptions.withLock { memory in
            memory.generation &+= 1
            for id in originalTransactionIDs { memory.facts[id] = nil }
        }
    }

    /// Opens the store now, so that start-up reports a database it cannot use (a newer schema above all) before the
    /// server listens. An unreachable database is not fatal: it is retried on use.
    public func openNow() throws(LedgerError) {
        do {
            try withStore { (store) throws(LedgerError) in try store.ping() }
        } catch .unavailable(let error) where error.code == .schemaTooNew {
            throw error
        } catch {}
    }

    /// Closes the store for good, at shutdown once the server stopped: SQLite's file is then whole on its own. Later
    /// calls answer `unavailable`, and nothing reopens it.
    public func close() throws(LedgerError) {
        let current = store.withLock { store in
            isClosed.store(true, ordering: .relaxed)
            defer { store = nil }
            return store
        }
        try current?.close()
    }

    /// For `/readyz`: whether the ledger answers now. A stateless service is always ready.
    public var isReachable: Bool {
        guard isConfigured else { return true }
        return (try? withStore { (store) throws(LedgerError) in try store.ping() }) != nil
    }
}

/// Subscriptions as last read, and a count of writes that tells a read that raced a write.
private struct SubscriptionMemory {
    var facts: [String: SubscriptionFacts?] = [:]
    var generation = 0
}
