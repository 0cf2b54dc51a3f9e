#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import JSONText
import Ledger
import ReceiptEngine
import ReceiptService
import CryptoFloor

let storeUsage = """
    usage: receiptd store status [--config PATH] [--json]
           receiptd store backup FILE [--config PATH]
           receiptd store migrate [--config PATH]
           receiptd store restore BACKUP [--config PATH]
           receiptd store sync [--since DATE] [--until DATE] [--app BUNDLE] [--environment Production|Sandbox]
      The ledger named by the config's "store" key, or by RECEIPTD_STORE_POSTGRES, which wins over the file.
      `receiptd store COMMAND --help` for more. The connection string is never printed (it may hold a password).
      exit status: 0 done; 1 no store configured, the database cannot be reached or is damaged, its schema is newer
      than this receiptd, or (restore) a server holds it; 2 usage error
    """

let storeStatusUsage = """
    usage: receiptd store status [--config PATH] [--json]
      Prints the backend, the ledger schema version (the database's and this receiptd's), the rows of each table,
      and for SQLite the result of SQLite's quick_check. Changes nothing: a SQLite file that does not exist is
      reported (or why it could not be created), not created, and an older schema is not migrated. Safe while
      receiptd serve runs.
      config: --config, else RECEIPTD_CONFIG when not empty, else Config/receiptd.json when present;
              RECEIPTD_STORE_POSTGRES wins over the file's store
      --json   one JSON object: backend, path (SQLite only), exists, schema_version, supported_schema_version,
               counts, healthy, problems (what quick_check found)
      exit status: 0 reported, healthy; 1 no store configured, the database cannot be reached, a missing SQLite file
      cannot be created, quick_check finds damage, or its schema is newer than this receiptd; 2 usage error
    """

let storeBackupUsage = """
    usage: receiptd store backup FILE [--config PATH]
      Writes a consistent copy of a SQLite ledger to FILE, a new file, while receiptd serve keeps running (one
      snapshot: notifications committed after it starts are not in the copy, none is half in it). The copy is
      written under a hidden temporary name in FILE's folder and named FILE only once complete and on disk. The copy
      is a complete ledger: receiptd store restore FILE puts it back. A PostgreSQL ledger is backed up with pg_dump
      instead.
      exit status: 0 written; 1 no store configured, no database yet, FILE exists, or the copy failed;
      2 usage error or a PostgreSQL store
    """

let storeMigrateUsage = """
    usage: receiptd store migrate [--config PATH]
      Opens the ledger as receiptd serve does, creating it if missing and migrating its schema forward to this
      receiptd's version in one transaction, and reports the versions before and after. serve does the same at
      start-up; this lets you do it (and see it) first, e.g. after taking a backup.
      exit status: 0 current; 1 no store configured, the database cannot be reached, or its schema is newer than
      this receiptd; 2 usage error
    """

let storeRestoreUsage = """
    usage: receiptd store restore BACKUP [--config PATH]
      Replaces the SQLite ledger that "store" names with a copy of BACKUP (a file from receiptd store backup). Stop
      the server first: restore refuses while a receiptd serve holds the ledger. BACKUP is copied next to the ledger,
      the copy is checked (SQLite's integrity_check, a ledger schema version from 1 to this receiptd's; an older one
      is migrated when the server starts) and renamed into place after the old -wal and -shm are removed, so the
      ledger file is always either the old one or the whole backup. BACKUP itself is only read. A PostgreSQL ledger
      is restored with pg_restore instead.
      config: --config, else RECEIPTD_CONFIG when not empty, else Config/receiptd.json when present
      exit status: 0 restored; 1 no store configured, a server holds the ledger, BACKUP is damaged, not a ledger or
      newer than this receiptd, or a file cannot be read or written (the ledger is then unchanged); 2 usage error or
      a PostgreSQL store
    """

