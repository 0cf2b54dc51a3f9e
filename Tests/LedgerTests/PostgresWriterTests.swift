import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Ledger

/// PostgreSQL's group commit: each caller keeps its own answer, a group that cannot commit fails all of its callers,
/// and no wait outlasts store_timeout.
@Suite(.enabled(if: !Backend.skipPostgres))
struct PostgresWriterTests {
    typealias E = AppleEvents

    /// Writes started on their own threads, each remembered under a name with its outcome.
    final class Writes: Sendable {
        private let outcomes = Mutex<[String: Result<Int64, LedgerError>]>([:])
        private let finished = DispatchGroup()

        /// Starts `body` through the ledger's writer; returns once it waits in the writer's queue unless `queues` is
        /// false (the writer is idle and takes it at once).
        func start(
            _ name: String, on ledger: PostgresLedger, queues: Bool = true,
            _ body: @escaping @Sendable (any SQLConnection) throws(LedgerError) -> Int64
        ) throws {
            let writer = ledger.records.database.writer
            let queuedBefore = writer.pendingCount
            finished.enter()
            Thread {
                let outcome = Result { () throws(LedgerError) in try ledger.records.database.write(body) }
                self.outcomes.withLock { $0[name] = outcome }
                self.finished.leave()
            }.start()
            if queues { try waitUntil("\(name) is queued") { writer.pendingCount > queuedBefore } }
        }

        func hasReturned(_ name: String) -> Bool { outcomes.withLock { $0[name] != nil } }

