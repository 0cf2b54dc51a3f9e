public import AppStoreServerAPI
public import Ledger
public import Prometheus
package import HTTP1Server
import JSONText
internal import Dispatch
internal import Synchronization

/// Where the sender reaches the refund questions: the service's ledger (its health, its bounded waits), or a store.
public protocol ConsumptionLedger: Sendable {
    func withConsumption<Result>(
        _ body: (any LedgerConsumption) throws(LedgerError) -> Result
    ) throws(LedgerError) -> Result
}

extension PurchaseLedger: ConsumptionLedger {
    /// Through the same door as requests: nothing while the ledger is known to be down, each call ending within
    /// `store_timeout`.
    public func withConsumption<Result>(_ body: (any LedgerConsumption) throws(LedgerError) -> Result) throws(LedgerError) -> Result {
        try withReachableStore { (store) throws(LedgerError) in try body(store) }
    }
}

/// `receiptd_consumption_requests{state}`: refund questions per state, as the sender last counted them.
public enum ConsumptionMetrics {
    static let requestsFamily = MetricFamily(
        name: "receiptd_consumption_requests",
        help: "Apple's refund questions (CONSUMPTION_REQUEST) by state: open, sent, failed, expired.")

    public static func publish(_ counts: [ConsumptionRequestState: Int], in registry: PrometheusCollectorRegistry) {
        for state in ConsumptionRequestState.allCases {
            registry.makeGauge(descriptor: requestsFamily.descriptor, labels: [("state", state.rawValue)])
                .set(to: Double(counts[state] ?? 0))
        }
    }
}

/// One round of the sender: expire what Apple's window closed, send every due answer, count the states. Separate
/// from the thread so that tests run rounds at the instants they choose.
public struct ConsumptionRound: Sendable {
    public struct Settings: Sendable {
        /// How long a claim is held: a try with every retry of the client, and its recording.
        public var lease: Int64 = 5 * 60 * 1000
        public var batch = 16
        /// The worker's back-off after the client's own retries failed: doubled per try, up to `longestRetry`.
        public var firstRetry: Int64 = 60 * 1000
        public var longestRetry: Int64 = 60 * 60 * 1000
        /// An answer without `delivery_status` that receiptd cannot fill yet (the consumable is not claimed) is
        /// looked at again after this.
        public var deliveryStatusRecheck: Int64 = 5 * 60 * 1000
        /// Who holds the leases; one per process unless tests run replicas side by side.
        public var holder = WebhookDispatcher.holder

        public init() {}
    }

    /// What became of the answers a round tried, for tests and the log.
    public struct Outcome: Sendable, Hashable {
        public var notificationUUID: String
        public var result: ConsumptionSendResult
        /// False when the lease was lost meanwhile (another replica took over): nothing was recorded.
        public var recorded: Bool
    }

    /// The client of an app (bundle id) in an environment: unbounded, the sender's thread waits for nobody.
    public typealias AppleClient =
        @Sendable (String, AppStoreEnvironment) throws(AppStoreServerAPIError) -> AppStoreServerAPIClient

    let ledger: any ConsumptionLedger
    let apps: [String: ServiceConfiguration.App]
    let client: AppleClient
    let settings: Settings
    let registry: PrometheusCollectorRegistry?
    let log: ServiceLog?

    public init(
        ledger: any ConsumptionLedger, configuration: ServiceConfiguration,
        client: @escaping AppleClient,
        settings: Settings = Settings(), registry: PrometheusCollectorRegistry? = nil, log: ServiceLog? = nil
    ) {
        self.ledger = ledger
        var apps: [String: ServiceConfiguration.App] = [:]
        for app in configuration.apps { apps[app.bundleID] = app }
        self.apps = apps
        self.client = client
        self.settings = settings
        self.registry = registry
        self.log = log
    }

