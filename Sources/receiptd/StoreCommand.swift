#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ArgumentParser
import JSONText
import Ledger
import ReceiptEngine
import ReceiptService
import CryptoFloor

/// `receiptd store status|backup|migrate|restore|sync`: what an operator needs from a shell to look after the ledger.
struct Store: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The ledger: status, backup, restore BACKUP, migrate, sync.",
        discussion: """
            The ledger is the one the config's "store" key names, or RECEIPTD_STORE_POSTGRES, which wins over the \
            file. The connection string is never printed (it may hold a password).
            """ + Store.environment,
        subcommands: [StoreStatus.self, StoreBackup.self, StoreMigrate.self, StoreRestore.self, StoreSync.self])

    static let environment = """

        Environment: RECEIPTD_CONFIG (the config file when --config is not given), RECEIPTD_STORE_POSTGRES (a \
        PostgreSQL ledger, winning over the file's store).
        """
}

struct StoreStatus: StoreSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Prints the backend, schema versions, rows per table and (SQLite) quick_check's result.",
        discussion: """
            Changes nothing: a SQLite file that does not exist is reported (or why it could not be created), not \
            created, and an older schema is not migrated. Safe while receiptd serve runs.
            Exit status: 0 reported, healthy; 1 no store configured, the database cannot be reached, a missing \
            SQLite file cannot be created, quick_check finds damage, or its schema is newer than this receiptd; 2 a \
            usage error.
            """ + Store.environment)

    @OptionGroup var config: ConfigOption

    @Flag(
        help: ArgumentHelp(
            "One JSON object: backend, path (SQLite only), exists, schema_version, supported_schema_version, counts, "
                + "healthy, problems, server_api_sync, apple_calls."))
    var json = false

    func run(on store: ConfiguredStore) throws(StoreCommandFailure) { try storeStatus(json: json, store) }
}

struct StoreBackup: StoreSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Writes a consistent copy of a SQLite ledger to a new file while serve keeps running.",
        discussion: """
            One snapshot: notifications committed after it starts are not in the copy, none is half in it. The copy \
            is written under a hidden temporary name in FILE's folder and named FILE only once complete and on disk. \
            receiptd store restore FILE puts it back. A PostgreSQL ledger is backed up with pg_dump instead.
            Exit status: 0 written; 1 no store configured, no database yet, FILE exists, or the copy failed; 2 a \
            usage error or a PostgreSQL store.
            """ + Store.environment)

    @Argument(help: ArgumentHelp("The new file to write.", valueName: "file"))
    var file: String

    @OptionGroup var config: ConfigOption

    func run(on store: ConfiguredStore) throws(StoreCommandFailure) { try storeBackup(to: file, store) }
}

struct StoreMigrate: StoreSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Creates the ledger if missing and migrates its schema to this receiptd's version.",
        discussion: """
            Opens the ledger as receiptd serve does, migrating its schema forward in one transaction, and reports \
            the versions before and after. serve does the same at start-up; this lets you do it (and see it) first, \
            e.g. after taking a backup.
            Exit status: 0 current; 1 no store configured, the database cannot be reached, or its schema is newer \
            than this receiptd; 2 a usage error.
            """ + Store.environment)

    @OptionGroup var config: ConfigOption

    func run(on store: ConfiguredStore) throws(StoreCommandFailure) { try storeMigrate(store) }
}

struct StoreRestore: StoreSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Replaces the SQLite ledger with a copy of a backup; stop the server first.",
        discussion: """
            BACKUP (a file from receiptd store backup) is copied next to the ledger, the copy is checked (SQLite's \
            integrity_check, a ledger schema version from 1 to this receiptd's; an older one is migrated when the \
            server starts) and renamed into place after the old -wal and -shm are removed, so the ledger file is \
            always either the old one or the whole backup. BACKUP itself is only read. restore refuses while a \
            receiptd serve holds the ledger. A PostgreSQL ledger is restored with pg_restore instead.
            Exit status: 0 restored; 1 no store configured, a server holds the ledger, BACKUP is damaged, not a \
            ledger or newer than this receiptd, or a file cannot be read or written (the ledger is then unchanged); \
            2 a usage error or a PostgreSQL store.
            """ + Store.environment)

    @Argument(help: ArgumentHelp("The backup to restore.", valueName: "backup"))
    var backup: String

    @OptionGroup var config: ConfigOption

    func run(on store: ConfiguredStore) throws(StoreCommandFailure) { try storeRestore(from: backup, store) }
}

/// A failure of a store command: the message names what is wrong; `status` is the exit status.
struct StoreCommandFailure: Error {
    var message: String
    var status: Int32 = ExitStatus.failure
}