        func all() throws -> [String: Result<Int64, LedgerError>] {
            guard finished.wait(timeout: .now() + 30) == .success else { throw Failure("the writes never returned") }
            return outcomes.withLock { $0 }
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func waitUntil(_ what: String, _ condition: () throws -> Bool) throws {
        for _ in 0..<1000 {
            if try condition() { return }
            usleep(10_000)
        }
        throw Failure("waited 10 s for: \(what)")
    }

    func waitUntil(_ what: String, _ condition: () throws -> Bool) throws { try Self.waitUntil(what, condition) }

    /// A ledger on a new database with a `probe` table, and a raw connection holding `gate` locked: the first write
    /// that reads `gate` holds the writer until ``openGate`` so that the writes after it queue into one group.
    struct GatedLedger {
        let ledger: PostgresLedger
        let connectionString: String
        let gatekeeper: PostgresConnection

        /// One writer connection, so that the writes after the gate wait in its queue.
        init(timeout: Double = 5, limits: PostgresWriter.Limits = PostgresWriter.Limits(writers: 1)) throws {
            connectionString = try PostgresCluster.shared.get().newDatabase()
            ledger = try PostgresLedger(
                connectionString: connectionString, poolSize: 2, schemaVersion: LedgerSchema.latestVersion,
                timeout: timeout, clock: TestClock.fixed, writerLimits: limits)
            gatekeeper = try PostgresConnection(connectionString: connectionString, timeout: 30)
            try gatekeeper.execute("CREATE TABLE probe (id integer PRIMARY KEY)")
            try gatekeeper.execute("CREATE TABLE gate (id integer)")
            try gatekeeper.execute("BEGIN")
            try gatekeeper.execute("LOCK TABLE gate IN ACCESS EXCLUSIVE MODE")
        }

        /// Starts the write that waits at the gate, and returns once it does.
        func holdWriter(_ writes: Writes) throws {
            try writes.start("gate", on: ledger, queues: false) { connection throws(LedgerError) in
                try connection.query("SELECT count(*) FROM gate", []).first?.int64(0) ?? -1
            }
            try PostgresWriterTests.waitUntil("the writer waits at the gate") {
                // pg_locks shows the whole cluster, where other tests wait at their own gates.
                try gatekeeper.query(
                    """
                    SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'gate'::regclass
                    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    """, []
                ).first?.int64(0) == 1
            }
        }

        func openGate() throws { try gatekeeper.execute("COMMIT") }

        /// Another transaction, holding the `probe` row 2 (committed first) locked until it ends.
        func transactionHoldingRow2() throws -> PostgresConnection {
            let other = try PostgresConnection(connectionString: connectionString, timeout: 30)
            try other.execute("INSERT INTO probe VALUES (2)")
            try other.execute("BEGIN")
            #expect(try other.query("SELECT id FROM probe WHERE id = 2 FOR UPDATE", []).count == 1)
            return other
        }

        func probeIDs() throws -> [Int64] {
            try gatekeeper.query("SELECT id FROM probe ORDER BY id", []).compactMap { $0.int64(0) }
        }
    }

    static func insert(_ id: Int64) -> @Sendable (any SQLConnection) throws(LedgerError) -> Int64 {
        { connection throws(LedgerError) in
            try connection.query("INSERT INTO probe VALUES ($1) RETURNING txid_current()", [.integer(id)])
                .first?.int64(0) ?? -1
        }
    }

    static func lockRow(_ id: Int64) -> @Sendable (any SQLConnection) throws(LedgerError) -> Int64 {
        { connection throws(LedgerError) in
            try connection.query("SELECT id FROM probe WHERE id = $1 FOR UPDATE", [.integer(id)]).first?.int64(0) ?? -1
        }
    }

    /// Queues a piece named "second" behind the others, lets the group run, and checks that it committed in the same
    /// transaction as the piece named "first"; every piece's outcome.
    static func secondQueuedThenAll(
        _ gated: GatedLedger, _ writes: Writes
    ) throws -> [String: Result<Int64, LedgerError>] {
        try writes.start("second", on: gated.ledger, insert(2))
        try gated.openGate()
        let outcomes = try writes.all()
        let first = try #require(try outcomes["first"]?.get())
        let second = try #require(try outcomes["second"]?.get())
        #expect(first == second, "both pieces should commit in one group transaction")
        return outcomes
    }

    @Test func failingPiece_isRolledBackAlone_andTheRestOfItsGroupCommitsTogether() throws {
        let gated = try GatedLedger()
        let writes = Writes()
        try gated.holdWriter(writes)
        try writes.start("first", on: gated.ledger, Self.insert(1))
        // Not an ON CONFLICT insert: the unique violation aborts what it ran, and only its savepoint undoes that.
        try writes.start("duplicate", on: gated.ledger, Self.insert(1))
        let outcomes = try Self.secondQueuedThenAll(gated, writes)
        #expect(ledgerError { _ = try outcomes["duplicate"]?.get() }?.code == .invalidData)
        #expect(try gated.probeIDs() == [1, 2])
    }

    /// A statement sent with the next one fails only when the piece's RELEASE carries it: the piece, which had
    /// returned, is still the one undone and told, and a piece before it in the group keeps its row.
    @Test func pieceWhoseStatementSentWithTheNextFails_isRolledBackAlone_andToldItsOwnError() throws {
        let gated = try GatedLedger()
        let writes = Writes()
        try gated.holdWriter(writes)
        try writes.start("first", on: gated.ledger, Self.insert(1))
        try writes.start("deferred duplicate", on: gated.ledger) { connection throws(LedgerError) in
            try connection.executeWithNext("INSERT INTO probe VALUES (3)", [])
            try connection.executeWithNext("INSERT INTO probe VALUES (1)", [])
            return 0
        }
        // Its rollback must still run: sent behind the failing statement, a pipeline would skip it.
        try writes.start("fails with statements waiting", on: gated.ledger) { connection throws(LedgerError) in
            try connection.executeWithNext("INSERT INTO probe VALUES (4)", [])
            try connection.executeWithNext("INSERT INTO probe VALUES (1)", [])
            throw LedgerError(.queryFailed, "the piece's own failure")
        }
        let outcomes = try Self.secondQueuedThenAll(gated, writes)
        #expect(ledgerError { _ = try outcomes["deferred duplicate"]?.get() }?.code == .invalidData)
        #expect(ledgerError { _ = try outcomes["fails with statements waiting"]?.get() }?.code == .queryFailed)
        #expect(try gated.probeIDs() == [1, 2])
    }

    /// Several statements sent together answer each in its place, and one that fails stops the ones after it.
    @Test func statementsSentTogether_answerInOrder_andAFailureStopsTheRest() throws {
        let connectionString = try PostgresCluster.shared.get().newDatabase()
        let connection = try PostgresConnection(connectionString: connectionString, timeout: 30)
        try connection.execute("CREATE TABLE probe (id integer PRIMARY KEY)")
        let answers = try connection.queries([
            SQLStatement("INSERT INTO probe VALUES ($1) RETURNING id", [.integer(7)]),
            SQLStatement("SELECT count(*) FROM probe", []),
            SQLStatement("SELECT $1::integer + 1", [.integer(41)]),
        ])
        #expect(answers.map { $0.map { $0.int64(0) } } == [[7], [1], [42]])

        #expect(
            ledgerError {
                _ = try connection.queries([
                    SQLStatement("INSERT INTO probe VALUES ($1)", [.integer(8)]),
                    SQLStatement("INSERT INTO probe VALUES ($1)", [.integer(7)]),
                    SQLStatement("INSERT INTO probe VALUES ($1)", [.integer(9)]),
                ])
            }?.code == .invalidData)
        #expect(connection.isUsable)
        // Outside a transaction the pipeline's statements before the failure commit with it or not at all: the
        // failure rolls back the implicit transaction they share up to the sync.
        #expect(try connection.query("SELECT id FROM probe ORDER BY id", []).compactMap { $0.int64(0) } == [7])
    }

