public import Ledger
package import HTTP1Server
internal import Dispatch
internal import Synchronization
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// Where a dispatcher reaches the outbox: the service's ledger (its health, its bounded waits), or a store directly.
public protocol WebhookOutbox: Sendable {
    func withOutbox<Result>(_ body: (any LedgerOutbox) throws(LedgerError) -> Result) throws(LedgerError) -> Result
}

extension PurchaseLedger: WebhookOutbox {
    /// Through the same door as requests: nothing while the ledger is known to be down, each call ending within
    /// `store_timeout`.
    public func withOutbox<Result>(_ body: (any LedgerOutbox) throws(LedgerError) -> Result) throws(LedgerError) -> Result {
        try withReachableStore { (store) throws(LedgerError) in try body(store) }
    }
}

/// Delivers the outbox's events to the webhooks (issue 25), at least once and in order per stream.
///
/// Each webhook has its own lane: one thread that claims the heads of due streams from the ledger under a lease and
/// records how their tries ended, and `concurrency` threads that send them, so a slow or hung receiver holds only its
/// own lane, and nothing runs on a request's thread, an event loop or Dispatch's shared pool. A stream has at most one
/// delivery in flight: the ledger hands out only heads of streams, and the lane never sends a stream it is still
/// sending. One more thread counts the backlogs for `/metrics` every few seconds and prunes delivered events hourly.
///
/// A ledger that is unavailable pauses the lanes (polling it less often, up to every few seconds); what was sent
/// meanwhile is recorded once it answers again, or, if its lease ran out first, sent again by whoever claims it.
public final class WebhookDispatcher: Sendable {
    public struct Settings: Sendable {
        /// Tries in flight per webhook: enough for a local receiver to take over a thousand events a second.
        public var concurrency = 32
        /// How often an idle lane asks the ledger for due deliveries, in seconds.
        public var idlePoll = 0.25
        /// The longest pause between tries of an unavailable ledger, in seconds.
        public var longestLedgerPause = 5.0
        /// How often the backlogs behind `receiptd_webhook_pending` are counted, in seconds.
        public var backlogInterval = 5.0
        /// How often delivered events are pruned, in seconds.
        public var pruneInterval = 3600.0
        /// `webhook_retention_days`.
        public var retentionDays = 30
        public var retrySchedule = WebhookRetrySchedule()
        /// Who holds the leases of this dispatcher's claims; one per process unless tests run replicas side by side.
        public var holder = WebhookDispatcher.holder

        public init() {}
    }

    /// This process as a lease holder: host, pid and a random number, unique across replicas and restarts.
    public static let holder: String = {
        var name = [CChar](repeating: 0, count: 256)
        let host = gethostname(&name, name.count - 1) == 0
            ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "host"
        return "\(host)-\(getpid())-\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
    }()

    private let lanes: [WebhookLane]
    private let housekeeping: Housekeeping
    /// When stopping began (`DispatchTime`'s nanoseconds): a shutdown's grace counts from it, as the servers' does.
    private let stoppingSince = Mutex<UInt64?>(nil)

    /// Starts a lane per webhook and the housekeeping thread.
    ///
    /// - Parameters:
    ///   - clock: now, in Unix milliseconds.
    ///   - random: a value in `0..<1`, for the back-off's jitter.
    package init(
        webhooks: [Webhook], outbox: some WebhookOutbox, settings: Settings = Settings(), metrics: WebhookMetrics,
        log: ServiceLog?, clock: @escaping @Sendable () -> Int64 = unixMillisecondsNow,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) throws(SystemCallError) {
        let context = LaneContext(
            outbox: outbox, settings: settings, metrics: metrics, log: log, clock: clock, random: random)
        lanes = webhooks.map { WebhookLane(webhook: $0, context: context) }
        housekeeping = Housekeeping(webhooks: webhooks.map(\.name), context: context)
        for webhook in webhooks { metrics.register(webhook: webhook.name) }
        for lane in lanes { try lane.start() }
        try housekeeping.start()
    }