    /// Runs one round at `now` (Unix ms). A ledger that cannot be reached ends it early; the next round tries again.
    @discardableResult
    public func run(now: Int64) -> [Outcome] {
        let claimed: [ClaimedConsumptionRequest]
        do {
            claimed = try ledger.withConsumption { (store) throws(LedgerError) in
                _ = try store.expireConsumptionRequests(now: now)
                return try store.claimConsumptionRequests(
                    holder: settings.holder, now: now, leaseUntil: now + settings.lease, limit: settings.batch)
            }
        } catch {
            log?.event("consumption requests not read", [("ledger_error", error.code.rawValue)])
            return []
        }
        var outcomes: [Outcome] = []
        for request in claimed {
            let result = send(request, now: now)
            let recorded: Bool
            do {
                recorded = try ledger.withConsumption { (store) throws(LedgerError) in
                    try store.finishConsumptionRequest(
                        notificationUUID: request.request.notificationUUID, holder: settings.holder, result: result,
                        at: now)
                }
            } catch {
                // Its lease runs out and the next round sends it again: Apple takes a repeated answer.
                log?.event("consumption answer not recorded", [("ledger_error", error.code.rawValue)])
                recorded = false
            }
            outcomes.append(
                Outcome(notificationUUID: request.request.notificationUUID, result: result, recorded: recorded))
            var fields = [("notification_uuid", ServiceLog.clipped(request.request.notificationUUID))]
            switch result {
            case .sent(let status, _): fields += [("result", "sent"), ("status", String(status))]
            case .retry(_, _, let code, let error):
                fields += [("result", "retry"), ("apple_error_code", code.map { String($0) } ?? "-"), ("error", error)]
            case .failed(_, let code, let error):
                fields += [("result", "failed"), ("apple_error_code", code.map { String($0) } ?? "-"), ("error", error)]
            }
            log?.event("consumption answer", fields)
        }
        if let registry, let counts = try? ledger.withConsumption({ (store) throws(LedgerError) in
            try store.consumptionRequestCounts(now: now)
        }) {
            ConsumptionMetrics.publish(counts, in: registry)
        }
        return outcomes
    }

    func send(_ claimed: ClaimedConsumptionRequest, now: Int64) -> ConsumptionSendResult {
        let request = claimed.request
        guard let stored = request.answer, let answer = ConsumptionAnswerBody(stored: stored.body) else {
            return .failed(status: nil, appleErrorCode: nil, error: "the stored answer cannot be read")
        }
        guard let bundleID = request.bundleID, let app = apps[bundleID] else {
            return .retry(
                at: now + settings.longestRetry, status: nil, appleErrorCode: nil,
                error: "no app in the config has bundle id \(request.bundleID ?? "(none)")")
        }
        // Only what the ledger can vouch for: the customer claimed the consumable, so it was delivered. Consent is
        // never filled in (the answer was refused without it).
        let fromClaims = app.consumptionDeliveryStatusFromClaims && claimed.productType == "Consumable"
            && claimed.isClaimed ? "DELIVERED" : nil
        guard let information = answer.information(fallbackDeliveryStatus: fromClaims) else {
            return .retry(
                at: now + settings.deliveryStatusRecheck, status: nil, appleErrorCode: nil,
                error: "the answer has no delivery_status and the transaction is not a claimed consumable")
        }
        guard let environment = request.environment.flatMap(AppStoreEnvironment.init(rawValue:)) else {
            return .failed(
                status: nil, appleErrorCode: nil,
                error: "environment \(request.environment ?? "(none)") has no App Store Server API")
        }
        let status: Int
        do {
            status = try client(bundleID, environment).sendConsumptionInformation(
                transactionID: request.transactionID, information)
        } catch {
            // Apple refused this body or transaction for good; a 429 or 5xx is worth another try.
            if let status = error.httpStatus, (400..<500).contains(status), status != 429 {
                return .failed(status: status, appleErrorCode: error.appleErrorCode, error: error.detail)
            }
            let backoff = min(settings.longestRetry, settings.firstRetry << min(request.attempts, 20))
            let retryAfter = Int64(error.retryAfterSeconds ?? 0) * 1000
            return .retry(
                at: now + max(backoff, retryAfter), status: error.httpStatus, appleErrorCode: error.appleErrorCode,
                error: error.detail)
        }
        // Any 2xx is taken (Apple documents 202 Accepted); the ledger keeps the one Apple gave.
        return .sent(status: status, body: Self.appleBody(information))
    }

