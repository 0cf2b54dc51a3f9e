internal import Glibc
internal import Synchronization

/// The ledger in one SQLite file (WAL, `synchronous=FULL`): one grouped writer and a few readers.
///
/// Opening it runs `quick_check`, so that a damaged file is refused at start-up rather than found by a write;
/// ``close()`` leaves the `.sqlite` file alone holding every commit, without `-wal` or `-shm`.
public final class SQLiteLedger: LedgerStore {
    /// Readers in WAL mode never block the writer or each other.
    static let readerCount = 4
    /// The writer's page cache, in KiB: room for the hot pages of the indexes every write touches.
    static let writerCacheKibibytes = 32 * 1024
    /// Log pages after which a commit folds the log into the file (about 40 MB of log at 4 KiB pages).
    static let checkpointPages = 10_000

    let records: LedgerRecords<SQLiteDatabase>
    private let path: String
    private let heartbeats = Atomic<Int32>(0)
    private let foreignCommits: SQLiteForeignCommits
    /// Free space below which the volume counts as full: SQLite may still rewrite pages of its write-ahead log there
    /// (so small writes, and a heartbeat, succeed), while a write that needs new pages fails.
    static let minimumFreeBytes: UInt64 = 1 << 20

    /// Opens (creating if missing) the database at `path`, checks it (`corrupt` when `quick_check` finds damage)
    /// and migrates it to the current schema.
    ///
    /// - Parameter timeout: the longest a call waits for a lock, a reader or the writer, in seconds.
    /// - Parameter linkRules: what decides a link to an account that another account owns (see Accounts.swift).
    /// - Parameter outbox: which events each write implies and which webhooks want them (see Outbox.swift).
    public convenience init(
        path: String, timeout: Double = LedgerConfiguration.defaultTimeout,
        clock: @escaping LedgerClock = unixMillisecondsNow, linkRules: AccountLinkRules = .transferAlways,
        outbox: OutboxRules = .none, appleCalls: AppleCallRules = .none
    ) throws(LedgerError) {
        try self.init(
            path: path, schemaVersion: LedgerSchema.latestVersion, timeout: timeout, clock: clock,
            linkRules: linkRules, outbox: outbox, appleCalls: appleCalls
        )
    }

    /// `schemaVersion` below the latest exists for migration tests.
    init(
        path: String, schemaVersion: Int, timeout: Double = LedgerConfiguration.defaultTimeout,
        clock: @escaping LedgerClock, linkRules: AccountLinkRules = .transferAlways, outbox: OutboxRules = .none,
        appleCalls: AppleCallRules = .none
    ) throws(LedgerError) {
        let writerConnection: SQLiteConnection
        do throws(LedgerError) {
            writerConnection = try SQLiteConnection(path: path, timeout: timeout)
        } catch where error.reason == .corrupt {
            // Damage in the schema's own pages stops the first statement, before quick_check can run.
            throw LedgerError(
                .corrupt,
                "the SQLite database at \(path) is damaged: \(error.message); restore a backup "
                    + "(receiptd store restore)",
                reason: .corrupt)
        }
        let problems = writerConnection.integrityProblems()
        guard problems.isEmpty else {
            throw LedgerError(
                .corrupt,
                "the SQLite database at \(path) is damaged: quick_check found \(problems.count) problem"
                    + "\(problems.count == 1 ? "" : "s"), the first: \(problems.prefix(3).joined(separator: "; ")); "
                    + "restore a backup (receiptd store restore)", reason: .corrupt)
        }
        // Every write looks up random keys (uuids, dedupe keys) in indexes that kilobytes of payload per row push out
        // of SQLite's default 2 MB page cache: on the one writer thread each miss was a `pread` (24 per notification
        // with its event). Readers keep the default: there are several, and most of the time idle.
        try writerConnection.execute("PRAGMA cache_size = -\(Self.writerCacheKibibytes)")
        // A notification with its event dirties about twenty pages, most of them index pages that the next writes
        // dirty again; each checkpoint copies every distinct page once. At SQLite's default (1,000 pages) that was a
        // checkpoint every ~50 notifications, on the writer thread, rereading the log and rewriting the same pages.
        try writerConnection.execute("PRAGMA wal_autocheckpoint = \(Self.checkpointPages)")
        // Each write of a group runs in a savepoint, whose statement journal outgrew SQLite's 64 KiB in memory and
        // went to a temporary file, made, written and unlinked on the writer thread: 55 of the 83 `pwrite`s a
        // notification with its event cost. A group of 256 writes journals a few MiB at most.
        try writerConnection.execute("PRAGMA temp_store = MEMORY")
        try writerConnection.inTransaction(begin: "BEGIN IMMEDIATE") { () throws(LedgerError) in
            try LedgerSchema.migrate(writerConnection, to: schemaVersion)
        }
        let foreignCommits = try SQLiteForeignCommits(path: path, timeout: timeout, writer: writerConnection)
        let database = SQLiteDatabase(
            writer: SQLiteWriter(connection: writerConnection, timeout: timeout, foreignCommits: foreignCommits),
            readers: ConnectionPool(capacity: Self.readerCount, timeout: timeout) { _ throws(LedgerError) in
                try SQLiteConnection(path: path, timeout: timeout)
            }
        )
        records = LedgerRecords(
            database: database, clock: clock, linkRules: linkRules, outbox: outbox, appleCallRules: appleCalls)
        self.path = path
        self.foreignCommits = foreignCommits
    }