/// `receiptd store status|backup|migrate|restore`: what an operator needs from a shell to look after the ledger.
func runStore(_ arguments: [String]) -> Int32 {
    let rest = Array(arguments.dropFirst())
    switch arguments.first {
    case "status":
        return runStoreCommand("status", rest, usage: storeStatusUsage, flags: ["--json"], positional: 0, storeStatus)
    case "backup": return runStoreCommand("backup", rest, usage: storeBackupUsage, positional: 1, storeBackup)
    case "migrate": return runStoreCommand("migrate", rest, usage: storeMigrateUsage, positional: 0, storeMigrate)
    case "restore": return runStoreCommand("restore", rest, usage: storeRestoreUsage, positional: 1, storeRestore)
    case "sync": return runStoreSync(rest)
    case "--help", "-h", "help":
        print(storeUsage)
        return ExitStatus.success
    case let other?:
        printError(
            "receiptd store: unknown command '\(other)'; expected status, backup, migrate, restore or sync\n\n\(storeUsage)")
        return ExitStatus.usage
    case nil:
        printError("receiptd store: expected status, backup, migrate, restore or sync\n\n\(storeUsage)")
        return ExitStatus.usage
    }
}

/// A failure of a store command: the message names what is wrong; `status` is the exit status.
private struct StoreCommandFailure: Error {
    var message: String
    var status: Int32 = ExitStatus.failure
}

/// The configured ledger, as the store commands see it.
private struct ConfiguredStore {
    var ledger: LedgerConfiguration
    /// For messages: the SQLite path, or "PostgreSQL" (never the connection string).
    var name: String
    var connectionString: String?

    var backend: String {
        switch ledger {
        case .sqlite: "sqlite"
        case .postgres: "postgres"
        }
    }

    var sqlitePath: String? {
        if case .sqlite(let path) = ledger { return path }
        return nil
    }

    /// A ledger error as one line for people; libpq may echo parts of a malformed connection string, so any
    /// password in it is masked.
    func explain(_ error: LedgerError) -> String {
        let message = connectionString.map { redactingSecrets(of: $0, in: error.message) } ?? error.message
        return error.code == .unavailable
            ? "cannot reach the database (\(name)): \(message)" : "\(name): \(message)"
    }
}

private func runStoreCommand(
    _ subcommand: String, _ arguments: [String], usage: String, flags: Set<String> = [], positional: Int,
    _ command: (ArgumentReader, ConfiguredStore) throws(StoreCommandFailure) -> Void
) -> Int32 {
    let name = "receiptd store \(subcommand)"
    let reader: ArgumentReader
    do {
        reader = try ArgumentReader(arguments, options: ["--config"], flags: flags)
        if reader.wantsHelp {
            print(usage)
            return ExitStatus.success
        }
        try reader.expectPositional(atMost: positional)
        guard reader.positional.count == positional else {
            throw UsageError(subcommand == "restore" ? "expected a BACKUP file" : "expected a FILE")
        }
    } catch {
        printError("\(name): \(error)\n\n\(usage)")
        return ExitStatus.usage
    }
    do throws(StoreCommandFailure) {
        try command(reader, try configuredStore(reader.value("--config")))
        return ExitStatus.success
    } catch {
        printError("\(name): \(error.message)")
        return error.status
    }
}

private func configuredStore(_ configPath: String?) throws(StoreCommandFailure) -> ConfiguredStore {
    let configuration: ServiceConfiguration
    do {
        configuration = try ServiceConfiguration.resolve(
            configPath: configPath, environment: ProcessInfo.processInfo.environment,
            fileExists: { FileManager.default.fileExists(atPath: $0) })
    } catch {
        throw StoreCommandFailure(message: error.description)
    }
    switch configuration.store {
    case nil:
        let source = configuration.sourcePath.map { "config \($0)" } ?? "the default configuration (no config file)"
        throw StoreCommandFailure(
            message: "no store configured: \(source) has no \"store\" key and RECEIPTD_STORE_POSTGRES is not set")
    case .sqlite(let path)?:
        return ConfiguredStore(ledger: .sqlite(path: path), name: "SQLite \(path)", connectionString: nil)
    case .postgres(let connectionString)?:
        return ConfiguredStore(
            ledger: .postgres(connectionString: connectionString), name: "PostgreSQL",
            connectionString: connectionString)
    }
}

private func inspect(_ store: ConfiguredStore) throws(StoreCommandFailure) -> LedgerInspection? {
    let inspection: LedgerInspection?
    do {
        inspection = try LedgerInspection.read(store.ledger)
    } catch {
        throw StoreCommandFailure(message: store.explain(error))
    }
    let supported = LedgerInspection.supportedSchemaVersion
    if let inspection, inspection.schemaVersion > supported {
        throw StoreCommandFailure(
            message: "\(store.name): the database has ledger schema version \(inspection.schemaVersion), newer than "
                + "version \(supported) of this receiptd; upgrade receiptd or restore a backup")
    }
    return inspection
}

