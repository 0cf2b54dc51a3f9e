#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AppStoreServerAPI
#if canImport(Glibc)
import Glibc
#endif
import Ledger
import ReceiptEngine
import ReceiptService

let storeSyncUsage = """
    usage: receiptd store sync [--since DATE] [--until DATE] [--app BUNDLE] [--environment Production|Sandbox]
                               [--config PATH]
      Fetches Apple's notification history (App Store Server API) for the span and takes each notification into the
      ledger exactly as a delivery to POST /v1/notifications would: verified the same way, recorded once per uuid (one
      already delivered changes nothing), a refused one never stored. Apps: those with a "server_api" key, or --app.
      Environments: Production and Sandbox as "environments" allows, or --environment.
      DATE: 2026-11-01 or 2026-11-01T12:00:00Z (UTC). --until defaults to now; --since to where the last complete sync
      of that app and environment stopped (the cursor in the ledger), else as far back as Apple keeps history (180
      days in Production, 30 in Sandbox). A span without gaps moves the cursor forward.
      Prints, per app and environment, the pages read and the notifications new, already known and refused.
      exit status: 0 every notification is in the ledger; 1 some were refused or not stored, Apple could not be
      reached or refused the key, or no store is configured; 2 usage error
    """

/// `receiptd store sync`: heals the ledger from Apple's notification history.
func runStoreSync(_ arguments: [String], now: Int64 = Int64(wallClockSeconds() * 1000)) -> Int32 {
    let reader: ArgumentReader
    let span: (since: Int64?, until: Int64?)
    let environments: [AppStoreEnvironment]?
    do {
        reader = try ArgumentReader(arguments, options: ["--config", "--since", "--until", "--app", "--environment"])
        if reader.wantsHelp {
            print(storeSyncUsage)
            return ExitStatus.success
        }
        try reader.expectPositional(atMost: 0)
        span = (try reader.value("--since").map(syncDate), try reader.value("--until").map(syncDate))
        if let since = span.since, let until = span.until, since >= until { throw UsageError("--since must be before --until") }
        environments = try reader.value("--environment").map { name throws(UsageError) in
            guard let environment = AppStoreEnvironment(rawValue: name) else {
                throw UsageError("--environment: expected Production or Sandbox")
            }
            return [environment]
        }
    } catch {
        printError("receiptd store sync: \(error)\n\n\(storeSyncUsage)")
        return ExitStatus.usage
    }
    guard let configuration = serverAPICommandConfiguration("store sync", configPath: reader.value("--config")) else {
        return ExitStatus.failure
    }
    var apps = configuration.serverAPIApps
    if let bundleID = reader.value("--app") {
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
    for app in apps {
        for environment in allowed {
            let sync = NotificationHistorySync(
                intake: routes.intake, bundleID: app.bundleID, environment: environment,
                report: { print($0) }, complain: { printError("receiptd store sync: \($0)") })
            complete = sync.run(since: span.since, until: span.until ?? now, now: now) && complete
        }
    }
    return complete ? ExitStatus.success : ExitStatus.failure
}

/// `--since`/`--until`: a day (`2026-11-01`, midnight UTC) or an RFC 3339 time, as milliseconds since 1970.
func syncDate(_ text: String) throws(UsageError) -> Int64 {
    guard let date = ReceiptDate(rfc3339: text.utf8.count == 10 ? text + "T00:00:00Z" : text) else {
        throw UsageError("\(text): expected a date like 2026-11-01 or 2026-11-01T12:00:00Z")
    }
    return date.millisecondsSince1970
}

/// Milliseconds since 1970 as `2026-11-01T12:00:00Z`.
func syncDateText(_ milliseconds: Int64) -> String { ReceiptDate(millisecondsSince1970: milliseconds).rfc3339 }
