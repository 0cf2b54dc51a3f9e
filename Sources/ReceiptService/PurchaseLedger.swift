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
    /// What this process already wrote, by source and transaction id, with the signing time it wrote: a receipt
    /// validated again (backends re-check stored receipts nightly) then costs the ledger a read, not a write.
    private let written = Mutex<[String: Int64]>([:])
    /// Bounds `written`; past it the memory starts over, which only costs writes the ledger ignores anyway.
    static let writtenCapacity = 100_000

    /// A stateless service.
    public static let none = PurchaseLedger(opening: nil)

    /// - Parameter open: makes (connects, migrates) the store; called until it succeeds.
    public init(opening open: (@Sendable () throws(LedgerError) -> any LedgerStore)?) {
        self.open = open
    }

    /// A ledger on a store that is already open (tests, benchmarks).
    public convenience init(store: any LedgerStore) {
        self.init(opening: { store })
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

    /// Records transactions unless this process already recorded each of them from `source` as of the same or a
    /// later signing time; the ledger would keep its newer state anyway, so skipping changes nothing it holds.
    public func record(
        _ transactions: [TransactionFacts], source: TransactionSource, in store: any LedgerStore
    ) throws(LedgerError) {
        func key(_ facts: TransactionFacts) -> String { source.rawValue + " " + facts.transactionID }
        let new = written.withLock { written in
            transactions.filter { facts in written[key(facts)].map { $0 < facts.signedDate } ?? true }
        }
        guard !new.isEmpty else { return }
        try store.record(transactions: new, source: source)
        written.withLock { written in
            if written.count + new.count > Self.writtenCapacity { written.removeAll(keepingCapacity: true) }
            for facts in new { written[key(facts)] = max(written[key(facts)] ?? .min, facts.signedDate) }
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

    /// For `/readyz`: whether the ledger answers now. A stateless service is always ready.
    public var isReachable: Bool {
        guard isConfigured else { return true }
        return (try? withStore { (store) throws(LedgerError) in try store.ping() }) != nil
    }
}
