import AppStoreServerAPI
import ArgumentParser
import Ledger
import ReceiptService

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One start-up check of a resolved configuration, in one shape so that `serve` and `check-config` run the same list
/// and a new check joins both by being added to it: what is wrong (empty when it passes), and notes that are not.
struct StartupCheck: Sendable {
    struct Finding: Sendable {
        var problems: [String] = []
        var notes: [String] = []
    }

    let name: String
    let evaluate: @Sendable (ServiceConfiguration) -> Finding

    /// What `serve` checks after parsing the configuration (which reads the trusted roots) and before it opens the
    /// store, which it does itself: it must hold the SQLite file's lock and keep the ledger it opens.
    static let beforeServing: [StartupCheck] = [.serverAPIKeys, .webhooks]

    /// Everything `check-config` checks: what `serve` does, and the store opened read-only, without its lock, so the
    /// check is safe beside a running server.
    static let all: [StartupCheck] = beforeServing + [.store]

    /// The problems `beforeServing` finds, each naming what is wrong and what to do.
    static func problems(in configuration: ServiceConfiguration) -> [String] {
        beforeServing.flatMap { $0.evaluate(configuration).problems }
    }

    /// Each app's `.p8` key reads and is a P-256 key: otherwise every call to Apple would fail at first use.
    static let serverAPIKeys = StartupCheck(name: "server_api keys") { configuration in
        var finding = Finding()
        do throws(ConfigurationError) {
            try configuration.checkServerAPIKeys()
            finding.notes.append("server_api keys: \(configuration.serverAPIApps.count) read")
        } catch {
            finding.problems.append(error.message)
        }
        return finding
    }

    /// Webhooks need a store: their events are written to the ledger's outbox with the facts that cause them. Their
    /// secret files were read with the configuration.
    static let webhooks = StartupCheck(name: "webhooks") { configuration in
        var finding = Finding()
        let webhooks = configuration.webhooks
        guard !webhooks.isEmpty else { return finding }
        if configuration.store == nil {
            finding.problems.append(
                "webhooks: \(webhooks.count) configured but there is no store: events are kept in the ledger's "
                    + "outbox until delivered; add \"store\" or remove \"webhooks\"")
        } else {
            finding.notes.append(
                "webhooks: \(webhooks.map(\.name).joined(separator: ", ")), delivered events kept "
                    + "\(configuration.webhookRetentionDays) days")
        }
        return finding
    }

    /// The ledger opens and its schema is one this receiptd can use; read without creating, migrating or locking it.
    static let store = StartupCheck(name: "store") { configuration in
        var finding = Finding()
        let ledger: LedgerConfiguration
        switch configuration.store {
        case nil:
            finding.notes.append("store: none (stateless)")
            return finding
        case .sqlite(let path)?: ledger = .sqlite(path: path)
        case .postgres(let connectionString)?: ledger = .postgres(connectionString: connectionString)
        }
        let name = configuration.storeDescription
        do throws(LedgerError) {
            guard let inspection = try LedgerInspection.read(ledger) else {
                finding.notes.append("store: \(name) does not exist yet; serve creates it")
                return finding
            }
            let supported = LedgerInspection.supportedSchemaVersion
            if inspection.schemaVersion > supported {
                finding.problems.append(
                    "store \(name): ledger schema version \(inspection.schemaVersion) is newer than this receiptd's "
                        + "\(supported); upgrade receiptd or restore a backup")
            }
            if let first = inspection.problems.first {
                finding.problems.append(
                    "store \(name) is damaged: quick_check found \(first); restore a backup (receiptd store restore)")
            }
            if finding.problems.isEmpty {
                finding.notes.append("store: \(name), ledger schema version \(inspection.schemaVersion)")
            }
        } catch {
            let message: String
            if case .postgres(let connectionString) = ledger {
                message = redactingSecrets(of: connectionString, in: error.message)
            } else {
                message = error.message
            }
            // serve starts with PostgreSQL down (503 where the ledger is needed) and keeps trying it; a SQLite file
            // that cannot be opened stops it.
            if case .postgres = ledger, error.code == .unavailable {
                finding.notes.append("warning: store \(name) cannot be reached now: \(message)")
            } else {
                finding.problems.append("store \(name): \(message)")
            }
        }
        return finding
    }
}

/// `receiptd check-config`: `serve`'s start-up checks without serving, as `nginx -t`.
struct CheckConfig: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Runs every start-up check of serve without serving.",
        discussion: """
            Parses the configuration (and RECEIPTD_HOST, RECEIPTD_PORT, RECEIPTD_API_TOKENS, \
            RECEIPTD_STORE_POSTGRES as serve reads them), reads the trusted roots and each app's server_api key, and \
            opens the store read-only: nothing is created, migrated or locked, so it is safe beside a running server.
            Environment: RECEIPTD_CONFIG (the config file when --config is not given) and those above.
            Exit status: 0 every check passed; 1 a check failed (each problem on its own line); 2 a usage error.
            """)

    @OptionGroup var config: ConfigOption

    func execute() -> Int32 {
        let configuration: ServiceConfiguration
        do {
            configuration = try ServiceConfiguration.resolve(
                options: ServeOptions(configPath: config.config, host: nil, port: nil, logFormat: nil),
                environment: ProcessInfo.processInfo.environment,
                fileExists: { FileManager.default.fileExists(atPath: $0) })
        } catch {
            printError("receiptd check-config: \(error)")
            return ExitStatus.failure
        }
        print("config: \(configuration.sourcePath ?? "defaults (no config file)")")
        print("trusted roots: \(configuration.trustAnchors.count) read, apps: \(configuration.apps.count)")
        var problems: [String] = []
        for check in StartupCheck.all {
            let finding = check.evaluate(configuration)
            for note in finding.notes { print(note) }
            problems += finding.problems
        }
        for problem in problems { printError("receiptd check-config: \(problem)") }
        guard problems.isEmpty else { return ExitStatus.failure }
        print("check-config: ok")
        return ExitStatus.success
    }
}