    /// The dispatcher `serve` runs: nil without webhooks. A webhook without a store never gets here (the start-up
    /// checks refuse it: events live in the ledger). `nudge` (the intake's) wakes it after each write from then on.
    package static func start(
        configuration: ServiceConfiguration, ledger: PurchaseLedger, nudge: WebhookNudge, metrics: WebhookMetrics,
        log: ServiceLog
    ) throws(SystemCallError) -> WebhookDispatcher? {
        guard !configuration.webhooks.isEmpty, ledger.isConfigured else { return nil }
        var settings = Settings()
        settings.retentionDays = configuration.webhookRetentionDays
        for webhook in configuration.webhooks {
            log.event(
                "webhook", [("name", webhook.name), ("timeout", "\(webhook.timeout)s"),
                            ("events", webhook.events.map { $0.sorted().joined(separator: ",") } ?? "*")])
        }
        let dispatcher = try WebhookDispatcher(
            webhooks: configuration.webhooks, outbox: ledger, settings: settings, metrics: metrics, log: log)
        nudge.attach(dispatcher)
        return dispatcher
    }

    /// Asks every lane to look for due deliveries now rather than at its next poll (after a write stored events).
    public func nudge() {
        for lane in lanes { lane.wake() }
    }

    /// Stops claiming and returns at once; tries under way go on. `stop(within:)` calls it first.
    public func beginStopping() {
        stoppingSince.withLock { $0 = $0 ?? DispatchTime.now().uptimeNanoseconds }
        housekeeping.beginStopping()
        for lane in lanes { lane.beginStopping() }
    }

    /// Stops claiming, and waits for the tries under way to end and be recorded, at most `seconds` after
    /// `beginStopping()` was first called (or now). A try still under way then is abandoned: its lease runs out and
    /// the next claimant (another replica, the next start) sends it again. True when none was abandoned.
    @discardableResult
    public func stop(within seconds: Double) -> Bool {
        beginStopping()
        let since = stoppingSince.withLock { $0 } ?? DispatchTime.now().uptimeNanoseconds
        let deadline = DispatchTime(uptimeNanoseconds: since + UInt64(max(0, min(seconds, 86_400)) * 1e9))
        var finished = true
        for lane in lanes where !lane.waitUntilStopped(deadline: deadline) { finished = false }
        housekeeping.waitUntilStopped(deadline: deadline)
        return finished
    }
}

/// What every lane shares.
struct LaneContext: Sendable {
    let outbox: any WebhookOutbox
    let settings: WebhookDispatcher.Settings
    let metrics: WebhookMetrics
    let log: ServiceLog?
    let clock: @Sendable () -> Int64
    let random: @Sendable () -> Double

    init(
        outbox: some WebhookOutbox, settings: WebhookDispatcher.Settings, metrics: WebhookMetrics, log: ServiceLog?,
        clock: @escaping @Sendable () -> Int64, random: @escaping @Sendable () -> Double
    ) {
        self.outbox = outbox
        self.settings = settings
        self.metrics = metrics
        self.log = log
        self.clock = clock
        self.random = random
    }
}

/// Tells the dispatcher `serve` started that a write may have stored events, so that its lanes claim them now rather
/// than at their next poll. The intake holds one from the start; until a dispatcher is attached (or without
/// webhooks) a nudge does nothing. Never waits: a lane already nudged is not signalled again.
public final class WebhookNudge: Sendable {
    private let dispatcher = Mutex<WebhookDispatcher?>(nil)

    public init() {}

    func attach(_ dispatcher: WebhookDispatcher) { self.dispatcher.withLock { $0 = dispatcher } }

    public func nudge() { dispatcher.withLock { $0 }?.nudge() }
}