// MARK: - status

private func storeStatus(_ reader: ArgumentReader, _ store: ConfiguredStore) throws(StoreCommandFailure) {
    let inspection = try inspect(store)
    let supported = LedgerInspection.supportedSchemaVersion
    let version = inspection?.schemaVersion ?? 0
    let problems = inspection?.problems ?? []
    func failIfDamaged() throws(StoreCommandFailure) {
        guard let first = problems.first else { return }
        throw StoreCommandFailure(
            message: "\(store.name) is damaged: quick_check found \(problems.count == 1 ? "" : "\(problems.count) problems, the first: ")"
                + "\(first); restore a backup (receiptd store restore)")
    }
    if reader.isSet("--json") {
        var members: [(key: String, value: JSONValue)] = [("backend", .string(store.backend))]
        if let path = store.sqlitePath { members.append(("path", .string(path))) }
        members += [
            ("exists", .bool(inspection != nil)),
            ("schema_version", .integer(Int64(version))),
            ("supported_schema_version", .integer(Int64(supported))),
            ("counts", inspection?.counts.map(countsJSON) ?? .null),
            ("healthy", .bool(problems.isEmpty)),
            ("problems", .array(problems.map(JSONValue.string))),
            ("server_api_sync", .array(try syncCursors(store, inspection).map(syncCursorJSON))),
        ]
        var text = JSONValue.object(members).serialized(pretty: true)
        if text.last != 0x0A { text.append(0x0A) }
        StandardStream.output.write(text)
        try failIfDamaged()
        return
    }
    var lines = ["store: \(store.backend)" + (store.sqlitePath.map { " \($0)" } ?? "")]
    switch inspection {
    case nil:
        lines.append("schema: none (the file does not exist yet; receiptd serve or receiptd store migrate creates it)")
    case let inspection? where !inspection.isReadable:
        lines.append("schema: unreadable (the file is damaged)")
    case let inspection? where inspection.schemaVersion == 0:
        lines.append("schema: none (no ledger tables yet; receiptd serve or receiptd store migrate creates them)")
    case let inspection? where inspection.schemaVersion < supported:
        lines.append(
            "schema: version \(inspection.schemaVersion), older than this receiptd's \(supported) "
                + "(receiptd serve or receiptd store migrate migrates it)")
    default:
        lines.append("schema: version \(version) (current)")
    }
    if let counts = inspection?.counts {
        for (table, rows) in countRows(counts) { lines.append("\(table): \(rows)") }
    }
    if inspection != nil, store.sqlitePath != nil {
        lines.append(problems.isEmpty ? "integrity: ok (quick_check)" : "integrity: damaged (quick_check)")
    }
    for cursor in try syncCursors(store, inspection) {
        lines.append(
            "server_api sync: \(cursor.bundleID) \(cursor.environment): notification history read up to "
                + "\(syncDateText(cursor.syncedUntil)), last successful sync \(syncDateText(cursor.lastSuccessAt))")
    }
    print(lines.joined(separator: "\n"))
    try failIfDamaged()
}

/// The sync cursors, read only from a ledger at this receiptd's schema version: opening an older one would migrate it,
/// and status changes nothing.
private func syncCursors(
    _ store: ConfiguredStore, _ inspection: LedgerInspection?
) throws(StoreCommandFailure) -> [ServerAPISyncCursor] {
    guard let inspection, inspection.schemaVersion == LedgerInspection.supportedSchemaVersion else { return [] }
    do {
        return try openLedger(store.ledger).syncCursors()
    } catch {
        throw StoreCommandFailure(message: store.explain(error))
    }
}

private func syncCursorJSON(_ cursor: ServerAPISyncCursor) -> JSONValue {
    .object([
        ("bundle_id", .string(cursor.bundleID)), ("environment", .string(cursor.environment)),
        ("synced_until", .string(syncDateText(cursor.syncedUntil))),
        ("last_success_at", .string(syncDateText(cursor.lastSuccessAt))),
    ])
}

private func countRows(_ counts: LedgerCounts) -> [(String, Int64)] {
    [
        ("notifications", counts.notifications),
        ("transactions", counts.transactions),
        ("transaction_sources", counts.transactionSources),
        ("renewal_infos", counts.renewalInfos),
        ("claims", counts.claims),
    ]
}

