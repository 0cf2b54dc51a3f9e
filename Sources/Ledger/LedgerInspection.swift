internal import Dispatch
internal import Glibc

/// What a ledger database holds, read without migrating it: for `receiptd store status` and `migrate`.
///
/// Opening a ``LedgerStore`` migrates the schema forward, which an operator asking "what version is this?" must not
/// cause: a newer binary's status check would otherwise upgrade a database that older servers (or a rollback) still
/// need at its old version.
public struct LedgerInspection: Sendable, Hashable {
    /// The schema version this build of receiptd migrates databases to.
    public static var supportedSchemaVersion: Int { LedgerSchema.latestVersion }

    /// The schema version the database is at; 0 when it holds no ledger yet.
    public var schemaVersion: Int
    /// Rows per table, from one snapshot; nil unless the schema is this build's (an older one lacks columns, a newer
    /// one is not understood).
    public var counts: LedgerCounts?
    /// What SQLite's `quick_check` finds wrong with the file; empty when it is sound (and always for PostgreSQL).
    public var problems: [String] = []
    /// False when damage kept the schema version from being read: `schemaVersion` 0 then means "unknown", not "no
    /// ledger yet".
    public var isReadable = true

    /// Reads the version and counts of the configured database, and for SQLite runs `quick_check`; nil for a SQLite
    /// file that does not exist yet (nothing is created). Fails `unavailable` when the database cannot be reached, or
    /// when a missing SQLite file could not be created (the message says why).
    static let timeout: Double = 60

    public static func read(_ configuration: LedgerConfiguration) throws(LedgerError) -> LedgerInspection? {
        switch configuration {
        case .sqlite(let path):
            guard access(path, F_OK) == 0 else {
                guard errno == ENOENT || errno == ENOTDIR else {
                    throw LedgerError(.unavailable, "cannot reach \(path): \(String(cString: strerror(errno)))")
                }
                if let problem = SQLiteFile.creationProblem(at: path) {
                    throw LedgerError(.unavailable, "\(path) does not exist and cannot be created: \(problem)")
                }
                return nil
            }
            let connection: SQLiteConnection
            do throws(LedgerError) {
                connection = try SQLiteConnection(path: path)
            } catch where error.reason == .corrupt {
                // Not a database at all (SQLITE_NOTADB): damaged, as quick_check would say, not unreachable.
                return LedgerInspection(schemaVersion: 0, counts: nil, problems: [error.message], isReadable: false)
            }
            defer { connection.close() }
            let problems = connection.integrityProblems()
            // A damaged file may fail the counts too: its problems are the answer then.
            guard problems.isEmpty else {
                var inspection = (try? read(connection))
                    ?? LedgerInspection(schemaVersion: 0, counts: nil, isReadable: false)
                inspection.problems = problems
                return inspection
            }
            return try read(connection)
        case .postgres(let connectionString):
            // A command run by hand on a possibly large ledger: bounded, but far above a request's store_timeout.
            let connection = try PostgresConnection(
                connectionString: connectionString, timeout: Self.timeout, deadline: .now() + Self.timeout)
            connection.deadline = .now() + Self.timeout
            // One snapshot for every count, and nothing written.
            return try connection.inTransaction(begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") {
                () throws(LedgerError) in
                let table = try connection.query("SELECT to_regclass('ledger_schema') IS NOT NULL", [])
                let exists = table.first?.string(0).map { $0 == "t" || $0 == "1" } ?? false
                return try read(connection, hasVersionTable: exists)
            }
        }
    }

    /// The version and counts of a SQLite database, from one snapshot.
    static func read(_ connection: SQLiteConnection) throws(LedgerError) -> LedgerInspection {
        try connection.inTransaction(begin: "BEGIN") { () throws(LedgerError) in
            let tables = try connection.query(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ledger_schema'", [])
            return try read(connection, hasVersionTable: tables.first?.int64(0) == 1)
        }
    }

    private static func read(
        _ connection: any SQLConnection, hasVersionTable: Bool
    ) throws(LedgerError) -> LedgerInspection {
        guard hasVersionTable else { return LedgerInspection(schemaVersion: 0, counts: nil) }
        let rows = try connection.query("SELECT version FROM ledger_schema", [])
        guard let row = rows.first else { return LedgerInspection(schemaVersion: 0, counts: nil) }
        guard rows.count == 1, let version = row.int(0) else {
            throw LedgerError(.queryFailed, "ledger_schema must hold exactly one version row")
        }
        guard version == LedgerSchema.latestVersion else {
            return LedgerInspection(schemaVersion: version, counts: nil)
        }
        return LedgerInspection(schemaVersion: version, counts: try LedgerStatements.counts(connection))
    }
}
