internal import Dispatch
internal import Glibc
internal import Synchronization

/// The PostgreSQL connections that write, with group commit.
///
/// Every COMMIT waits for the server to flush its write-ahead log; one connection per request makes each request pay
/// a flush and the server serialize them. Callers enqueue their work and block; each of a few writer connections, on
/// its own serial queue, drains what is pending into one transaction (each piece in its own savepoint, so a piece that
/// fails, a unique violation say, is undone alone), commits once, then wakes each caller with its own result. Pieces
/// of a group run in arrival order, so a duplicate uuid later in a group sees the earlier insert.
///
/// Other groups (this process's other connections, or replicas sharing the database) write beside it: the pieces take
/// the same row locks as before, only held until their group commits. Two groups whose pieces lock the same rows in
/// different orders would deadlock, and PostgreSQL takes its deadlock_timeout (1 s) to pick a victim, holding both
/// groups' callers meanwhile. So a piece after a group's first waits at most `lockWait` for a lock another transaction
/// holds, then steps aside: it is undone alone, the group commits without it, releasing what it held, and the piece
/// runs first in the next group, where it holds nothing but what it takes itself. A piece that loses a deadlock or a
/// serialization conflict steps aside the same way. Only past store_timeout does it fail on its own (`unavailable`,
/// reason `locked`). A group whose connection is lost or stops answering fails every caller `unavailable` (nothing of
/// it was committed) and the next group connects anew.
final class PostgresWriter: Sendable {
    /// How many writes one group holds at most, and how many may wait beyond the group being written before a new
    /// one is turned away `busy`: a server that stalls must not gather callers (and their memory) without bound.
    struct Limits: Sendable {
        var groupSize = 256
        var pending = 512
        /// Writer connections. A group waits on round trips to the server statement by statement; more than one lets
        /// the server work on one group while receiptd prepares the next.
        var writers = PostgresWriter.defaultWriters
        /// How long a piece after its group's first waits for a lock held elsewhere before it steps aside. Longer
        /// than most groups take to commit, so that a piece behind another group's write to the same account usually
        /// waits it out rather than run twice; far shorter than a deadlock's second.
        var lockWait = 0.05
    }

    /// As many as the reading pool's default: the server sees no more concurrent writers than it did before group
    /// commit (measured: 2, 4 and 8 within the noise of this 2-core machine, BENCHMARKS.md).
    static let defaultWriters = 4

    /// How long the writer waits for the callers it just woke to come back (in 100 µs steps), as in ``SQLiteWriter``.
    static let lingerSteps = 10

    private let limits: Limits
    /// store_timeout: the longest one group may take, connecting included.
    private let timeout: Double
    private let connect: @Sendable (_ deadline: DispatchTime) throws(LedgerError) -> PostgresConnection
    private let lanes: [Lane]
    private let state: Mutex<State>

    private struct State {
        var pending: [Queued] = []
        /// Lanes not draining, ready to take the next write.
        var idleLanes: [Int]
        var isClosed = false
    }

    /// A write waiting for its group, and the instant after which it is not tried again: its caller has stopped
    /// waiting by then.
    private struct Queued {
        let write: any GroupedWrite
        let giveUpAt: DispatchTime
    }

    /// One writer connection and the serial queue it is used on.
    private final class Lane: Sendable {
        let queue: DispatchQueue
        /// Touched only on `queue`; the mutex makes that visible to the compiler.
        let connection = Mutex<PostgresConnection?>(nil)

        init(_ number: Int) { queue = DispatchQueue(label: "receiptd.ledger.postgres-writer-\(number)") }
    }

    init(
        timeout: Double, limits: Limits = Limits(),
        connect: @escaping @Sendable (_ deadline: DispatchTime) throws(LedgerError) -> PostgresConnection
    ) {
        self.timeout = timeout
        self.limits = limits
        self.connect = connect
        let count = max(1, limits.writers)
        lanes = (0..<count).map(Lane.init)
        state = Mutex(State(idleLanes: Array((0..<count).reversed())))
    }

    /// Runs `body` in the next group transaction and returns after that transaction committed.
    func write<Result: Sendable>(
        _ body: @escaping @Sendable (any SQLConnection) throws(LedgerError) -> Result
    ) throws(LedgerError) -> Result {
        let write = PendingWrite(body)
        let idleLane = try state.withLock { (state) throws(LedgerError) -> Int? in
            guard !state.isClosed else { throw LedgerError(.unavailable, "the ledger is closed") }
            guard state.pending.count < limits.pending else {
                throw LedgerError(.busy, "\(limits.pending) writes already wait for the PostgreSQL writer")
            }
            state.pending.append(Queued(write: write, giveUpAt: .now() + timeout))
            return state.idleLanes.popLast()
        }
        if let idleLane { lanes[idleLane].queue.async { self.drain(lane: idleLane) } }
        // A group may start just before the caller's wait does and take all of store_timeout: a little more than that
        // lets its own verdict (a statement timeout, a lost connection) reach the caller first.
        return try write.wait(timeout: timeout + 0.5, database: "PostgreSQL")
    }

