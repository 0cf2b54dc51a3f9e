#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AppStoreServerAPI
#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Ledger
import ReceiptEngine
import ReceiptService

/// `receiptd store sync`: heals the ledger from Apple's notification history, and with `--refunds` from each
/// customer's refund history.
struct StoreSync: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Takes Apple's notification history for a span into the ledger.",
        discussion: """
            Fetches Apple's notification history (App Store Server API) for the span and takes each notification \
            into the ledger exactly as a delivery to POST /v1/notifications would: verified the same way, recorded \
            once per uuid, a refused one never stored. Apps: those with a "server_api" key, or --app. Environments: \
            Production and Sandbox as "environments" allows, or --environment.
            DATE: 2026-11-01 or 2026-11-01T12:00:00Z (UTC). --until defaults to now; --since to where the last \
            complete sync of that app and environment stopped (the cursor in the ledger), else as far back as Apple \
            keeps history (180 days in Production, 30 in Sandbox). A span without gaps moves the cursor forward.
            One receiptd at a time syncs an app and environment (a lease in the ledger): another one's sync is \
            skipped (exit 3), or waited for with --wait.
            With --refunds, also reads Apple's refund history (Get Refund History) of each customer the ledger knows \
            in that app and environment: original transactions with a purchase since --refunds-since (default 180 \
            days before now), at most --refunds-limit of them (default 10000), the most recent first. Each refunded \
            transaction is verified and recorded like any other, so the ledger emits REFUND for one it did not know.
            Prints, per app and environment, the pages read and the notifications new, already known and refused; \
            with --refunds, a line "refunds: N read, M new, K refused".
            Exit status: 0 every notification of the span (and every refund read) is in the ledger; 1 some were \
            refused or not stored, Apple could not be reached or refused the key, or no store is configured; 2 a \
            usage error; 3 skipped: another receiptd holds the sync lease of an app and environment (nothing else \
            failed).
            """ + Store.environment)

    @Option(help: ArgumentHelp("The start of the span (UTC).", valueName: "date"), transform: { try syncDate($0) })
    var since: Int64?

    @Option(help: ArgumentHelp("The end of the span (UTC), default now.", valueName: "date"), transform: { try syncDate($0) })
    var until: Int64?

    @Option(help: ArgumentHelp("Only this app (a bundle id in the config's apps).", valueName: "bundle"))
    var app: String?

    @Option(
        help: ArgumentHelp("Only this environment: Production or Sandbox.", valueName: "environment"),
        transform: { text in try parsed(text, expecting: "Production or Sandbox", AppStoreEnvironment.init(rawValue:)) })
    var environment: AppStoreEnvironment?

    @Flag(help: "When another receiptd is syncing an app and environment, wait for it to finish, then sync.")
    var wait = false

    @Flag(help: "Also read Apple's refund history of each customer the ledger knows (see --refunds-since).")
    var refunds = false

    @Option(
        help: ArgumentHelp(
            "With --refunds: only customers with a purchase since then (UTC), default 180 days before now.",
            valueName: "date"),
        transform: { try syncDate($0) })
    var refundsSince: Int64?

    @Option(
        help: ArgumentHelp(
            "With --refunds: at most this many customers per app and environment, the most recent purchases first.",
            valueName: "count"))
    var refundsLimit: Int = RefundHistorySync.defaultMaximumCustomers

    @OptionGroup var config: ConfigOption

    func validate() throws {
        if let since, let until, since >= until { throw ArgumentParser.ValidationError("--since must be before --until") }
        if !refunds, refundsSince != nil || refundsLimit != RefundHistorySync.defaultMaximumCustomers {
            throw ArgumentParser.ValidationError("--refunds-since and --refunds-limit go with --refunds")
        }
        if refundsLimit < 1 { throw ArgumentParser.ValidationError("--refunds-limit must be at least 1") }
    }

    func execute() -> Int32 { execute(now: Int64(wallClockSeconds() * 1000)) }

    func execute(now: Int64) -> Int32 {
        let environments = environment.map { [$0] }
        guard let configuration = serverAPICommandConfiguration("store sync", configPath: config.config) else {
            return ExitStatus.failure
        }
        var apps = configuration.serverAPIApps
        if let bundleID = app {
            guard configuration.app(bundleID: bundleID) != nil else {
                printError("receiptd store sync: --app \(bundleID): no such app in the configuration's \"apps\"")
                return ExitStatus.usage
            }
            apps = apps.filter { $0.bundleID == bundleID }
            guard !apps.isEmpty else {
                printError("receiptd store sync: \(bundleID) has no \"server_api\" key (key_id, issuer_id, private_key_file)")
                return ExitStatus.failure
            }
        }
        guard !apps.isEmpty else {
            printError("receiptd store sync: no app has a \"server_api\" key (key_id, issuer_id, private_key_file)")
            return ExitStatus.failure
        }
        guard
            let ledger = serverAPICommandLedger(
                "store sync", configuration, neededFor: "the notifications would have nowhere to go")
        else { return ExitStatus.failure }
        let log = ServiceLog(format: configuration.logFormat, sink: { printError($0) })
        let routes = ReceiptRoutes(
            configuration: configuration, validator: configuration.makeValidator(),
            jwsVerifier: configuration.makeJWSVerifier(), ledger: ledger, metrics: ServiceMetrics(), log: log)
        let allowed = environments ?? AppStoreEnvironment.allCases.filter {
            configuration.environments.map(\.rawValue).contains($0.rawValue)
        }
        var complete = true
        var skipped = false
        for app in apps {
            for environment in allowed {
                var sync = NotificationHistorySync(
                    intake: routes.intake, bundleID: app.bundleID, environment: environment,
                    report: { print($0) }, complain: { printError("receiptd store sync: \($0)") })
                sync.waitForLease = wait
                switch sync.run(since: since, until: until ?? now, now: now) {
                case .complete: break
                case .incomplete: complete = false
                case .skipped(let holder, let leaseEnd):
                    // Never a success: the span was not read, and a script must not take it for synced.
                    printError(
                        "receiptd store sync: skipped: \(app.bundleID) \(environment.rawValue) is being synced by \(holder) "
                            + "until \(syncDateText(leaseEnd)); run again later, or with --wait")
                    skipped = true
                }
                guard refunds else { continue }
                // Apart from the notification lease: reading refunds twice records nothing twice.
                var refundSync = RefundHistorySync(
                    intake: routes.intake, bundleID: app.bundleID, environment: environment,
                    purchasedSince: refundsSince ?? now - 180 * 86_400_000,
                    report: { print($0) }, complain: { printError("receiptd store sync: \($0)") })
                refundSync.maximumCustomers = refundsLimit
                if !refundSync.run() { complete = false }
            }
        }
        guard complete else { return ExitStatus.failure }
        return skipped ? ExitStatus.skipped : ExitStatus.success
    }
}

/// `--since`/`--until`: a day (`2026-11-01`, midnight UTC) or an RFC 3339 time, as milliseconds since 1970.
func syncDate(_ text: String) throws(ArgumentParser.ValidationError) -> Int64 {
    guard let date = ReceiptDate(rfc3339: text.utf8.count == 10 ? text + "T00:00:00Z" : text) else {
        throw ArgumentParser.ValidationError("\(text): expected a date like 2026-11-01 or 2026-11-01T12:00:00Z")
    }
    return date.millisecondsSince1970
}

/// Milliseconds since 1970 as `2026-11-01T12:00:00Z`.
func syncDateText(_ milliseconds: Int64) -> String { ReceiptDate(millisecondsSince1970: milliseconds).rfc3339 }
