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
                configuration: configuration, routes: routes, bundleID: app.bundleID, environment: environment,
                report: { print($0) }, complain: { printError("receiptd store sync: \($0)") })
            complete = sync.run(since: span.since, until: span.until ?? now, now: now) && complete
        }
    }
    return complete ? ExitStatus.success : ExitStatus.failure
}

/// One app and environment's sync: reads every page of the span and takes each notification.
struct NotificationHistorySync {
    let configuration: ServiceConfiguration
    let routes: ReceiptRoutes
    let bundleID: String
    let environment: AppStoreEnvironment
    /// Receives the summary line; `complain` what went wrong.
    let report: (String) -> Void
    let complain: (String) -> Void
    /// Asked between pages: false stops the sync there (serve shutting down), without moving the cursor.
    var shouldContinue: () -> Bool = { true }

    /// How far back Apple keeps notification history, less a margin so a start at the edge is not refused (4000012).
    var historyWindow: Int64 {
        let days: Int64 = environment == .production ? 180 : 30
        return days * 86_400_000 - 3_600_000
    }

    /// This process, as a lease holder: unique across replicas and restarts.
    static let leaseHolder = "receiptd-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"

    struct Counts {
        var pages = 0
        var new = 0
        var known = 0
        var refused = 0
        var notStored = 0
    }

    /// Prints what it did; true when every notification of the span is in the ledger.
    func run(since requested: Int64?, until: Int64, now: Int64) -> Bool {
        let label = "\(bundleID) \(environment.rawValue)"
        let cursor: ServerAPISyncCursor?
        do {
            cursor = try routes.ledger.withStore { (store) throws(LedgerError) in
                try store.syncCursor(bundleID: bundleID, environment: environment.rawValue)
            }
        } catch {
            complain("\(label): the ledger cannot be read: \(error)")
            return false
        }
        // One replica at a time per app and environment when several share a PostgreSQL ledger; the lease outlasts any
        // sync (15 minutes) and lapses by itself if its holder dies.
        let holder = Self.leaseHolder
        let leased: Bool
        do {
            leased = try routes.ledger.withStore { (store) throws(LedgerError) in
                try store.acquireSyncLease(
                    bundleID: bundleID, environment: environment.rawValue, holder: holder, now: now, until: now + 900_000)
            }
        } catch {
            complain("\(label): the ledger cannot be written: \(error)")
            return false
        }
        guard leased else {
            report("\(label): another receiptd is syncing it now; skipped")
            return true
        }
        defer {
            _ = try? routes.ledger.withStore { (store) throws(LedgerError) in
                try store.releaseSyncLease(bundleID: bundleID, environment: environment.rawValue, holder: holder)
            }
        }
        let since = max(requested ?? cursor?.syncedUntil ?? 0, now - historyWindow)
        guard since < until else {
            report("\(label): nothing to sync (\(syncDateText(since)) is not before \(syncDateText(until)))")
            return true
        }
        let client: AppStoreServerAPIClient
        do {
            client = try routes.serverAPIClients.client(bundleID: bundleID, environment: environment)
        } catch {
            complain("\(label): \(error.message)")
            return false
        }
        var counts = Counts()
        var token: String?
        let query = NotificationHistoryQuery(startDate: since, endDate: until)
        repeat {
            let page: NotificationHistoryPage
            do {
                page = try client.notificationHistory(query, paginationToken: token)
            } catch {
                report(summary(label, since, until, counts))
                complain("\(label): \(error)")
                return false
            }
            counts.pages += 1
            for item in page.notifications {
                switch routes.takeNotification(item.signedPayload) {
                case .recorded(_, let write): write == .stored ? (counts.new += 1) : (counts.known += 1)
                case .refused, .malformed: counts.refused += 1
                case .notStored: counts.notStored += 1
                }
            }
            token = page.hasMore ? page.paginationToken : nil
            if token != nil, !shouldContinue() {
                report(summary(label, since, until, counts) + " (stopped before the end)")
                return false
            }
        } while token != nil
        report(summary(label, since, until, counts))
        guard counts.refused == 0, counts.notStored == 0 else { return false }
        do {
            try routes.ledger.withStore { (store) throws(LedgerError) in
                try store.record(
                    syncCursor: ServerAPISyncCursor(
                        bundleID: bundleID, environment: environment.rawValue, syncedUntil: until, lastSuccessAt: now))
            }
            routes.metrics.serverAPI.recordSync(app: bundleID, environment: environment.rawValue, at: Double(now) / 1000)
        } catch {
            complain("\(label): the cursor cannot be stored: \(error)")
            return false
        }
        return true
    }

    private func summary(_ label: String, _ since: Int64, _ until: Int64, _ counts: Counts) -> String {
        var text = "\(label): \(syncDateText(since)) to \(syncDateText(until)): \(counts.pages) "
            + (counts.pages == 1 ? "page" : "pages")
            + ", notifications: \(counts.new) new, \(counts.known) already known, \(counts.refused) refused"
        if counts.notStored > 0 { text += ", \(counts.notStored) not stored" }
        return text
    }
}

/// `2026-11-01` or `2026-11-01T12:00:00Z` (or with `.SSS`) as milliseconds since 1970, UTC.
func syncDate(_ text: String) throws(UsageError) -> Int64 {
    let invalid = UsageError("\(text): expected a date like 2026-11-01 or 2026-11-01T12:00:00Z")
    let bytes = Array(text.utf8)
    func number(_ range: Range<Int>) -> Int64? {
        guard range.upperBound <= bytes.count, range.allSatisfy({ (0x30...0x39).contains(bytes[$0]) }) else { return nil }
        return range.reduce(0) { $0 * 10 + Int64(bytes[$1] - 0x30) }
    }
    guard bytes.count >= 10, bytes[4] == 0x2D, bytes[7] == 0x2D, let year = number(0..<4), let month = number(5..<7),
        let day = number(8..<10), (1...12).contains(month), (1...31).contains(day)
    else { throw invalid }
    var milliseconds = daysSince1970(year: year, month: month, day: day) * 86_400_000
    if bytes.count > 10 {
        guard bytes.count >= 20, bytes[10] == 0x54, bytes[13] == 0x3A, bytes[16] == 0x3A, bytes.last == 0x5A,
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19), hour < 24,
            minute < 60, second < 61
        else { throw invalid }
        var fraction: Int64 = 0
        if bytes.count > 20 {
            guard bytes[19] == 0x2E, bytes.count == 24, let parsed = number(20..<23) else { throw invalid }
            fraction = parsed
        } else if bytes.count != 20 {
            throw invalid
        }
        milliseconds += ((hour * 60 + minute) * 60 + second) * 1000 + fraction
    }
    return milliseconds
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's days_from_civil).
private func daysSince1970(year: Int64, month: Int64, day: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yearOfEra = y - era * 400
    let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    return era * 146_097 + dayOfEra - 719_468
}

/// Milliseconds since 1970 as `2026-11-01T12:00:00Z`.
func syncDateText(_ milliseconds: Int64) -> String {
    let seconds = milliseconds / 1000
    let days = seconds / 86_400
    let rest = seconds % 86_400
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let mp = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return "\(year)-\(two(month))-\(two(day))T\(two(rest / 3600)):\(two(rest % 3600 / 60)):\(two(rest % 60))Z"
}
