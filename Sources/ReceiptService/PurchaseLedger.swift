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