private func countsJSON(_ counts: LedgerCounts) -> JSONValue {
    .object(countRows(counts).map { (key: $0.0, value: .integer($0.1)) })
}

// MARK: - backup

private func storeBackup(_ reader: ArgumentReader, _ store: ConfiguredStore) throws(StoreCommandFailure) {
    let file = reader.positional[0]
    guard let path = store.sqlitePath else {
        throw StoreCommandFailure(
            message: "the store is PostgreSQL: back it up with pg_dump (see docs/ledger.md); this command copies "
                + "SQLite ledgers only",
            status: ExitStatus.usage)
    }
    guard !FileManager.default.fileExists(atPath: file) else {
        throw StoreCommandFailure(message: "\(file) already exists; a backup is written to a new file only")
    }
    guard let inspection = try inspect(store) else {
        throw StoreCommandFailure(message: "no ledger at \(path) yet: nothing to back up")
    }
    guard inspection.schemaVersion == LedgerInspection.supportedSchemaVersion else {
        // Opening the ledger would migrate it first, and a backup is what one takes before a migration.
        throw StoreCommandFailure(
            message: "\(path) is at ledger schema version \(inspection.schemaVersion), not this receiptd's "
                + "\(LedgerInspection.supportedSchemaVersion): back it up with the receiptd that serves it")
    }
    let copy: LedgerInspection?
    do {
        try SQLiteLedger(path: path).backup(to: file)
        copy = try LedgerInspection.read(.sqlite(path: file))
    } catch {
        throw StoreCommandFailure(message: "cannot write the backup \(file): \(error.message)")
    }
    guard let copy, copy.schemaVersion == inspection.schemaVersion, let counts = copy.counts else {
        throw StoreCommandFailure(message: "the backup \(file) does not read back as a ledger")
    }
    print(
        "backup: \(file) (schema version \(copy.schemaVersion), \(counts.notifications) notifications, "
            + "\(counts.transactions) transactions, \(counts.claims) claims)")
}

// MARK: - restore

private func storeRestore(_ reader: ArgumentReader, _ store: ConfiguredStore) throws(StoreCommandFailure) {
    let backup = reader.positional[0]
    guard let path = store.sqlitePath else {
        throw StoreCommandFailure(
            message: "the store is PostgreSQL: restore it with pg_restore (see docs/ledger.md); this command restores "
                + "SQLite ledgers only",
            status: ExitStatus.usage)
    }
    // As serve does: restoring onto a new volume is how a ledger moves.
    let folder = path.deletingLastPathComponent
    if !folder.isEmpty { try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
    let restored: LedgerInspection
    do throws(LedgerError) {
        // Held until the copy is in place: a server starting meanwhile fails rather than open a file being replaced.
        let lock = try SQLiteFileLock(databasePath: path)
        restored = try SQLiteLedger.restore(from: backup, holding: lock)
    } catch where error.code == .inUse {
        throw StoreCommandFailure(message: "\(error.message): stop it before restoring; nothing was changed")
    } catch {
        throw StoreCommandFailure(message: "cannot restore \(backup) to \(path): \(error.message); nothing was changed")
    }
    let supported = LedgerInspection.supportedSchemaVersion
    var summary = "restored: \(path) from \(backup) (schema version \(restored.schemaVersion)"
    if let counts = restored.counts {
        summary += ", \(counts.notifications) notifications, \(counts.transactions) transactions, \(counts.claims) claims)"
    } else {
        summary += ", older than this receiptd's \(supported): receiptd serve migrates it)"
    }
    print(summary)
}

// MARK: - migrate

private func storeMigrate(_ reader: ArgumentReader, _ store: ConfiguredStore) throws(StoreCommandFailure) {
    let before = try inspect(store)?.schemaVersion ?? 0
    if let path = store.sqlitePath {
        // As serve does: the default config's folder is git-ignored and may not exist yet.
        let folder = path.deletingLastPathComponent
        if !folder.isEmpty {
            try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
    }
    let after: Int
    do {
        after = try openLedger(store.ledger).schemaVersion()
    } catch {
        throw StoreCommandFailure(message: store.explain(error))
    }
    let target = "store: \(store.backend)" + (store.sqlitePath.map { " \($0)" } ?? "")
    switch before {
    case after: print("\(target)\nschema: version \(after), already current")
    case 0: print("\(target)\nschema: created at version \(after)")
    default: print("\(target)\nschema: migrated from version \(before) to \(after)")
    }
}