/// One webhook's claim thread and its senders.
final class WebhookLane: Sendable {
    private struct Finished: Sendable {
        var delivery: ClaimedDelivery
        var result: DeliveryResult
    }

    private struct State {
        /// Streams sent or waiting to be recorded: never claimed twice at once, even if a lease ran out.
        var streamsInFlight: Set<String> = []
        /// Claimed and not yet taken by a sender.
        var queued: [ClaimedDelivery] = []
        /// Sent, waiting to be recorded.
        var finished: [Finished] = []
        var isStopping = false
        /// Threads still running; the lane has stopped when none is.
        var runningThreads = 0
        /// When `retryNow` was last asked (Unix ms): a receiver that recovered needs it once, not per delivery.
        var lastRetryNow: Int64?
    }

    let webhook: Webhook
    private let sender: WebhookSender
    private let context: LaneContext
    private let state = Mutex(State())
    /// Wakes the claim thread: a try ended, a nudge, a stop.
    private let claimWake = DispatchSemaphore(value: 0)
    /// A nudge not yet followed by a claim: every write nudges, and one claim answers all the nudges before it.
    private let isNudged = Atomic<Bool>(false)
    /// One signal per queued delivery (and per sender at a stop).
    private let sendWake = DispatchSemaphore(value: 0)
    /// Signalled by each thread as it ends.
    private let threadEnded = DispatchSemaphore(value: 0)

    /// The lease of a claim: long enough for a try and its recording, short enough that a replica killed
    /// mid-delivery is taken over within a minute.
    var lease: Int64 { Int64(min(60, webhook.timeout + 5) * 1000) }

    init(webhook: Webhook, context: LaneContext) {
        self.webhook = webhook
        self.context = context
        sender = WebhookSender(webhook: webhook, concurrency: context.settings.concurrency)
    }

    func start() throws(SystemCallError) {
        let senders = max(1, context.settings.concurrency)
        state.withLock { $0.runningThreads = senders + 1 }
        try startThread { [self] in
            claimLoop()
            threadEnded.signal()
        }
        for _ in 0..<senders {
            try startThread { [self] in
                sendLoop()
                threadEnded.signal()
            }
        }
    }

    func wake() {
        if !isNudged.exchange(true, ordering: .acquiringAndReleasing) { claimWake.signal() }
    }

    func beginStopping() {
        let first = state.withLock { state in
            defer { state.isStopping = true }
            return !state.isStopping
        }
        guard first else { return }
        claimWake.signal()
        for _ in 0..<max(1, context.settings.concurrency) { sendWake.signal() }
    }

    /// True when every thread ended by `deadline`.
    func waitUntilStopped(deadline: DispatchTime) -> Bool {
        while state.withLock({ $0.runningThreads }) > 0 {
            guard threadEnded.wait(timeout: deadline) == .success else {
                if !state.withLock({ $0.streamsInFlight.isEmpty }) {
                    context.log?.event(
                        "webhook deliveries abandoned",
                        [("webhook", webhook.name), ("reason", "still sending at shutdown; their leases run out")])
                }
                return false
            }
            state.withLock { $0.runningThreads -= 1 }
        }
        return true
    }

    // MARK: - Claiming

