import TestSupport

@testable import Ledger

/// Where a backend keeps a database, so that a test can open it twice or at another schema version.
enum DatabaseLocation: Sendable {
    case sqlite(path: String)
    case postgres(connectionString: String)

    static func fresh(_ backend: Backend) throws -> DatabaseLocation {
        switch backend {
        case .sqlite: .sqlite(path: Scratch.newPath("ledger.sqlite"))
        case .postgres: .postgres(connectionString: try PostgresCluster.shared.get().newDatabase())
        }
    }

    func open(
        schemaVersion: Int = LedgerSchema.latestVersion, clock: @escaping LedgerClock = TestClock.fixed,
        timeout: Double = LedgerConfiguration.defaultTimeout, linkRules: AccountLinkRules = .transferAlways
    ) throws(LedgerError) -> any LedgerStore {
        switch self {
        case .sqlite(let path):
            try SQLiteLedger(
                path: path, schemaVersion: schemaVersion, timeout: timeout, clock: clock, linkRules: linkRules
            )
        case .postgres(let connectionString):
            try PostgresLedger(
                connectionString: connectionString, poolSize: 4, schemaVersion: schemaVersion, timeout: timeout,
                clock: clock, linkRules: linkRules
            )
        }
    }

    /// A raw connection, for doing to the database what no ledger would.
    func rawConnection() throws(LedgerError) -> any SQLConnection {
        switch self {
        case .sqlite(let path): try SQLiteConnection(path: path)
        case .postgres(let connectionString): try PostgresConnection(connectionString: connectionString)
        }
    }
}
