internal import Dispatch
internal import Glibc
internal import Synchronization

/// The one SQLite connection that writes, with group commit.
///
/// SQLite allows one writer, and with `synchronous=FULL` every COMMIT waits for an fsync. Callers enqueue their work
/// and block; a serial queue drains everything pending into one transaction (each piece in its own savepoint, so a
/// failing piece is undone alone), commits once, then wakes each caller with its own result. Pieces run in arrival
/// order inside the transaction, so a duplicate uuid later in a group sees the earlier insert.
final class SQLiteWriter: Sendable {
    /// Bounds the work one fsync covers, and so the latency of the first caller in a long queue.
    static let maximumGroupSize = 256
    /// How long the writer waits for the callers it just woke to come back (in 100 µs steps): a fraction of one
    /// fsync, like PostgreSQL's `commit_delay`, so that a steady set of writers shares every commit.
    static let lingerSteps = 10

    private let connection: SQLiteConnection
    private let queue = DispatchQueue(label: "receiptd.ledger.sqlite-writer")
    private let state = Mutex(State())
    /// Grows after every group and every piece of work outside one, committed or not: what a reader remembers of the
    /// file is true only while it stays (see ``SQLiteLedger/writesByThisLedger()``).
    private let finishedWrites = Atomic<UInt64>(0)
    /// Writes waiting for their group beyond which a new one is turned away `busy` at once: a stalled disk must not
    /// gather callers (and their memory) without bound.
    static let maximumPending = 2 * maximumGroupSize
    /// How long a caller waits for its group to commit, however many groups queue before it (a disk that stalls
    /// holds every one of them): store_timeout and a little, so that a lock held elsewhere (`busy_timeout`, which is
    /// store_timeout) fails as `locked` first. A write that commits after its caller gave up is still kept.
    private let timeout: Double
    /// Told of each commit, so that readers can tell this writer's commits from other processes'.
    private let foreignCommits: SQLiteForeignCommits?

    private struct State {
        var pending: [any GroupedWrite] = []
        var draining = false
        var isClosed = false
        /// Why the last group failed to commit; nil once one committed.
        var lastGroupFailure: LedgerError.Reason?
    }

    init(
        connection: SQLiteConnection, timeout: Double = LedgerConfiguration.defaultTimeout,
        foreignCommits: SQLiteForeignCommits? = nil
    ) {
        self.connection = connection
        self.timeout = timeout + 0.5
        self.foreignCommits = foreignCommits
        connection.subscriptionRowsMemo = SubscriptionRowsMemo()
    }

    /// Runs `body` on the writer's connection between groups.
    func outsideTransaction(_ body: (SQLiteConnection) throws(LedgerError) -> Void) throws(LedgerError) {
        let outcome = queue.sync {
            defer {
                // Whatever it ran may have changed any row.
                connection.subscriptionRowsMemo?.forget()
                finishedWrites.add(1, ordering: .sequentiallyConsistent)
            }
            return Swift.Result { () throws(LedgerError) in try body(connection) }
        }
        try outcome.get()
    }

    /// How many groups (and pieces of work outside one) have ended: counted once each ended and before its callers
    /// are woken, so that a read begun before a commit saw a smaller count than every read after its caller returned.
    var writesFinished: UInt64 { finishedWrites.load(ordering: .sequentiallyConsistent) }

    /// Runs `body` in the next group transaction and returns after that transaction committed.
    func write<Result: Sendable>(
        _ body: @escaping @Sendable (any SQLConnection) throws(LedgerError) -> Result
    ) throws(LedgerError) -> Result {
        let write = PendingWrite(body)
        let startDrain = try state.withLock { (state) throws(LedgerError) in
            guard !state.isClosed else { throw LedgerError(.unavailable, "the ledger is closed") }
            guard state.pending.count < Self.maximumPending else {
                throw LedgerError(.busy, "\(Self.maximumPending) writes already wait for the SQLite writer")
            }
            state.pending.append(write)
            if state.draining { return false }
            state.draining = true
            return true
        }
        if startDrain { queue.async { self.drain() } }
        do throws(LedgerError) {
            return try write.wait(timeout: timeout, database: "SQLite")
        } catch where error.reason == .timeout && state.withLock({ $0.lastGroupFailure }) == .locked {
            // Queued behind groups that each waited out busy_timeout for a lock another process holds: the lock is
            // the cause, not the disk.
            throw LedgerError(
                .unavailable, "the SQLite write waited behind writes kept from committing by another process's lock",
                reason: .locked)
        }
    }

