/// The ledger in a PostgreSQL database, over a small pool of libpq connections.
///
/// Several receiptd processes may share one database: claims and notification uuids are decided by primary keys, and
/// migrations take an advisory lock. When the server goes away, calls fail with `unavailable`; the next call after it
/// returns reconnects by itself.
public final class PostgresLedger: LedgerStore {
    let records: LedgerRecords<PostgresDatabase>

    /// Connects, migrates the schema, and keeps up to `poolSize` connections open.
    ///
    /// - Parameter timeout: the longest a call waits for a connection and for each transaction's answers, in
    ///   seconds; also the server's `statement_timeout` unless the connection string's `options` set one.
    /// - Parameter linkRules: what decides a link to an account that another account owns (see Accounts.swift).
    public convenience init(
        connectionString: String, poolSize: Int = 4, timeout: Double = LedgerConfiguration.defaultTimeout,
        clock: @escaping LedgerClock = unixMillisecondsNow, linkRules: AccountLinkRules = .transferAlways
    ) throws(LedgerError) {
        try self.init(
            connectionString: connectionString, poolSize: poolSize, schemaVersion: LedgerSchema.latestVersion,
            timeout: timeout, clock: clock, linkRules: linkRules
        )
    }

    /// `schemaVersion` below the latest exists for migration tests.
    init(
        connectionString: String, poolSize: Int, schemaVersion: Int,
        timeout: Double = LedgerConfiguration.defaultTimeout, clock: @escaping LedgerClock,
        linkRules: AccountLinkRules = .transferAlways
    ) throws(LedgerError) {
        try PostgresConnection.checkParses(connectionString)
        let pool = ConnectionPool(capacity: poolSize, timeout: timeout) { deadline throws(LedgerError) in
            try PostgresConnection(connectionString: connectionString, timeout: timeout, deadline: deadline)
        }
        let database = PostgresDatabase(pool: pool)
        try database.transaction(begin: "BEGIN") { connection throws(LedgerError) in
            // Two processes starting at once must not both create the tables.
            try connection.execute("SELECT pg_advisory_xact_lock($1)", [.integer(Self.migrationLock)])
            try LedgerSchema.migrate(connection, to: schemaVersion)
        }
        records = LedgerRecords(database: database, clock: clock, linkRules: linkRules)
    }

    /// An arbitrary constant naming the ledger's migration lock among the database's advisory locks.
    static let migrationLock: Int64 = 0x7265_6365_6970_7464

    // The store's operations forward to `LedgerRecords`, the one implementation of the ledger's SQL that both
    // backends share; the backends differ only in how they own connections (and SQLite's backup). The forwards stay
    // written out in each: a public protocol requirement cannot be met by an internal default.
    public func record(_ notification: NotificationFacts) throws(LedgerError) -> NotificationWrite {
        try records.record(notification)
    }

    public func record(transactions: [TransactionFacts], source: TransactionSource) throws(LedgerError) {
        try records.record(transactions: transactions, source: source)
    }

    public func record(renewal: RenewalFacts, source: TransactionSource) throws(LedgerError) {
        try records.record(renewal: renewal, source: source)
    }

    public func subscription(originalTransactionID: String) throws(LedgerError) -> SubscriptionFacts? {
        try records.subscription(originalTransactionID: originalTransactionID)
    }

    public func transaction(id: String) throws(LedgerError) -> TransactionRecord? {
        try records.transaction(id: id)
    }

    public func claim(transactionID: String, account: String, at time: Int64) throws(LedgerError) -> ClaimOutcome {
        try records.claim(transactionID: transactionID, account: account, at: time)
    }

    public func transactions(originalTransactionIDs: [String]) throws(LedgerError) -> [TransactionFacts] {
        try records.transactions(originalTransactionIDs: originalTransactionIDs)
    }

    public func renewalInfos(originalTransactionIDs: [String]) throws(LedgerError) -> [RenewalFacts] {
        try records.renewalInfos(originalTransactionIDs: originalTransactionIDs)
    }

    public func notification(uuid: String) throws(LedgerError) -> StoredNotification? {
        try records.notification(uuid: uuid)
    }

    public func ping() throws(LedgerError) { try records.ping() }

    public func checkWritable() throws(LedgerError) { try records.checkWritable() }

    /// PostgreSQL finds its own damage on the pages a statement reads; a read that answers is all that can be asked.
    public func checkIntegrity() throws(LedgerError) { try records.ping() }

    public func schemaVersion() throws(LedgerError) -> Int { try records.schemaVersion() }

    public func counts() throws(LedgerError) -> LedgerCounts { try records.counts() }

    public func registerAppAccountToken(_ token: String, account: String, at time: Int64) throws(LedgerError)
        -> AppAccountTokenOutcome
    {
        try records.registerAppAccountToken(token, account: account, at: time)
    }

    public func link(
        originalTransactionIDs: [String], to account: String, source: AccountLinkSource, at time: Int64
    ) throws(LedgerError) -> [String: AccountLinkOutcome] {
        try records.link(originalTransactionIDs: originalTransactionIDs, to: account, source: source, at: time)
    }

    public func account(_ account: String) throws(LedgerError) -> AccountSnapshot? { try records.account(account) }

    public func owner(originalTransactionID: String) throws(LedgerError) -> String? {
        try records.owner(originalTransactionID: originalTransactionID)
    }

    public func deleteAccount(_ account: String) throws(LedgerError) -> Bool { try records.deleteAccount(account) }

    /// Closes the pool's connections (each one in use as it comes back); later calls fail `unavailable`.
    public func close() throws(LedgerError) { records.database.pool.close() }
}

struct PostgresDatabase: LedgerDatabase {
    let pool: ConnectionPool<PostgresConnection>

    func write<Result: Sendable>(
        _ body: @escaping @Sendable (any SQLConnection) throws(LedgerError) -> Result
    ) throws(LedgerError) -> Result {
        // READ COMMITTED: after waiting on a conflicting insert, the read-back sees the row that won.
        try transaction(begin: "BEGIN", body)
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
