internal import Dispatch

/// The ledger in a PostgreSQL database: a few libpq connections write with group commit (``PostgresWriter``), a small
/// pool of others reads.
///
/// Several receiptd processes may share one database: claims and notification uuids are decided by primary keys, and
/// migrations take an advisory lock. When the server goes away, calls fail with `unavailable`; the next call after it
/// returns reconnects by itself.
public final class PostgresLedger: LedgerStore {
    let records: LedgerRecords<PostgresDatabase>

    /// Connects, migrates the schema, and keeps up to `poolSize` reading connections and the writer's connections open.
    ///
    /// - Parameter timeout: the longest a call waits for a connection and for each transaction's answers, in
    ///   seconds; also the server's `statement_timeout` unless the connection string's `options` set one.
    /// - Parameter linkRules: what decides a link to an account that another account owns (see Accounts.swift).
    /// - Parameter outbox: which events each write implies and which webhooks want them (see Outbox.swift).
    public convenience init(
        connectionString: String, poolSize: Int = 4, timeout: Double = LedgerConfiguration.defaultTimeout,
        clock: @escaping LedgerClock = unixMillisecondsNow, linkRules: AccountLinkRules = .transferAlways,
        outbox: OutboxRules = .none, appleCalls: AppleCallRules = .none
    ) throws(LedgerError) {
        try self.init(
            connectionString: connectionString, poolSize: poolSize, schemaVersion: LedgerSchema.latestVersion,
            timeout: timeout, clock: clock,
            linkRules: linkRules, outbox: outbox, appleCalls: appleCalls
        )
    }

    /// `schemaVersion` below the latest exists for migration tests.
    /// `writerLimits` below the defaults exist for tests of a full writer queue.
    init(
        connectionString: String, poolSize: Int, schemaVersion: Int,
        timeout: Double = LedgerConfiguration.defaultTimeout, clock: @escaping LedgerClock,
        linkRules: AccountLinkRules = .transferAlways, outbox: OutboxRules = .none,
        appleCalls: AppleCallRules = .none, writerLimits: PostgresWriter.Limits = PostgresWriter.Limits()
    ) throws(LedgerError) {
        try PostgresConnection.checkParses(connectionString)
        let connect: @Sendable (DispatchTime) throws(LedgerError) -> PostgresConnection = { deadline throws(LedgerError) in
            try PostgresConnection(connectionString: connectionString, timeout: timeout, deadline: deadline)
        }
        let database = PostgresDatabase(
            pool: ConnectionPool(capacity: poolSize, timeout: timeout, open: connect),
            writer: PostgresWriter(timeout: timeout, limits: writerLimits, connect: connect)
        )
        try database.transaction(begin: "BEGIN") { connection throws(LedgerError) in
            // Two processes starting at once must not both create the tables.
            try connection.execute("SELECT pg_advisory_xact_lock($1)", [.integer(Self.migrationLock)])
            try LedgerSchema.migrate(connection, to: schemaVersion)
        }
        records = LedgerRecords(
            database: database, clock: clock, linkRules: linkRules, outbox: outbox, appleCallRules: appleCalls)
    }

    /// An arbitrary constant naming the ledger's migration lock among the database's advisory locks.
    static let migrationLock: Int64 = 0x7265_6365_6970_7464

    public func checkWritable() throws(LedgerError) { try records.checkWritable() }

    /// PostgreSQL finds its own damage on the pages a statement reads; a read that answers is all that can be asked.
    public func checkIntegrity() throws(LedgerError) { try records.ping() }

    /// Lets the queued writes commit, then closes the writer's connection and the pool's (each one in use as it comes
    /// back); later calls fail `unavailable`.
    public func close() throws(LedgerError) {
        records.database.writer.close()
        records.database.pool.close()
    }
}

struct PostgresDatabase: LedgerDatabase {
    let pool: ConnectionPool<PostgresConnection>
    let writer: PostgresWriter

    func write<Result: Sendable>(
        _ body: @escaping @Sendable (any SQLConnection) throws(LedgerError) -> Result
    ) throws(LedgerError) -> Result {
        // READ COMMITTED (the writer's BEGIN): after waiting on a conflicting insert, the read-back sees the row that
        // won.
        try writer.write(body)
    }

    func read<Result>(_ body: (any SQLConnection) throws(LedgerError) -> Result) throws(LedgerError) -> Result {
        try transaction(begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", body)
    }

    func transaction<Result>(
        begin: String, _ body: (any SQLConnection) throws(LedgerError) -> Result
    ) throws(LedgerError) -> Result {
        try pool.withConnection { connection, reused, deadline throws(LedgerError) in
            // One deadline for the whole transaction: a request waits at most store_timeout, however many statements.
            connection.deadline = deadline
            do throws(LedgerError) {
                try connection.execute(begin)
            } catch where reused && !connection.isUsable && error.reason != .timeout {
                // A pooled connection learns that the server restarted only when it next talks to it; nothing was
                // sent but BEGIN, so reconnecting and starting over is safe.
                try connection.reset()
                try connection.execute(begin)
            }
            return try connection.inTransactionAlreadyBegun { () throws(LedgerError) in try body(connection) }
        }
    }
}
