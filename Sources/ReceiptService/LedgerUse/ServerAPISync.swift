#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import AppStoreServerAPI
import Dispatch
import Ledger
import ReceiptEngine
internal import Synchronization

/// `serve`'s own sync: once at start-up, covering the time since each app and environment's cursor, then every
/// `server_api.sync_interval`, so an outage heals without anyone acting. Runs on its own serial queue, never on a
/// request's thread: Apple being slow or down changes no answer and not `/readyz`.
///
/// Nothing waits on Apple without an end: each pass must be over before the next is due (its clients are bounded
/// by the pass's start + `sync_interval`, every retry and `Retry-After` included), and a shutdown waits for a pass
/// under way only as long as it was given (`shutdown_grace_period`), then abandons it.
public final class ServerAPISync: Sendable {
    private let queue = DispatchQueue(label: "receiptd.server-api-sync")
    // In a mutex only because Dispatch does not mark its sources Sendable; resuming and cancelling are thread-safe.
    private let timer: Mutex<any DispatchSourceTimer>
    private let progress: SyncProgress
    private let ledger: PurchaseLedger
    private let log: ServiceLog

    /// Logs which apps and environments sync with Apple (one line each, naming the bundle id and environment, never
    /// the key), or why none does, and starts the schedule; nil when no app has a `server_api` key or there is no
    /// ledger to heal.
    public static func start(_ intake: LedgerIntake, log: ServiceLog) -> ServerAPISync? {
        let configuration = intake.configuration
        let apps = configuration.serverAPIApps
        guard !apps.isEmpty else {
            log.event("server api sync off", [("reason", "no app has a server_api key")])
            return nil
        }
        guard intake.ledger.isConfigured else {
            log.event("server api sync off", [("reason", "no store to keep what Apple sends")])
            return nil
        }
        let environments = AppStoreEnvironment.allCases.filter { environment in
            configuration.environments.contains { $0.rawValue == environment.rawValue }
        }
        let interval = configuration.serverAPI.syncInterval
        for app in apps {
            for environment in environments {
                log.event(
                    "server api sync",
                    [("app", app.bundleID), ("environment", environment.rawValue),
                     ("every", "\(Int(interval.rounded()))s")])
            }
        }
        let sync = ServerAPISync(intake: intake, apps: apps, environments: environments, interval: interval, log: log)
        sync.timer.withLock { $0.resume() }
        return sync
    }

    private init(
        intake: LedgerIntake, apps: [ServiceConfiguration.App], environments: [AppStoreEnvironment], interval: Double,
        log: ServiceLog
    ) {
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let progress = SyncProgress()
        timer.setEventHandler { @Sendable in
            let passDeadline = wallClockSeconds() + interval
            for app in apps {
                for environment in environments where !progress.isStopping {
                    var sync = NotificationHistorySync(
                        intake: intake, bundleID: app.bundleID, environment: environment,
                        report: { log.event("server api sync", [("result", $0)]) },
                        complain: { log.event("server api sync failed", [("reason", $0)]) })
                    sync.shouldContinue = { !progress.isStopping }
                    sync.deadline = passDeadline
                    sync.leaseTaken = { progress.leased = (app.bundleID, environment) }
                    let now = ReceiptDate(intake.clock()).millisecondsSince1970
                    _ = sync.run(since: nil, until: now, now: now)
                    progress.leased = nil
                }
            }
        }
        timer.schedule(deadline: .now(), repeating: .milliseconds(Int(interval * 1000)), leeway: .seconds(1))
        self.timer = Mutex(timer)
        self.progress = progress
        ledger = intake.ledger
        self.log = log
    }

    /// Starts no pass after this, and ends the one under way at its next page; returns at once. A shutdown calls it
    /// as it begins, so that the sync winds down while the servers drain.
    public func beginStopping() {
        if progress.beginStopping() { timer.withLock { $0.cancel() } }
    }

    /// Stops the schedule and waits for a pass under way to end, at most `seconds` after `beginStopping()` was
    /// first called (or now). A pass still waiting on Apple then is abandoned: its cursor stays where the last
    /// complete pass left it, and its lease is given back so that the next receiptd (or `store sync`) need not wait
    /// for it to lapse. True when no pass was abandoned.
    @discardableResult
    public func stop(within seconds: Double = .infinity) -> Bool {
        beginStopping()
        let finished = DispatchSemaphore(value: 0)
        queue.async { finished.signal() }
        // Past thirty years is forever; the bound keeps the nanoseconds below within UInt64.
        guard seconds < 1e9 else {
            finished.wait()
            return true
        }
        let since = progress.stoppingSince ?? DispatchTime.now().uptimeNanoseconds
        let end = DispatchTime(uptimeNanoseconds: since + UInt64(max(0, seconds) * 1e9))
        guard finished.wait(timeout: end) == .timedOut else { return true }
        let leased = progress.leased
        log.event(
            "server api sync abandoned",
            [("reason", "still waiting on Apple at shutdown"), ("app", leased?.bundleID ?? "-"),
             ("environment", leased?.environment.rawValue ?? "-")])
        if let leased {
            _ = try? ledger.withStore { (store) throws(LedgerError) in
                try store.releaseSyncLease(
                    bundleID: leased.bundleID, environment: leased.environment.rawValue,
                    holder: NotificationHistorySync.leaseHolder)
            }
        }
        return false
    }
}