    /// The body as the client sends it (Apple's `ConsumptionRequest`, members in its order): what the ledger keeps.
    static func appleBody(_ information: ConsumptionInformation) -> String {
        var members: [(key: String, value: JSONValue)] = [("customerConsented", .bool(information.customerConsented))]
        if let percentage = information.consumptionPercentage {
            members.append(("consumptionPercentage", .integer(Int64(percentage))))
        }
        members.append(("deliveryStatus", .string(information.deliveryStatus)))
        if let preference = information.refundPreference { members.append(("refundPreference", .string(preference))) }
        members.append(("sampleContentProvided", .bool(information.sampleContentProvided)))
        return String(decoding: JSONValue.object(members).serialized(), as: UTF8.self)
    }
}

/// Answers Apple's refund questions (issue 26) on one thread of its own, never a request's or an event loop's:
/// a round every `poll` seconds, or at once when nudged (a `CONSUMPTION_REQUEST` stored, an answer PUT).
public final class ConsumptionSender: Sendable {
    private let nudge: WorkerNudge
    private let stopping = Atomic<Bool>(false)
    private let stoppingSince = Mutex<UInt64?>(nil)
    private let ended = DispatchSemaphore(value: 0)

    package init(
        round: ConsumptionRound, nudge: WorkerNudge, poll: Double, clock: @escaping @Sendable () -> Int64
    ) throws(SystemCallError) {
        self.nudge = nudge
        try startThread { [self] in
            while !stopping.load(ordering: .acquiring) {
                round.run(now: clock())
                guard !stopping.load(ordering: .acquiring) else { break }
                self.nudge.wait(seconds: poll)
            }
            ended.signal()
        }
    }

    /// The sender `serve` runs: nil without a ledger or without an app that has a `server_api` key.
    package static func start(
        _ intake: LedgerIntake, registry: PrometheusCollectorRegistry, log: ServiceLog, poll: Double = 30
    ) throws(SystemCallError) -> ConsumptionSender? {
        guard intake.ledger.isConfigured, !intake.configuration.serverAPIApps.isEmpty else { return nil }
        let clients = intake.serverAPIClients
        let round = ConsumptionRound(
            ledger: intake.ledger, configuration: intake.configuration,
            client: { (bundleID, environment) throws(AppStoreServerAPIError) in
                try clients.client(bundleID: bundleID, environment: environment)
            },
            registry: registry, log: log)
        return try ConsumptionSender(
            round: round, nudge: intake.consumptionNudge, poll: poll, clock: unixMillisecondsNow)
    }

    /// Starts no round after this; returns at once.
    public func beginStopping() {
        stoppingSince.withLock { $0 = $0 ?? DispatchTime.now().uptimeNanoseconds }
        stopping.store(true, ordering: .releasing)
        nudge.nudge()
    }

    /// Waits for a round under way, at most `seconds` after `beginStopping()` was first called (or now). A send
    /// still waiting on Apple then is abandoned: its lease runs out and the next claimant sends it again. True when
    /// none was.
    @discardableResult
    public func stop(within seconds: Double) -> Bool {
        beginStopping()
        let since = stoppingSince.withLock { $0 } ?? DispatchTime.now().uptimeNanoseconds
        let deadline = DispatchTime(uptimeNanoseconds: since + UInt64(max(0, min(seconds, 86_400)) * 1e9))
        return ended.wait(timeout: deadline) == .success
    }
}
