internal import AppStoreServerAPI
package import HTTP1Server
public import Ledger
internal import Dispatch
internal import Synchronization

extension ServiceConfiguration {
    /// What a granted claim owes Apple, per app: `finish_on_claim` and `write_app_account_tokens`, for apps with a
    /// `server_api` key (without one the calls could never be made).
    public var appleCallRules: AppleCallRules {
        var duties: [String: ClaimDuties] = [:]
        for app in apps where app.serverAPI != nil && (app.finishOnClaim || app.writeAppAccountTokens) {
            duties[app.bundleID] = ClaimDuties(
                finishTransaction: app.finishOnClaim, setAppAccountToken: app.writeAppAccountTokens)
        }
        guard !duties.isEmpty else { return .none }
        return AppleCallRules { [duties] bundleID in duties[bundleID] ?? ClaimDuties() }
    }
}

/// Makes the calls granted claims queued in `apple_calls` (issue 26): Finish Transaction and Set App Account Token.
///
/// One thread of its own, never an event loop: it claims due calls under a lease, makes each with the app's
/// unbounded client for the transaction's environment (the client's retries and `Retry-After` first), and records
/// Apple's outcome. A call Apple refuses for good (a 4xx other than 401 and 429) fails at once; any other failure is
/// tried again after a back-off that doubles from an hour up to a day, and fails after `maximumAttempts` tries
/// (some 80 hours after the first), keeping Apple's status and error code. Nobody's request waits on it.
public final class AppleCallWorker: Sendable {
    public struct Settings: Sendable {
        /// How often an idle worker looks for due calls, in seconds (a claim nudges it sooner).
        public var idlePoll = 15.0
        /// Calls claimed at once.
        public var batch = 16
        /// How long a claimed call is this worker's, in milliseconds: past it another replica may make it again.
        public var lease: Int64 = 15 * 60_000
        /// The pause after a failed try, doubling per try from `firstRetry` up to `longestRetry`, in milliseconds.
        public var firstRetry: Int64 = 3_600_000
        public var longestRetry: Int64 = 86_400_000
        /// Tries before a call that keeps failing is left `failed`.
        public var maximumAttempts = 8
        /// The longest pause between tries of an unavailable ledger, in seconds.
        public var longestLedgerPause = 5.0
        /// Who holds the leases of this worker's claims.
        public var holder = WebhookDispatcher.holder
        /// How often `receiptd_apple_calls` is counted, in milliseconds.
        public var countInterval: Int64 = 5_000

        public init() {}
    }

    private struct State {
        var stoppingSince: UInt64?
        var isRunning = false
    }

    private let ledger: PurchaseLedger
    private let clients: ServerAPIClients
    private let nudge: WorkerNudge
    private let settings: Settings
    private let log: ServiceLog?
    private let metrics: AppleCallMetrics?
    private let clock: @Sendable () -> Int64
    private let state = Mutex(State())
    private let ended = DispatchSemaphore(value: 0)

    package init(
        ledger: PurchaseLedger, clients: ServerAPIClients, nudge: WorkerNudge, settings: Settings = Settings(),
        log: ServiceLog?, metrics: AppleCallMetrics? = nil, clock: @escaping @Sendable () -> Int64 = unixMillisecondsNow
    ) throws(SystemCallError) {
        self.ledger = ledger
        self.clients = clients
        self.nudge = nudge
        self.settings = settings
        self.log = log
        self.metrics = metrics
        self.clock = clock
        state.withLock { $0.isRunning = true }
        try startThread { [self] in
            run()
            state.withLock { $0.isRunning = false }
            ended.signal()
        }
    }

    /// The worker `serve` runs: nil without a store or when no app with a `server_api` key has `finish_on_claim` or
    /// `write_app_account_tokens`.
    package static func start(
        configuration: ServiceConfiguration, ledger: PurchaseLedger, clients: ServerAPIClients, nudge: WorkerNudge,
        metrics: AppleCallMetrics, log: ServiceLog
    ) throws(SystemCallError) -> AppleCallWorker? {
        guard ledger.isConfigured else { return nil }
        let apps = configuration.serverAPIApps.filter { $0.finishOnClaim || $0.writeAppAccountTokens }
        guard !apps.isEmpty else { return nil }
        for app in apps {
            log.event(
                "apple calls",
                [("app", app.bundleID), ("finish_on_claim", "\(app.finishOnClaim)"),
                 ("write_app_account_tokens", "\(app.writeAppAccountTokens)")])
        }
        return try AppleCallWorker(ledger: ledger, clients: clients, nudge: nudge, log: log, metrics: metrics)
    }

    private var isStopping: Bool { state.withLock { $0.stoppingSince != nil } }

    /// Stops claiming and returns at once; a call under way goes on.
    public func beginStopping() {
        let first = state.withLock { state in
            defer { state.stoppingSince = state.stoppingSince ?? DispatchTime.now().uptimeNanoseconds }
            return state.stoppingSince == nil
        }
        if first { nudge.nudge() }
    }