    /// Writes queued behind the group being written: for tests that must know a write reached the queue.
    var pendingCount: Int { state.withLock { $0.pending.count } }

    /// Refuses new writes, lets the queued ones commit, then closes the connection.
    func close() {
        state.withLock { $0.isClosed = true }
        // Each queue is serial: this runs after the drain that takes the writes queued before the flag was set.
        for lane in lanes { lane.queue.sync { lane.connection.withLock { $0 = nil } } }
    }

    private func drain(lane: Int) {
        var previousGroupSize = 0
        while true {
            if previousGroupSize > 1 { awaitReturningWriters(previousGroupSize) }
            let group: [Queued] = state.withLock { state in
                guard !state.pending.isEmpty else {
                    state.idleLanes.append(lane)
                    return []
                }
                let count = min(state.pending.count, limits.groupSize)
                let group = Array(state.pending.prefix(count))
                state.pending.removeFirst(count)
                return group
            }
            if group.isEmpty { return }
            commit(group, on: lanes[lane])
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

    private func commit(_ group: [Queued], on lane: Lane) {
        let deadline = DispatchTime.now() + timeout
        var failures: [Int: LedgerError] = [:]
        var steppedAside = Set<Int>()
        do throws(LedgerError) {
            let connection = try begin(on: lane, until: deadline)
            for (index, queued) in group.enumerated() {
                if index == 1 {
                    // From here on the group holds locks of its own, and a wait may close a cycle with another group.
                    try connection.executeWithNext("SET LOCAL lock_timeout = \(lockWaitMilliseconds)", [])
                }
                guard let failure = try run(queued.write, on: connection) else { continue }
                if failure.reason == .locked && DispatchTime.now() < queued.giveUpAt {
                    steppedAside.insert(index)
                } else {
                    failures[index] = failure
                }
            }
            try connection.execute("COMMIT")
        } catch {
            let failure = groupFailure(error)
            lane.connection.withLock { connection in
                guard let open = connection else { return }
                if open.isUsable { try? open.execute("ROLLBACK") }
                if !open.isUsable { connection = nil }
            }
            for queued in group { queued.write.finish(failure) }
            return
        }
        if !steppedAside.isEmpty {
            // At the queue's front, so this lane's next group starts with them.
            let again = steppedAside.sorted().map { group[$0] }
            state.withLock { $0.pending.insert(contentsOf: again, at: 0) }
        }
        for (index, queued) in group.enumerated() where !steppedAside.contains(index) {
            queued.write.finish(failures[index])
        }
    }

    private var lockWaitMilliseconds: Int { max(1, Int((limits.lockWait * 1000).rounded(.up))) }

    /// The writer's connection with a transaction begun, connecting first if there is none or it broke.
    private func begin(on lane: Lane, until deadline: DispatchTime) throws(LedgerError) -> PostgresConnection {
        let (connection, reused) = try lane.connection.withLock { (connection) throws(LedgerError) in
            if let open = connection, open.isUsable { return (open, true) }
            connection = nil
            let fresh = try connect(deadline)
            connection = fresh
            return (fresh, false)
        }
        connection.deadline = deadline
        do throws(LedgerError) {
            try connection.execute("BEGIN")
        } catch where reused && !connection.isUsable && error.reason != .timeout {
            // An idle connection learns that the server restarted only when it next talks to it; nothing was sent but
            // BEGIN, so reconnecting and starting over is safe.
            try connection.reset()
            try connection.execute("BEGIN")
        }
        return connection
    }

    /// Runs one piece in its own savepoint; throws only when the whole group's transaction is lost. Returns the
    /// piece's failure, undone since, including that of statements it sent with its release.
    ///
    /// The savepoint goes with the piece's first statement and its release carries the statements the piece sent
    /// with the next (``PostgresConnection/executeWithNext(_:_:)``): a piece of a group costs no round trip of its
    /// own, and a failure stays its own.
    private func run(_ write: any GroupedWrite, on connection: PostgresConnection) throws(LedgerError) -> LedgerError? {
        try connection.executeWithNext("SAVEPOINT grouped_write", [])
        var failure = write.run(connection)
        if failure == nil {
            do throws(LedgerError) {
                try connection.execute("RELEASE grouped_write")
                return nil
            } catch {
                failure = error
            }
        }
        guard let failure else { return nil }
        // A lost or abandoned connection takes the transaction, and every piece before this one, with it.
        guard connection.isUsable else { throw failure }
        // Rolling back to the savepoint releases what the piece locked, so a group it waited on can go on.
        try connection.execute("ROLLBACK TO grouped_write")
        try connection.execute("RELEASE grouped_write")
        return failure
    }

    /// What the callers of a group that did not commit are told: their work is not stored, and the database, not their
    /// call, is at fault.
    private func groupFailure(_ error: LedgerError) -> LedgerError {
        guard error.code != .unavailable else { return error }
        return LedgerError(
            .unavailable, "the PostgreSQL group transaction did not commit: \(error.message)",
            reason: error.reason ?? .error)
    }
}