    /// The cycle two replicas' groups close: the group's first piece locks row 1 and a later piece waits for row 2,
    /// which another transaction holds while it waits for row 1. PostgreSQL would break it after its deadlock_timeout
    /// by failing one side; the waiting piece steps aside instead, so both sides commit.
    @Test func pieceWaitingOnALockWhileItsGroupHoldsAnother_stepsAside_soNeitherSideDeadlocks() throws {
        let gated = try GatedLedger()
        try gated.gatekeeper.execute("INSERT INTO probe VALUES (1)")
        let rival = try gated.transactionHoldingRow2()
        let writes = Writes()
        try gated.holdWriter(writes)
        try writes.start("holds 1", on: gated.ledger, Self.lockRow(1))
        try writes.start("waits for 2", on: gated.ledger, Self.lockRow(2))
        try gated.openGate()
        try waitUntil("the group holds row 1 and waits for row 2, or has stepped past the wait") {
            let waiting = try gated.gatekeeper.query(
                """
                SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'
                AND pid IN (SELECT pid FROM pg_stat_activity WHERE datname = current_database())
                """, []
            ).first?.int64(0) ?? 0
            return waiting > 0 || writes.hasReturned("holds 1")
        }
        let rivalOutcome = Result { () throws(LedgerError) in
            try rival.query("SELECT id FROM probe WHERE id = 1 FOR UPDATE", []).count
        }
        let rivalError = ledgerError { _ = try rivalOutcome.get() }
        try rival.execute(rivalError == nil ? "COMMIT" : "ROLLBACK")
        let outcomes = try writes.all()

        #expect(rivalError?.code == nil, "the other side was a deadlock's victim: \(String(describing: rivalError))")
        #expect(try outcomes["holds 1"]?.get() == 1)
        #expect(try outcomes["waits for 2"]?.get() == 2)
    }

    /// Without a cycle too: a piece waiting on another transaction's lock does not hold its group's other callers,
    /// nor the locks they took, until that transaction ends.
    @Test func pieceWaitingOnALockHeldElsewhere_letsTheRestOfItsGroupCommit_thenCommitsItself() throws {
        let gated = try GatedLedger()
        let stranger = try gated.transactionHoldingRow2()
        let writes = Writes()
        try gated.holdWriter(writes)
        try writes.start("before", on: gated.ledger, Self.insert(1))
        try writes.start("waits for 2", on: gated.ledger, Self.lockRow(2))
        try writes.start("after", on: gated.ledger, Self.insert(3))
        try gated.openGate()
        try waitUntil("the pieces around the waiting one commit") {
            writes.hasReturned("before") && writes.hasReturned("after")
        }
        #expect(!writes.hasReturned("waits for 2"))
        try stranger.execute("COMMIT")
        let outcomes = try writes.all()

        #expect(try outcomes["before"]?.get() == outcomes["after"]?.get(), "one group transaction")
        #expect(try outcomes["waits for 2"]?.get() == 2)
        #expect(try gated.probeIDs() == [1, 2, 3])
    }

    @Test func connectionLostMidGroup_failsEveryCallerOfTheGroup_andTheNextGroupReconnects() throws {
        let gated = try GatedLedger()
        let writes = Writes()
        try gated.holdWriter(writes)
        try writes.start("before", on: gated.ledger, Self.insert(10))
        try writes.start("killer", on: gated.ledger) { connection throws(LedgerError) in
            try connection.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            return 0
        }
        try writes.start("after", on: gated.ledger, Self.insert(11))
        try gated.openGate()
        let outcomes = try writes.all()

        #expect((try? outcomes["gate"]?.get()) != nil, "the write at the gate was a group of its own")
        for name in ["before", "killer", "after"] {
            #expect(ledgerError { _ = try outcomes[name]?.get() }?.code == .unavailable, "\(name)")
        }
        #expect(try gated.probeIDs() == [], "nothing of a group that lost its connection is committed")
        #expect(try gated.ledger.record(E.subscribed) == .stored)
    }

