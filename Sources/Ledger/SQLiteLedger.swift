/// The ledger in one SQLite file (WAL, `synchronous=FULL`): one grouped writer and a few readers.
public final class SQLiteLedger: LedgerStore {
    /// Readers in WAL mode never block the writer or each other.
    static let readerCount = 4

    let records: LedgerRecords<SQLiteDatabase>

    /// Opens (creating if missing) the database at `path` and migrates it to the current schema.
    public convenience init(path: String, clock: @escaping LedgerClock = unixMillisecondsNow) throws(LedgerError) {
        try self.init(path: path, schemaVersion: LedgerSchema.latestVersion, clock: clock)
    }

    /// `schemaVersion` below the latest exists for migration tests.
    init(path: String, schemaVersion: Int, clock: @escaping LedgerClock) throws(LedgerError) {
        let writerConnection = try SQLiteConnection(path: path)
        try writerConnection.inTransaction(begin: "BEGIN IMMEDIATE") { () throws(LedgerError) in
            try LedgerSchema.migrate(writerConnection, to: schemaVersion)
        }
        let database = SQLiteDatabase(
            writer: SQLiteWriter(connection: writerConnection),
            readers: ConnectionPool(capacity: Self.readerCount) { () throws(LedgerError) in
                try SQLiteConnection(path: path)
            }
        )
        records = LedgerRecords(database: database, clock: clock)
    }

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

    public func schemaVersion() throws(LedgerError) -> Int { try records.schemaVersion() }

    public func counts() throws(LedgerError) -> LedgerCounts { try records.counts() }

    /// Writes a consistent copy of the database to a new file at `path` while the ledger keeps serving; fails if
    /// `path` exists.
    public func backup(to path: String) throws(LedgerError) {
        // VACUUM INTO reads one snapshot like any reader, so concurrent commits neither block it nor tear the copy.
        try records.database.readers.withConnection { connection, _ throws(LedgerError) in
            try connection.execute("VACUUM INTO $1", [.text(path)])
        }
    }
}

struct SQLiteDatabase: LedgerDatabase {
    let writer: SQLiteWriter
    let readers: ConnectionPool<SQLiteConnection>

    func write<Result: Sendable>(
        _ body: @escaping @Sendable (any SQLConnection) throws(LedgerError) -> Result
    ) throws(LedgerError) -> Result {
        try writer.write(body)
    }

    func read<Result>(_ body: (any SQLConnection) throws(LedgerError) -> Result) throws(LedgerError) -> Result {
        try readers.withConnection { connection, _ throws(LedgerError) in
            try connection.inTransaction(begin: "BEGIN") { () throws(LedgerError) in try body(connection) }
        }
    }
}
