internal import Dispatch
internal import Synchronization

/// Up to `capacity` connections, each lent to one caller at a time; callers beyond that wait for one to return.
///
/// Connections open lazily and stay open. One that reports itself broken is not reused: the next caller opens a
/// fresh one, which is how the ledger comes back by itself after its database returns.
final class ConnectionPool<Connection: PooledConnection>: Sendable {
    private let idle = Mutex<[Connection]>([])
    private let slots: DispatchSemaphore
    private let open: @Sendable () throws(LedgerError) -> Connection

    init(capacity: Int, open: @escaping @Sendable () throws(LedgerError) -> Connection) {
        precondition(capacity > 0, "a connection pool needs at least one connection")
        slots = DispatchSemaphore(value: capacity)
        self.open = open
    }

    /// Lends a connection to `body`; `reused` says whether it served an earlier caller (and so may be stale).
    func withConnection<Result>(
        _ body: (_ connection: Connection, _ reused: Bool) throws(LedgerError) -> Result
    ) throws(LedgerError) -> Result {
        slots.wait()
        defer { slots.signal() }
        let connection: Connection
        let reused: Bool
        if let pooled = idle.withLock({ $0.popLast() }), pooled.isUsable {
            (connection, reused) = (pooled, true)
        } else {
            (connection, reused) = (try open(), false)
        }
        defer {
            if connection.isUsable { idle.withLock { $0.append(connection) } }
        }
        return try body(connection, reused)
    }
}

/// A connection a pool can tell is still worth keeping.
protocol PooledConnection: SQLConnection, Sendable {
    var isUsable: Bool { get }
}

extension SQLiteConnection: PooledConnection {
    var isUsable: Bool { true }
}