    @Test func fullWriterQueue_turnsTheNextWriteAwayBusy_andTheQueuedOnesStillCommit() throws {
        let gated = try GatedLedger(limits: PostgresWriter.Limits(groupSize: 1, pending: 2, writers: 1))
        let writes = Writes()
        try gated.holdWriter(writes)
        try writes.start("first", on: gated.ledger, Self.insert(1))
        try writes.start("second", on: gated.ledger, Self.insert(2))
        let turnedAway = ledgerError { _ = try gated.ledger.record(E.subscribed) }
        #expect(turnedAway?.code == .busy)
        try gated.openGate()
        let outcomes = try writes.all()

        #expect(outcomes.values.allSatisfy { (try? $0.get()) != nil })
        #expect(try gated.probeIDs() == [1, 2])
        #expect(try gated.ledger.record(E.subscribed) == .stored)
    }

    @Test func frozenServer_failsEveryQueuedWriteUnavailable_withinStoreTimeoutAndOneSecond() throws {
        // Its own cluster: freezing the shared one would hang the tests running beside this one.
        let cluster = try PostgresCluster()
        defer {
            try? cluster.thaw()
            PostgresCluster.stopPostmaster(directory: cluster.directory)
        }
        let timeout = 1.0
        let ledger = try PostgresLedger(connectionString: try cluster.newDatabase(), timeout: timeout)
        #expect(try ledger.record(StoreTimeoutTests.notification(0)) == .stored)

        try cluster.freeze()
        let failures = Mutex<[(code: LedgerError.Code?, seconds: Double)]>([])
        onThreads(8) { thread in
            let started = ContinuousClock.now
            let error = ledgerError { _ = try ledger.record(StoreTimeoutTests.notification(thread + 1)) }
            let seconds = (ContinuousClock.now - started) / .seconds(1)
            failures.withLock { $0.append((error?.code, seconds)) }
        }
        let all = failures.withLock { $0 }
        #expect(all.count == 8)
        #expect(all.allSatisfy { $0.code == .unavailable })
        let slowest = all.map(\.seconds).max() ?? 0
        #expect(slowest <= timeout + 1, "a write waited \(slowest) s on a frozen server")

        try cluster.thaw()
        try waitUntil("the ledger writes again") {
            (try? ledger.record(StoreTimeoutTests.notification(100))) != nil
        }
    }

    @Test func replicasWritingTheSameNotificationsConcurrently_storeEachExactlyOnce() throws {
        let connectionString = try PostgresCluster.shared.get().newDatabase()
        // A long timeout: what is tested is that each is stored once, and on a loaded machine groups of two replicas
        // writing the same subscriptions wait on each other's locks.
        let replicas = try (0..<2).map { _ in
            try PostgresLedger(connectionString: connectionString, timeout: 10, clock: TestClock.fixed)
        }
        let unique = 300
        let outcomes = Mutex<[String: [NotificationWrite]]>([:])
        let failures = Mutex<[LedgerError]>([])
        onThreads(16) { thread in
            let ledger = replicas[thread % 2]
            for number in stride(from: thread / 2, to: unique, by: 8) {
                let notification = E.notification(
                    "DID_RENEW", signed: E.t0 + Int64(number), uuid: "uuid-\(number)",
                    transaction: E.transaction(
                        "t\(number)", purchase: E.t0, expires: E.t0 + E.day, signed: E.t0 + Int64(number),
                        original: "o\(number % 10)"))
                // What Apple does with an answer that is not 200: send it again.
                for _ in 0..<5 {
                    do {
                        let outcome = try ledger.record(notification)
                        outcomes.withLock { $0[notification.uuid, default: []].append(outcome) }
                        break
                    } catch let error as LedgerError {
                        failures.withLock { $0.append(error) }
                    } catch {}
                }
            }
        }
        let all = outcomes.withLock { $0 }
        let failed = failures.withLock { $0 }
        #expect(failed.allSatisfy { $0.code == .unavailable }, "\(failed.prefix(3))")
        #expect(all.count == unique)
        #expect(all.values.allSatisfy { $0.sorted { "\($0)" < "\($1)" } == [.duplicate, .stored] })
        let counts = try replicas[0].counts()
        #expect(counts.notifications == Int64(unique))
        #expect(counts.transactions == Int64(unique))
    }
}