    private func claimLoop() {
        let settings = context.settings
        var ledgerPause = settings.idlePoll
        var ledgerProblem: String?
        func ledgerFailed(_ error: LedgerError) {
            if ledgerProblem != error.message {
                context.log?.event(
                    "webhook deliveries paused",
                    [("webhook", webhook.name), ("reason", "the ledger is unavailable: \(error.message)")])
                ledgerProblem = error.message
            }
            _ = claimWake.wait(timeout: .now() + ledgerPause)
            ledgerPause = min(ledgerPause * 2, settings.longestLedgerPause)
        }
        while true {
            let (finished, isStopping, inFlight) = state.withLock { state in
                defer { state.finished = [] }
                return (state.finished, state.isStopping, state.streamsInFlight.count)
            }
            if !finished.isEmpty {
                do throws(LedgerError) {
                    try record(finished)
                } catch {
                    // Stopping, the store may be closing: leave the tries to their leases rather than linger.
                    if isStopping { return }
                    state.withLock { $0.finished.insert(contentsOf: finished, at: 0) }
                    ledgerFailed(error)
                    continue
                }
            }
            if isStopping {
                // Only what was sent is still recorded; the queue's leases run out.
                let waiting = state.withLock { state in
                    for delivery in state.queued { state.streamsInFlight.remove(delivery.stream) }
                    state.queued = []
                    return state.streamsInFlight.count
                }
                if waiting == 0 { return }
                _ = claimWake.wait(timeout: .now() + settings.idlePoll)
                continue
            }
            let free = max(1, settings.concurrency) - inFlight + finished.count
            guard free > 0 else {
                _ = claimWake.wait(timeout: .now() + settings.idlePoll)
                continue
            }
            let claimed: [ClaimedDelivery]
            // Cleared before the claim: a write that commits during it nudges again, and is claimed next.
            isNudged.store(false, ordering: .releasing)
            do throws(LedgerError) {
                let now = context.clock()
                claimed = try context.outbox.withOutbox { (outbox) throws(LedgerError) in
                    try outbox.claimDeliveries(
                        webhook: webhook.name, holder: context.settings.holder, now: now, leaseUntil: now + lease,
                        limit: free)
                }
            } catch {
                ledgerFailed(error)
                continue
            }
            if ledgerProblem != nil {
                context.log?.event("webhook deliveries resumed", [("webhook", webhook.name)])
                ledgerProblem = nil
            }
            ledgerPause = settings.idlePoll
            let handedOut = state.withLock { state in
                var count = 0
                for delivery in claimed where state.streamsInFlight.insert(delivery.stream).inserted {
                    state.queued.append(delivery)
                    count += 1
                }
                return count
            }
            for _ in 0..<handedOut { sendWake.signal() }
            // A full batch: more may be due at once, as soon as a sender is free.
            if claimed.count < free { _ = claimWake.wait(timeout: .now() + settings.idlePoll) }
        }
    }

    /// Writes how the tries ended, and makes the webhook's waiting deliveries due now when one that had failed got
    /// through: the receiver has recovered, and its backlog need not wait out each stream's back-off.
    private func record(_ finished: [Finished]) throws(LedgerError) {
        let now = context.clock()
        let recovered = finished.contains { item in
            if case .delivered = item.result { return item.delivery.attempts > 0 }
            return false
        }
        let askRetryNow = recovered && state.withLock { state in
            if let last = state.lastRetryNow, now - last < 1000 { return false }
            state.lastRetryNow = now
            return true
        }
        let kept = try context.outbox.withOutbox { (outbox) throws(LedgerError) in
            // One transaction for all the tries that ended meanwhile: under load the lane records many per commit.
            let kept = try outbox.finishDeliveries(
                webhook: webhook.name, holder: context.settings.holder,
                finished.map { DeliveryFinish(eventID: $0.delivery.eventID, result: $0.result) }, at: now)
            if askRetryNow { _ = try outbox.retryNow(webhook: webhook.name, at: now) }
            return kept
        }
        for (item, wasKept) in zip(finished, kept) where !wasKept {
            context.log?.event(
                "webhook delivery taken over",
                [("webhook", webhook.name), ("event", item.delivery.eventID),
                 ("reason", "its lease ran out before the try was recorded")])
        }
        state.withLock { state in
            for item in finished { state.streamsInFlight.remove(item.delivery.stream) }
        }
    }

    // MARK: - Sending

    private func sendLoop() {
        while true {
            sendWake.wait()
            let next: ClaimedDelivery? = state.withLock { state in
                state.queued.isEmpty ? nil : state.queued.removeFirst()
            }
            guard let delivery = next else {
                if state.withLock({ $0.isStopping }) { return }
                continue
            }
            let result = send(delivery)
            state.withLock { $0.finished.append(Finished(delivery: delivery, result: result)) }
            claimWake.signal()
        }
    }