/// What a shutdown needs to know of the passes, shared with the timer's handler.
private final class SyncProgress: Sendable {
    private struct State {
        var stoppingSince: UInt64?
        var leased: (bundleID: String, environment: AppStoreEnvironment)?
    }
    private let state = Mutex(State())

    var isStopping: Bool { state.withLock { $0.stoppingSince != nil } }

    /// When stopping began (`DispatchTime`'s nanoseconds): a shutdown's grace counts from it.
    var stoppingSince: UInt64? { state.withLock { $0.stoppingSince } }

    /// The app and environment whose lease the pass under way holds.
    var leased: (bundleID: String, environment: AppStoreEnvironment)? {
        get { state.withLock { $0.leased } }
        set { state.withLock { $0.leased = newValue } }
    }

    /// True the first time only.
    func beginStopping() -> Bool {
        state.withLock { state in
            guard state.stoppingSince == nil else { return false }
            state.stoppingSince = DispatchTime.now().uptimeNanoseconds
            return true
        }
    }
}

/// One app and environment's sync: reads every page of the span and takes each notification.
public struct NotificationHistorySync {
    let intake: LedgerIntake
    let bundleID: String
    let environment: AppStoreEnvironment
    /// Receives the summary line; `complain` what went wrong.
    let report: (String) -> Void
    let complain: (String) -> Void
    /// Asked between pages and before the cursor moves: false stops the sync there (serve shutting down), without
    /// moving the cursor.
    var shouldContinue: () -> Bool = { true }
    /// When every request to Apple must be over (seconds since 1970, the clients' clock), retries and waits included;
    /// nil for none (`store sync`, which someone watches and can stop).
    var deadline: Double?
    /// Told once the lease is taken: from then on the lease is this sync's to give back.
    var leaseTaken: () -> Void = {}

    /// - Parameters:
    ///   - intake: where the notifications go, and whose clients and ledger the sync uses.
    ///   - report: receives the summary line; `complain`, what went wrong.
    public init(
        intake: LedgerIntake, bundleID: String, environment: AppStoreEnvironment,
        report: @escaping (String) -> Void, complain: @escaping (String) -> Void
    ) {
        self.intake = intake
        self.bundleID = bundleID
        self.environment = environment
        self.report = report
        self.complain = complain
    }

    /// How far back Apple keeps notification history, less a margin so a start at the edge is not refused (4000012).
    var historyWindow: Int64 {
        let days: Int64 = environment == .production ? 180 : 30
        return days * 86_400_000 - 3_600_000
    }

    /// This process, as a lease holder: unique across replicas and restarts.
    static let leaseHolder = "receiptd-\(ProcessInfo.processInfo.processIdentifier)-\(UInt64.random(in: 0...UInt64.max))"

    struct Counts {
        var pages = 0
        var new = 0
        var known = 0
        var refused = 0
        var notStored = 0
    }

    /// How a sync ended.
    public enum Outcome: Equatable, Sendable {
        /// Every notification of the span is in the ledger.
        case complete
        /// Something failed or was refused; what is in `complain`.
        case incomplete
        /// Another receiptd holds the lease of this app and environment until `until`: nothing was read.
        case skipped(holder: String, until: Int64)
    }

    /// With `waitForLease`, a lease another receiptd holds is waited for (it lapses within 15 minutes even if that
    /// receiptd died) instead of skipping the span.
    public var waitForLease = false