    /// A real write through the writer (a heartbeat counter in the database header, logged and fsynced like any
    /// commit: SQLite skips an `UPDATE` that changes no byte), then the volume's free space, and for a file once found
    /// damaged, `quick_check`.
    public func checkWritable() throws(LedgerError) {
        let beat = heartbeats.add(1, ordering: .relaxed).newValue & Int32.max
        try records.database.writer.write { connection throws(LedgerError) in
            try connection.execute("PRAGMA user_version = \(beat)")
        }
        var volume = statvfs()
        if statvfs(SQLiteFile.folder(of: path), &volume) == 0 {
            let free = UInt64(volume.f_bavail) * UInt64(volume.f_frsize)
            guard free >= Self.minimumFreeBytes else {
                throw LedgerError(
                    .unavailable,
                    "the volume of \(path) has \(free / 1024) KiB free, under the \(Self.minimumFreeBytes >> 10) KiB a "
                        + "write may need: free space on it", reason: .diskFull)
            }
        }
    }

    public func checkIntegrity() throws(LedgerError) {
        try records.database.readers.withConnection { connection, _, _ throws(LedgerError) in
            let problems = connection.integrityProblems()
            guard problems.isEmpty else {
                throw LedgerError(
                    .corrupt, "the SQLite database at \(path) fails quick_check: \(problems.prefix(3).joined(separator: "; "))",
                    reason: .corrupt)
            }
        }
    }

    /// Folds the write-ahead log into the database file and closes every connection, after the writes already
    /// queued committed; later calls fail `unavailable`. Fails when the final checkpoint could not complete (the
    /// commits are then still safe in `-wal`, replayed by the next open).
    public func close() throws(LedgerError) {
        // Readers first: the last connection to close is the one that deletes `-wal` and `-shm`.
        records.database.readers.close()
        foreignCommits.close()
        try records.database.writer.close()
    }

    /// Writes a consistent copy of the database to a new file at `path` while the ledger keeps serving; fails if
    /// `path` exists.
    ///
    /// The copy is written under a temporary name in `path`'s folder, flushed, and only then named `path`: an
    /// interrupted backup leaves no file at `path` (a copy cut short would open as an empty or damaged ledger).
    public func backup(to path: String) throws(LedgerError) {
        guard access(path, F_OK) != 0 else { throw LedgerError(.unavailable, "\(path) already exists") }
        let copy = try SQLiteFile.temporary(besides: path, purpose: "partial")
        Glibc.close(copy.descriptor)
        defer { unlink(copy.path) }
        // VACUUM INTO reads one snapshot like any reader, so concurrent commits neither block it nor tear the copy; it
        // accepts an empty file as its target.
        try records.database.readers.withConnection { connection, _, _ throws(LedgerError) in
            try connection.execute("VACUUM INTO $1", [.text(copy.path)])
        }
        try SQLiteFile.synchronize(copy.path)
        try SQLiteFile.publish(copy.path, as: path)
    }
}

extension SQLiteLedger {
    /// A number that grows whenever another connection (the command line, `sqlite3`, a restore: anything but this
    /// ledger's writer) may have committed to the file since it was last read, and stays while only this ledger
    /// wrote: what this process remembers of the file is true only while it stays. Costs one read of SQLite's
    /// `data_version` on a connection of its own, never a wait on the writer.
    public func commitsByOthers() -> UInt64 { foreignCommits.count() }

    /// A number that grows after every write this ledger's writer finished, committed or not (counted once it
    /// ended): what a reader read of the file before it is true only while it stays, and while ``commitsByOthers()``
    /// stays too.
    public func writesByThisLedger() -> UInt64 { records.database.writer.writesFinished }

    /// Runs `sql` on the writer's own connection, outside any transaction: for tests that make the database refuse
    /// writes the way a full disk or a read-only volume would (`PRAGMA max_page_count`, `PRAGMA query_only`).
    func executeOnWriter(_ sql: String) throws(LedgerError) {
        try records.database.writer.outsideTransaction { connection throws(LedgerError) in try connection.execute(sql) }
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
        try readers.withConnection { connection, _, _ throws(LedgerError) in
            try connection.inTransaction(begin: "BEGIN") { () throws(LedgerError) in try body(connection) }
        }
    }
}