    /// Stops, waiting at most `seconds` after `beginStopping()` was first called for a call under way to end and be
    /// recorded; one still waiting on Apple then is abandoned to its lease (the next claimant makes it again). True
    /// when none was abandoned.
    @discardableResult
    public func stop(within seconds: Double) -> Bool {
        beginStopping()
        guard state.withLock({ $0.isRunning }) else { return true }
        let since = state.withLock { $0.stoppingSince } ?? DispatchTime.now().uptimeNanoseconds
        let deadline = DispatchTime(uptimeNanoseconds: since + UInt64(max(0, min(seconds, 86_400)) * 1e9))
        guard ended.wait(timeout: deadline) == .success else {
            log?.event("apple calls abandoned", [("reason", "still waiting on Apple at shutdown; the lease runs out")])
            return false
        }
        ended.signal()
        return true
    }

    private func run() {
        var ledgerPause = 0.25
        var ledgerProblem: String?
        var lastCount: Int64?
        while !isStopping {
            let now = clock()
            if let metrics, lastCount.map({ now - $0 >= settings.countInterval }) ?? true {
                lastCount = now
                if let unfinished = try? ledger.withStore({ (store) throws(LedgerError) in
                    try store.appleCalls(in: AppleCallMetrics.counted, limit: 100_000)
                }) {
                    metrics.publish(unfinished)
                }
            }
            let calls: [AppleCall]
            do {
                calls = try ledger.withStore { (store) throws(LedgerError) in
                    try store.claimAppleCalls(
                        holder: settings.holder, now: now, leaseUntil: now + settings.lease, limit: settings.batch)
                }
            } catch {
                let reason = Self.describe(error)
                if ledgerProblem != reason {
                    log?.event("apple calls paused", [("reason", "the ledger is unavailable: \(reason)")])
                    ledgerProblem = reason
                }
                nudge.wait(seconds: ledgerPause)
                ledgerPause = min(ledgerPause * 2, settings.longestLedgerPause)
                continue
            }
            if ledgerProblem != nil {
                log?.event("apple calls resumed")
                ledgerProblem = nil
            }
            ledgerPause = 0.25
            for call in calls where !isStopping {
                let result = outcome(of: call)
                do {
                    _ = try ledger.withStore { (store) throws(LedgerError) in
                        try store.finishAppleCall(callID: call.callID, holder: settings.holder, result: result, at: clock())
                    }
                } catch {
                    // The lease runs out and the call is made again: both calls are idempotent at Apple.
                    log?.event(
                        "apple call not recorded", [("kind", call.kind.rawValue), ("reason", Self.describe(error))])
                }
            }
            if calls.count < settings.batch { nudge.wait(seconds: settings.idlePoll) }
        }
    }

    /// Makes the call and says how it ended. Transaction ids are logged; the token never is.
    func outcome(of call: AppleCall) -> AppleCallResult {
        do throws(AppStoreServerAPIError) {
            guard let environment = AppStoreEnvironment(rawValue: call.environment) else {
                throw AppStoreServerAPIError(
                    code: .rejected, message: "the transaction's environment \(call.environment) has no Apple host")
            }
            let client = try clients.client(bundleID: call.bundleID, environment: environment)
            switch call.kind {
            case .finishTransaction:
                try client.finishTransaction(transactionID: call.targetID)
            case .setAppAccountToken:
                try client.setAppAccountToken(originalTransactionID: call.targetID, token: call.argument ?? "")
            }
            log?.event("apple call done", [("kind", call.kind.rawValue), ("transaction_id", call.targetID)])
            return .done
        } catch {
            let result = Self.result(of: error, attempts: call.attempts + 1, now: clock(), settings: settings)
            let state = if case .failed = result { "failed" } else { "retrying" }
            log?.event(
                "apple call \(state)",
                [("kind", call.kind.rawValue), ("transaction_id", call.targetID), ("code", error.code.rawValue),
                 ("apple_error_code", error.appleErrorCode.map { String($0) } ?? "-")])
            return result
        }
    }

    /// `attempts` counts this try.
    static func result(of error: AppStoreServerAPIError, attempts: Int, now: Int64, settings: Settings)
        -> AppleCallResult
    {
        let message = "\(error.code.rawValue): \(error.message)"
        // Apple said no to this call itself; asking again cannot change its mind.
        let refused = error.code == .rejected || error.code == .notFound
        guard !refused, attempts < settings.maximumAttempts else {
            return .failed(status: error.httpStatus, appleErrorCode: error.appleErrorCode, error: message)
        }
        var pause = settings.firstRetry
        for _ in 1..<max(1, attempts) where pause < settings.longestRetry { pause *= 2 }
        pause = min(pause, settings.longestRetry)
        if let seconds = error.retryAfterSeconds { pause = max(pause, Int64(seconds) * 1000) }
        return .retry(at: now + pause, status: error.httpStatus, appleErrorCode: error.appleErrorCode, error: message)
    }

    private static func describe(_ error: PurchaseLedger.Unavailability) -> String {
        switch error {
        case .notConfigured: "no store is configured"
        case .unavailable(let cause): cause.message
        }
    }
}