    /// Refuses new writes, lets the queued ones commit, then folds the write-ahead log into the database file
    /// (`wal_checkpoint(TRUNCATE)`) and closes the connection: the `.sqlite` file alone then holds every commit.
    /// Fails if the checkpoint could not complete (a reader kept it busy); the commits are still safe in `-wal`.
    func close() throws(LedgerError) {
        let wasClosed = state.withLock { state in
            defer { state.isClosed = true }
            return state.isClosed
        }
        if wasClosed { return }
        // The queue is serial: this runs after the drain that takes the writes queued before the flag was set.
        let checkpoint: Result<Void, LedgerError> = queue.sync {
            defer { connection.close() }
            do throws(LedgerError) {
                // Columns: busy (1 when a reader kept the checkpoint from finishing), log frames, frames copied.
                let busy = try connection.query("PRAGMA wal_checkpoint(TRUNCATE)", []).first?.int64(0)
                guard busy == 0 else {
                    throw LedgerError(.unavailable, "SQLite: the final checkpoint was kept busy by a reader")
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try checkpoint.get()
    }

    private func drain() {
        var previousGroupSize = 0
        while true {
            if previousGroupSize > 1 { awaitReturningWriters(previousGroupSize) }
            let group: [any GroupedWrite] = state.withLock { state in
                guard !state.pending.isEmpty else {
                    state.draining = false
                    return []
                }
                let count = min(state.pending.count, Self.maximumGroupSize)
                let group = Array(state.pending.prefix(count))
                state.pending.removeFirst(count)
                return group
            }
            if group.isEmpty { return }
            commit(group)
            previousGroupSize = group.count
        }
    }

    /// Without this pause the first caller to return after a commit would start a group of one, and groups would
    /// alternate between tiny and large; a single writer (previous group of one) never waits.
    private func awaitReturningWriters(_ expected: Int) {
        for _ in 0..<Self.lingerSteps {
            if state.withLock({ $0.pending.count }) >= expected { return }
            usleep(100)
        }
    }

    private func commit(_ group: [any GroupedWrite]) {
        let failure = runAndCommit(group)
        // Counted before any caller is woken: a caller's next read must see the count its write made grow.
        finishedWrites.add(1, ordering: .sequentiallyConsistent)
        state.withLock { $0.lastGroupFailure = failure?.reason }
        for write in group { write.finish(failure) }
    }

    /// Why the group did not commit, or nil when it did.
    private func runAndCommit(_ group: [any GroupedWrite]) -> LedgerError? {
        do throws(LedgerError) {
            try connection.execute("BEGIN IMMEDIATE")
        } catch {
            return error
        }
        let memo = connection.subscriptionRowsMemo
        // Moves only when another connection committed: what the memo holds may then be stale.
        memo?.beginGroup(dataVersion: try? connection.query("PRAGMA data_version", []).first?.int64(0))
        do throws(LedgerError) {
            for write in group {
                try connection.execute("SAVEPOINT grouped_write")
                if write.run(connection) == nil {
                    try connection.execute("RELEASE grouped_write")
                    memo?.endWrite(released: true)
                } else {
                    memo?.endWrite(released: false)
                    try connection.execute("ROLLBACK TO grouped_write")
                    try connection.execute("RELEASE grouped_write")
                }
            }
            try connection.execute("COMMIT")
            memo?.endGroup(committed: true)
            foreignCommits?.noteCommit(of: connection)
            return nil
        } catch {
            memo?.endGroup(committed: false)
            try? connection.execute("ROLLBACK")
            return error
        }
    }
}