/// The configured ledger, as the store and accounts commands see it.
struct ConfiguredStore {
    var ledger: LedgerConfiguration
    /// For messages: the SQLite path, or "PostgreSQL" (never the connection string).
    var name: String
    var connectionString: String?
    /// The whole configuration it came from: the accounts commands read its apps' entitlements.
    var configuration: ServiceConfiguration

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

/// A `store` subcommand: it runs on the configured store, and its failure is printed with its exit status.
protocol StoreSubcommand: ReceiptdCommand {
    var config: ConfigOption { get }
    func run(on store: ConfiguredStore) throws(StoreCommandFailure)
}

extension StoreSubcommand {
    func execute() -> Int32 {
        do throws(StoreCommandFailure) {
            try run(on: try configuredStore(config.config))
            return ExitStatus.success
        } catch {
            printError("receiptd store \(Self.configuration.commandName ?? ""): \(error.message)")
            return error.status
        }
    }
}

func configuredStore(_ configPath: String?) throws(StoreCommandFailure) -> ConfiguredStore {
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
        return ConfiguredStore(
            ledger: .sqlite(path: path), name: "SQLite \(path)", connectionString: nil, configuration: configuration)
    case .postgres(let connectionString)?:
        return ConfiguredStore(
            ledger: .postgres(connectionString: connectionString), name: "PostgreSQL",
            connectionString: connectionString, configuration: configuration)
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

private func storeStatus(json: Bool, _ store: ConfiguredStore) throws(StoreCommandFailure) {
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
    if json {
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
            ("apple_calls", appleCallsJSON(try unfinishedAppleCalls(store, inspection))),
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
    let appleCalls = try unfinishedAppleCalls(store, inspection)
    if !appleCalls.isEmpty {
        let failed = appleCalls.filter { $0.state == .failed }
        lines.append("apple calls: \(appleCalls.count - failed.count) pending, \(failed.count) failed")
        for call in failed {
            lines.append(
                "apple call failed: \(call.kind.rawValue) \(call.targetID) (\(call.bundleID) \(call.environment)) "
                    + "after \(call.attempts) tries: \(call.lastError ?? "no answer")")
        }
    }
    print(lines.joined(separator: "\n"))
    try failIfDamaged()
}

/// Claims' calls to Apple not done yet (docs/server-api.md), read like the sync cursors: only from a current schema.
private func unfinishedAppleCalls(
    _ store: ConfiguredStore, _ inspection: LedgerInspection?
) throws(StoreCommandFailure) -> [AppleCall] {
    guard let inspection, inspection.schemaVersion == LedgerInspection.supportedSchemaVersion else { return [] }
    do {
        let ledger = try openLedger(store.ledger)
        defer { try? ledger.close() }
        return try ledger.appleCalls(in: [.pending, .failed], limit: 10_000)
    } catch {
        throw StoreCommandFailure(message: store.explain(error))
    }
}

private func appleCallsJSON(_ calls: [AppleCall]) -> JSONValue {
    let failed = calls.filter { $0.state == .failed }
    return .object([
        ("pending", .integer(Int64(calls.count - failed.count))), ("failed", .integer(Int64(failed.count))),
        ("failed_calls", .array(failed.map { call in
            .object([
                ("kind", .string(call.kind.rawValue)), ("target_id", .string(call.targetID)),
                ("bundle_id", .string(call.bundleID)), ("environment", .string(call.environment)),
                ("attempts", .integer(Int64(call.attempts))), ("last_status", .integer(call.lastStatus.map { Int64($0) })),
                ("apple_error_code", .integer(call.appleErrorCode)), ("last_error", .string(call.lastError)),
            ])
        })),
    ])
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
        ("accounts", counts.accounts),
        ("account_links", counts.accountLinks),
    ]
}

private func countsJSON(_ counts: LedgerCounts) -> JSONValue {
    .object(countRows(counts).map { (key: $0.0, value: .integer($0.1)) })
}

// MARK: - backup

private func storeBackup(to file: String, _ store: ConfiguredStore) throws(StoreCommandFailure) {
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

private func storeRestore(from backup: String, _ store: ConfiguredStore) throws(StoreCommandFailure) {
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

private func storeMigrate(_ store: ConfiguredStore) throws(StoreCommandFailure) {
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

/// Opens the configured ledger with the configuration's rules (links, events), runs `command` on it and closes it:
/// `receiptd COMMAND` names itself in what it prints on failure.
func runLedgerCommand(
    _ command: String, configPath: String?,
    _ body: (ConfiguredStore, any LedgerStore) throws(StoreCommandFailure) -> Void
) -> Int32 {
    do throws(StoreCommandFailure) {
        let store = try configuredStore(configPath)
        let ledger: any LedgerStore
        do {
            ledger = try openLedger(
                store.ledger, timeout: store.configuration.storeTimeout,
                linkRules: store.configuration.accountLinkRules, outbox: store.configuration.outboxRules)
        } catch {
            throw StoreCommandFailure(message: store.explain(error))
        }
        defer { try? ledger.close() }
        try body(store, ledger)
        return ExitStatus.success
    } catch {
        printError("receiptd \(command): \(error.message)")
        return error.status
    }
}