    /// Prints what it did and says how it ended.
    public func run(since requested: Int64?, until: Int64, now: Int64) -> Outcome {
        let label = "\(bundleID) \(environment.rawValue)"
        // One replica at a time per app and environment when several share a PostgreSQL ledger; the lease outlasts any
        // sync (15 minutes) and lapses by itself if its holder dies.
        let holder = Self.leaseHolder
        func acquire(at instant: Int64) throws -> Bool {
            try intake.ledger.withStore { (store) throws(LedgerError) in
                try store.acquireSyncLease(
                    bundleID: bundleID, environment: environment.rawValue, holder: holder, now: instant,
                    until: instant + 900_000)
            }
        }
        do {
            var leased = try acquire(at: now)
            var announced = false
            while !leased {
                let lease = try intake.ledger.withStore { (store) throws(LedgerError) in
                    try store.syncLease(bundleID: bundleID, environment: environment.rawValue)
                }
                // Released between the two reads: try again at once.
                guard let lease else {
                    leased = try acquire(at: ReceiptDate(intake.clock()).millisecondsSince1970)
                    continue
                }
                guard waitForLease else { return .skipped(holder: lease.holder, until: lease.until) }
                if !announced {
                    report("\(label): waiting for \(lease.holder), syncing it until \(historyDateText(lease.until)) at most")
                    announced = true
                }
                sleepSeconds(1)
                leased = try acquire(at: ReceiptDate(intake.clock()).millisecondsSince1970)
            }
        } catch {
            complain("\(label): the ledger cannot be written: \(error)")
            return .incomplete
        }
        leaseTaken()
        defer {
            _ = try? intake.ledger.withStore { (store) throws(LedgerError) in
                try store.releaseSyncLease(bundleID: bundleID, environment: environment.rawValue, holder: holder)
            }
        }
        // Read under the lease: a sync waited for has just moved it.
        let cursor: ServerAPISyncCursor?
        do {
            cursor = try intake.ledger.withStore { (store) throws(LedgerError) in
                try store.syncCursor(bundleID: bundleID, environment: environment.rawValue)
            }
        } catch {
            complain("\(label): the ledger cannot be read: \(error)")
            return .incomplete
        }
        let since = max(requested ?? cursor?.syncedUntil ?? 0, now - historyWindow)
        guard since < until else {
            report("\(label): nothing to sync (\(historyDateText(since)) is not before \(historyDateText(until)))")
            return .complete
        }
        var client: AppStoreServerAPIClient
        do {
            client = try intake.serverAPIClients.client(bundleID: bundleID, environment: environment)
            if let deadline { client = client.bounded(until: deadline) }
        } catch {
            complain("\(label): \(error.message)")
            return .incomplete
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
                return .incomplete
            }
            counts.pages += 1
            for item in page.notifications {
                switch intake.takeNotification(item.signedPayload) {
                case .recorded(_, let write): write == .stored ? (counts.new += 1) : (counts.known += 1)
                case .refused, .malformed, .invalidID: counts.refused += 1
                case .notStored: counts.notStored += 1
                }
            }
            token = page.hasMore ? page.paginationToken : nil
            if token != nil, !shouldContinue() {
                report(summary(label, since, until, counts) + " (stopped before the end)")
                return .incomplete
            }
        } while token != nil
        report(summary(label, since, until, counts))
        guard counts.refused == 0, counts.notStored == 0, shouldContinue() else { return .incomplete }
        do {
            try intake.ledger.withStore { (store) throws(LedgerError) in
                try store.record(
                    syncCursor: ServerAPISyncCursor(
                        bundleID: bundleID, environment: environment.rawValue, syncedUntil: until, lastSuccessAt: now))
            }
            intake.metrics.serverAPI.recordSync(app: bundleID, environment: environment.rawValue, at: Double(now) / 1000)
        } catch {
            complain("\(label): the cursor cannot be stored: \(error)")
            return .incomplete
        }
        return .complete
    }

    private func summary(_ label: String, _ since: Int64, _ until: Int64, _ counts: Counts) -> String {
        var text = "\(label): \(historyDateText(since)) to \(historyDateText(until)): \(counts.pages) "
            + (counts.pages == 1 ? "page" : "pages")
            + ", notifications: \(counts.new) new, \(counts.known) already known, \(counts.refused) refused"
        if counts.notStored > 0 { text += ", \(counts.notStored) not stored" }
        return text
    }
}

/// One app and environment's refund history (Get Refund History v2): every page of it for each customer the ledger
/// knows there, each signed transaction verified like any other and recorded with source `server_api`, so a refund
/// whose notification was lost reaches the ledger and its outbox (`REFUND`) all the same.
///
/// Bounded twice: only customers (original transactions) with a purchase since `purchasedSince`, and at most
/// `maximumCustomers` of them, the most recently purchased first. A request per customer at least: `store sync
/// --refunds` runs it on demand; serve's own sync does not (the backfill reads each new customer's instead).
public struct RefundHistorySync {
    let intake: LedgerIntake
    let bundleID: String
    let environment: AppStoreEnvironment
    let report: (String) -> Void
    let complain: (String) -> Void
    /// Milliseconds since 1970.
    public var purchasedSince: Int64
    public var maximumCustomers = RefundHistorySync.defaultMaximumCustomers

    public static let defaultMaximumCustomers = 10_000