    private func send(_ delivery: ClaimedDelivery) -> DeliveryResult {
        let answer = sender.send(eventID: delivery.eventID, body: Array(delivery.body.utf8), at: context.clock())
        let result: DeliveryResult
        let outcome: WebhookMetrics.Outcome
        if answer.isDelivered, let status = answer.status {
            result = .delivered(status: status)
            outcome = .delivered
        } else {
            result = context.settings.retrySchedule.result(
                afterAttempts: delivery.attempts, createdAt: delivery.createdAt, now: context.clock(),
                status: answer.status, error: answer.error ?? "no answer", random: context.random())
            if case .failed = result { outcome = .failed } else { outcome = .retry }
        }
        context.metrics.recordTry(webhook: webhook.name, outcome: outcome, seconds: answer.seconds)
        var fields = [
            ("webhook", webhook.name), ("event", delivery.eventID), ("type", delivery.type),
            ("outcome", outcome.rawValue), ("attempt", String(delivery.attempts + 1)),
            ("status", answer.status.map(String.init) ?? "-"),
        ]
        if let error = answer.error { fields.append(("error", error)) }
        if case .retry(let at, _, _) = result { fields.append(("retry_in", "\(max(0, at - context.clock()) / 1000)s")) }
        context.log?.event("webhook delivery", fields)
        return result
    }
}

/// Counts the backlogs for `/metrics` and prunes delivered events, on its own thread.
private final class Housekeeping: Sendable {
    private let webhooks: [String]
    private let context: LaneContext
    private let stopping = Atomic<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)
    private let ended = DispatchSemaphore(value: 0)

    init(webhooks: [String], context: LaneContext) {
        self.webhooks = webhooks
        self.context = context
    }

    func start() throws(SystemCallError) {
        try startThread { [self] in
            run()
            ended.signal()
        }
    }

    func beginStopping() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        wake.signal()
    }

    func waitUntilStopped(deadline: DispatchTime) {
        _ = ended.wait(timeout: deadline)
    }

    private func run() {
        let settings = context.settings
        var nextPrune = context.clock()
        while !stopping.load(ordering: .acquiring) {
            let now = context.clock()
            if let backlogs = try? context.outbox.withOutbox({ (outbox) throws(LedgerError) in
                try outbox.webhookBacklogs()
            }) {
                for name in webhooks {
                    context.metrics.publish(
                        backlogs.first { $0.webhook == name }
                            ?? WebhookBacklog(webhook: name, pending: 0, oldestPendingCreatedAt: nil),
                        now: now)
                }
            }
            do throws(LedgerError) {
                let released = try context.outbox.withOutbox { (outbox) throws(LedgerError) in
                    try outbox.releaseStrandedDeliveries(at: now)
                }
                if released > 0 {
                    context.log?.event("webhook deliveries released", [("deliveries", String(released))])
                }
            } catch {
                // Tried again at the next count: the ledger was only away.
            }
            if now >= nextPrune {
                let before = now - Int64(settings.retentionDays) * 86_400_000
                do throws(LedgerError) {
                    let pruned = try context.outbox.withOutbox { (outbox) throws(LedgerError) in
                        try outbox.pruneDeliveredEvents(deliveredBefore: before)
                    }
                    if pruned > 0 {
                        context.log?.event(
                            "webhook events pruned",
                            [("events", String(pruned)), ("delivered_before_days", String(settings.retentionDays))])
                    }
                    nextPrune = now + Int64(settings.pruneInterval * 1000)
                } catch {
                    // Tried again at the next count rather than an hour later: the ledger was only away.
                }
            }
            _ = wake.wait(timeout: .now() + settings.backlogInterval)
        }
    }
}
