internal import Dispatch
internal import Synchronization

/// Up to `capacity` connections, each lent to one caller at a time; callers beyond that wait for one to return, at
/// most `timeout` seconds or until the caller's ``LedgerDeadline`` (then `busy`).
///
/// Connections open lazily and stay open. One that reports itself broken is not reused: the next caller opens a
/// fresh one, which is how the ledger comes back by itself after its database returns.
final class ConnectionPool<Connection: PooledConnection>: Sendable {
    private let idle = Mutex<[Connection]>([])
    private let slots: DispatchSemaphore
    private let open: @Sendable (_ deadline: DispatchTime) throws(LedgerError) -> Connection
    private let isClosed = Atomic(false)
    /// `store_timeout`, in seconds: how long one borrower may wait and work.
    let timeout: Double

    init(
        capacity: Int, timeout: Double = LedgerConfiguration.defaultTimeout,
        open: @escaping @Sendable (_ deadline: DispatchTime) throws(LedgerError) -> Connection
    ) {
        precondition(capacity > 0, "a connection pool needs at least one connection")
        slots = DispatchSemaphore(value: capacity)
        self.timeout = timeout
        self.open = open
    }

    /// Lends a connection to `body`; `reused` says whether it served an earlier caller (and so may be stale).
    /// `deadline` (`timeout` from now) bounds the wait for a connection and the opening of a new one; `body` is
    /// handed it to bound its own work.
    func withConnection<Result>(
        _ body: (_ connection: Connection, _ reused: Bool, _ deadline: DispatchTime) throws(LedgerError) -> Result
    ) throws(LedgerError) -> Result {
        guard !isClosed.load(ordering: .acquiring) else { throw LedgerError(.unavailable, "the ledger is closed") }
        let deadline = LedgerDeadline.bounding(DispatchTime.now() + timeout)
        // Without a limit, a database that stopped answering would gather every caller here for as long as it hangs.
        // A full pool is busy, not down: those holding the connections learn (and report) whether the database hangs.
        guard slots.wait(timeout: deadline) == .success else {
            throw LedgerError(.busy, "every database connection stayed taken by other requests for \(timeout) s")
        }
        defer { slots.signal() }
        let connection: Connection
        let reused: Bool
        if let pooled = idle.withLock({ $0.popLast() }), pooled.isUsable {
            (connection, reused) = (pooled, true)
        } else {
            (connection, reused) = (try open(deadline), false)
        }
        defer {
            if connection.isUsable {
                idle.withLock { idle in if !isClosed.load(ordering: .acquiring) { idle.append(connection) } }
            }
        }
        return try body(connection, reused, deadline)
    }

    /// Closes the idle connections now and each lent one as it comes back (the pool holds the only reference, so
    /// dropping one closes it); later callers fail `unavailable`.
    func close() {
        isClosed.store(true, ordering: .releasing)
        // Under the lock, after the flag: a connection returned concurrently is either not kept or removed here.
        idle.withLock { $0.removeAll() }
    }
}

/// A connection a pool can tell is still worth keeping.
protocol PooledConnection: SQLConnection, Sendable {
    var isUsable: Bool { get }
}

extension SQLiteConnection: PooledConnection {
    var isUsable: Bool { !isClosed }
}