    public init(
        intake: LedgerIntake, bundleID: String, environment: AppStoreEnvironment, purchasedSince: Int64,
        report: @escaping (String) -> Void, complain: @escaping (String) -> Void
    ) {
        self.intake = intake
        self.bundleID = bundleID
        self.environment = environment
        self.purchasedSince = purchasedSince
        self.report = report
        self.complain = complain
    }

    /// Prints what it did; true when every refund of every customer read is in the ledger.
    public func run() -> Bool {
        let label = "\(bundleID) \(environment.rawValue)"
        let customers: [String]
        let client: AppStoreServerAPIClient
        do {
            customers = try intake.ledger.withStore { (store) throws(LedgerError) in
                try store.originalTransactionIDs(
                    bundleID: bundleID, environment: environment.rawValue, purchasedSince: purchasedSince,
                    limit: maximumCustomers)
            }
        } catch {
            complain("\(label): the ledger cannot be read: \(error)")
            return false
        }
        do {
            client = try intake.serverAPIClients.client(bundleID: bundleID, environment: environment)
        } catch {
            complain("\(label): \(error.message)")
            return false
        }
        var taken = RefundsTaken()
        var customersRead = 0
        var stopped: String?
        for originalTransactionID in customers {
            do {
                let pages = try client.completeRefundHistory(transactionID: originalTransactionID)
                taken += intake.takeRefunds(pages.flatMap(\.signedTransactions))
            } catch where error.code == .notFound {
                // Apple knows no such customer in this environment (a ledger fed by a copy of another, say): nothing
                // of theirs was refunded there.
            } catch {
                // Apple down or refusing the key fails every customer alike: stop rather than ask thousands of times.
                complain("\(label): \(error)")
                stopped = "stopped at a failure"
                break
            }
            customersRead += 1
        }
        var summary = "\(label): refunds: \(taken.read) read, \(taken.new) new, \(taken.refused) refused"
        if taken.notStored > 0 { summary += ", \(taken.notStored) not stored" }
        summary += " (\(customersRead) of \(customers.count) " + (customers.count == 1 ? "customer" : "customers")
            + " purchasing since \(historyDateText(purchasedSince))"
        if customers.count == maximumCustomers { summary += ", the most recent \(maximumCustomers) only" }
        summary += stopped.map { "; \($0))" } ?? ")"
        report(summary)
        return stopped == nil && taken.refused == 0 && taken.notStored == 0
    }
}

/// What taking a customer's refund history did.
struct RefundsTaken {
    /// Signed transactions Apple sent.
    var read = 0
    /// Refunds the ledger did not know (the transaction was missing or not revoked).
    var new = 0
    /// Failed verification: never stored.
    var refused = 0
    /// Verified but not stored: the ledger refused the write.
    var notStored = 0

    static func += (total: inout RefundsTaken, more: RefundsTaken) {
        total.read += more.read
        total.new += more.new
        total.refused += more.refused
        total.notStored += more.notStored
    }
}

extension AppStoreServerAPIClient {
    /// Every page of Get Refund History v2, in order; `maximumPages` bounds a history that never ends.
    func completeRefundHistory(
        transactionID: String, maximumPages: Int = 50
    ) throws(AppStoreServerAPIError) -> [RefundHistoryPage] {
        var pages: [RefundHistoryPage] = []
        var revision: String?
        repeat {
            let page = try refundHistory(transactionID: transactionID, revision: revision)
            pages.append(page)
            revision = page.revision
        } while pages.last!.hasMore && pages.count < maximumPages
        return pages
    }
}

extension LedgerIntake {
    /// Verifies a customer's refunded transactions and records them with source `server_api`: the ledger's own
    /// comparison of before and after emits `REFUND` for each that it did not know as refunded.
    func takeRefunds(_ signed: [String]) -> RefundsTaken {
        let facts = verifiedTransactionFacts(signed)
        var taken = RefundsTaken(read: signed.count, refused: signed.count - facts.count)
        guard !facts.isEmpty else { return taken }
        do {
            try ledger.withStore { (store) throws(LedgerError) in
                var new = 0
                for refund in facts where refund.revocationDate != nil {
                    if try store.transaction(id: refund.transactionID)?.facts.revocationDate == nil { new += 1 }
                }
                try ledger.record(facts, source: .serverAPI, in: store)
                taken.new = new
            }
        } catch {
            log?.event("server api refunds not stored", [("code", ReceiptRoutes.storeProblem(error).code.rawValue)])
            taken.notStored = facts.count
        }
        return taken
    }
}

/// Milliseconds since 1970 as `2026-11-01T12:00:00Z`.
private func historyDateText(_ milliseconds: Int64) -> String {
    ReceiptDate(millisecondsSince1970: milliseconds).rfc3339
}
