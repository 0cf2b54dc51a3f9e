public import Prometheus
public import ReceiptEngine
internal import AppStoreServerAPI
internal import Dispatch
internal import Synchronization

/// The metrics behind `GET /metrics`: swift-prometheus counters, gauges and a histogram in one registry, which
/// renders them as the Prometheus text exposition (format 0.0.4).
///
/// One instance per server, injected into the routes: its own registry, no global metrics system, so tests read
/// exactly what their own requests did. Recording on the request path takes no lock: every series a request can
/// touch is found without the registry (an immutable table and an atomic reference) and counted with an atomic add;
/// request durations are tallied in atomics and handed to the registry's histogram, whose `record` locks, off the
/// request path.
public final class ServiceMetrics: Sendable {
    /// Upper bounds in seconds: a cached-chain validation takes well under a millisecond, a first one a few.
    public static let durationBuckets: [Double] = [
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]

    static let requestsFamily = MetricFamily(
        name: "receiptd_http_requests_total", help: "HTTP requests answered, by route and status.")
    static let validationsFamily = MetricFamily(
        name: "receiptd_validations_total", help: "Receipt verdicts, by result (valid or the error code).")
    static let verdictsFamily = MetricFamily(
        name: "receiptd_verdicts_total", help: "Verdicts on receipts and StoreKit 2 JWS, by kind and result.")
    static let durationFamily = MetricFamily(
        name: "receiptd_request_duration_seconds", help: "Time to answer a request, in seconds.")
    static let notificationConflictsFamily = MetricFamily(
        name: "receiptd_notification_conflicts_total",
        help: "Notifications whose uuid was stored before with a different signed payload (answered as duplicates, "
            + "not stored).")
    static let openConnectionsFamily = MetricFamily(
        name: "receiptd_open_connections", help: "HTTP connections open now.")
    static let logLinesDroppedFamily = MetricFamily(
        name: "receiptd_log_lines_dropped_total",
        help: "Log lines dropped because standard output did not keep up.")

    /// Statuses receiptd answers with, each given a lock-free slot per route; any other status is still counted,
    /// through the registry's lock.
    private static let expectedStatuses = [
        200, 400, 401, 403, 404, 405, 408, 409, 413, 415, 422, 429, 431, 500, 501, 502, 503, 504, 505,
    ]
    /// Route labels besides the route table's: answers the HTTP layer gave before routing.
    private static let unroutedRoute = "unrouted"

    private struct RequestKey: Hashable {
        var route: String
        var status: Int
    }

    private struct VerdictKey: Hashable {
        var kind: String
        var result: String
    }

    /// Where every series lives; `/metrics` is its rendering.
    public let registry: PrometheusCollectorRegistry
    /// Requests to Apple and sync ages (ServerAPIMetrics.swift), in the same registry.
    public let serverAPI: ServerAPIMetrics
    /// Deliveries to webhooks and their backlogs (WebhookMetrics.swift), in the same registry.
    public let webhooks: WebhookMetrics
    /// Claims' calls to Apple not done yet (AppleCallMetrics.swift), in the same registry.
    public let appleCalls: AppleCallMetrics

    private let requests: [RequestKey: SeriesCounter]
    private let validations: [String: SeriesCounter]
    private let verdicts: [VerdictKey: SeriesCounter]
    /// What a valid receipt counts, found once: each one would otherwise hash its labels into both tables.
    private let validReceipt: (validation: SeriesCounter, verdict: SeriesCounter)
    private let durations: DurationTally
    private let notificationConflicts: Counter
    private let logLinesDropped: Counter
    private let openConnections: Gauge
    private let openConnectionsSource = Mutex<(@Sendable () -> Int)?>(nil)

    /// - Parameter registry: where the series are made; a new one unless the caller wants them beside its own.
    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        serverAPI = ServerAPIMetrics(registry: registry)
        webhooks = WebhookMetrics(registry: registry)
        appleCalls = AppleCallMetrics(registry: registry)

        var requests: [RequestKey: SeriesCounter] = [:]
        for route in ReceiptRoutes.Route.allCases.map(\.rawValue) + [Self.unroutedRoute] {
            for status in Self.expectedStatuses {
                requests[RequestKey(route: route, status: status)] = SeriesCounter(
                    Self.requestsFamily, [("route", route), ("status", String(status))], in: registry)
            }
        }
        self.requests = requests

        // Every verdict appears from the start, so that rate() and alerts work before the first failure; verdicts
        // on JWS that did not verify far enough to tell their kind appear once they happen.
        let results = ["valid"] + ValidationError.Code.all.map(\.rawValue)
        var validations: [String: SeriesCounter] = [:]
        var verdicts: [VerdictKey: SeriesCounter] = [:]
        for result in results {
            validations[result] = SeriesCounter(Self.validationsFamily, [("result", result)], in: registry, now: true)
            for kind in SignedDataKind.allCases.map(\.rawValue) {
                verdicts[VerdictKey(kind: kind, result: result)] = SeriesCounter(
                    Self.verdictsFamily, [("kind", kind), ("result", result)], in: registry, now: true)
            }
            verdicts[VerdictKey(kind: "unknown", result: result)] = SeriesCounter(
                Self.verdictsFamily, [("kind", "unknown"), ("result", result)], in: registry)
        }
        self.validations = validations
        self.verdicts = verdicts
        guard let validation = validations["valid"],
            let verdict = verdicts[VerdictKey(kind: SignedDataKind.receipt.rawValue, result: "valid")]
        else { preconditionFailure("every kind's valid series is made above") }
        validReceipt = (validation, verdict)

        durations = DurationTally(
            into: registry.makeValueHistogram(descriptor: Self.durationFamily.descriptor, buckets: Self.durationBuckets),
            bounds: Self.durationBuckets)
        notificationConflicts = registry.makeCounter(descriptor: Self.notificationConflictsFamily.descriptor)
        logLinesDropped = registry.makeCounter(descriptor: Self.logLinesDroppedFamily.descriptor)
        openConnections = registry.makeGauge(descriptor: Self.openConnectionsFamily.descriptor)
    }

    /// Where `receiptd_open_connections` is read from, e.g. `{ server.openConnections }`; set once the server exists.
    public func observeOpenConnections(_ source: @escaping @Sendable () -> Int) {
        openConnectionsSource.withLock { $0 = source }
    }

    /// One answered request. `route` is the matched route's template, never the raw path, to bound cardinality.
    public func recordRequest(route: String, status: Int, seconds: Double) {
        if let counter = requests[RequestKey(route: route, status: status)] {
            counter.increment()
        } else {
            Self.requestsFamily.counter([("route", route), ("status", String(status))], in: registry).increment()
        }
        durations.record(seconds: seconds)
    }

    /// One verdict: `"valid"` or the engine's error code.
    public func recordValidation(_ result: ValidationResult) {
        guard let error = result.error else {
            validReceipt.validation.increment()
            validReceipt.verdict.increment()
            return
        }
        let label = error.code.rawValue
        if let counter = validations[label] {
            counter.increment()
        } else {
            Self.validationsFamily.counter([("result", label)], in: registry).increment()
        }
        count(VerdictKey(kind: SignedDataKind.receipt.rawValue, result: label))
    }

    /// One StoreKit 2 verdict; `kind` is nil when the JWS did not verify far enough to tell (counted as `unknown`).
    public func recordVerdict(kind: SignedDataKind?, error: ValidationError?) {
        count(VerdictKey(kind: kind?.rawValue ?? "unknown", result: error?.code.rawValue ?? "valid"))
    }

    private func count(_ verdict: VerdictKey) {
        if let counter = verdicts[verdict] {
            counter.increment()
        } else {
            Self.verdictsFamily.counter([("kind", verdict.kind), ("result", verdict.result)], in: registry)
                .increment()
        }
    }

    /// One notification whose uuid was stored before with a different signed payload.
    public func recordNotificationConflict() {
        notificationConflicts.increment()
    }

    /// Log lines dropped because standard output did not take them in time.
    public func recordLogLinesDropped(_ count: Int = 1) {
        guard count > 0 else { return }
        logLinesDropped.increment(by: Int64(count))
    }

    /// The exposition text of every series in the registry.
    public func exposition() -> String {
        durations.publish()
        // Read outside any lock of ours: the source belongs to the server and takes its own lock.
        let source = openConnectionsSource.withLock { $0 }
        openConnections.set(to: Double(source?() ?? 0))
        serverAPI.publishSyncAges(now: wallClockSeconds())
        var text = registry.emitToString()
        for (family, type) in Self.familiesNamedBeforeTheirFirstSeries
        where !text.contains("# TYPE \(family.name) ") {
            text += "# HELP \(family.name) \(family.help)\n# TYPE \(family.name) \(type)\n"
        }
        return text
    }

    /// Families whose series appear with their first sample, which the registry does not name until then: named
    /// from the start (HELP and TYPE, no sample) as the exposition always did, so a dashboard or an alert finds every
    /// name on a fresh server, one that never asked Apple included.
    private static let familiesNamedBeforeTheirFirstSeries: [(MetricFamily, String)] = [
        (requestsFamily, "counter"), (ServerAPIMetrics.requestsFamily, "counter"),
        (ServerAPIMetrics.syncAgeFamily, "gauge"), (WebhookMetrics.deliveriesFamily, "counter"),
        (WebhookMetrics.pendingFamily, "gauge"), (WebhookMetrics.oldestPendingFamily, "gauge"),
        (AppleCallMetrics.family, "gauge"),
    ]
}

/// A metric's name and HELP text, the same wherever one of its series is made: the registry refuses a second HELP.
struct MetricFamily: Sendable {
    var name: String
    var help: String

    var descriptor: MetricNameDescriptor { MetricNameDescriptor(metricName: name, unitName: "", helpText: help) }

    /// The series of `labels`, made in `registry` unless it exists; takes the registry's lock.
    func counter(_ labels: [(String, String)], in registry: PrometheusCollectorRegistry) -> Counter {
        registry.makeCounter(descriptor: descriptor, labels: labels)
    }
}

/// One series of a counter, made in the registry on its first count (or at once, for a series that should show 0
/// from the start) and found again by an atomic load instead of the registry's lock.
final class SeriesCounter: Sendable {
    private let counter = AtomicLazyReference<Counter>()
    private let family: MetricFamily
    private let labels: [(String, String)]
    private let registry: PrometheusCollectorRegistry

    init(_ family: MetricFamily, _ labels: [(String, String)], in registry: PrometheusCollectorRegistry, now: Bool = false) {
        self.family = family
        self.labels = labels
        self.registry = registry
        if now { _ = made() }
    }

    func increment() {
        made().increment()
    }

    private func made() -> Counter {
        counter.load() ?? counter.storeIfNil(family.counter(labels, in: registry))
    }
}

/// Request durations tallied per bucket in atomics, so recording one takes no lock. `publish` hands the tally since
/// the previous call to the registry's histogram at each bucket's mean: every bucket's count, the count and the sum
/// stay what recording each duration would have made them. It runs on every scrape and, off the request path, every
/// second, so a scrape never replays more than a second of requests one `record` at a time.
final class DurationTally: Sendable {
    private final class Bucket: Sendable {
        let count = Atomic<Int>(0)
        let nanoseconds = Atomic<Int>(0)
    }

    private let bounds: [Double]
    /// One per bound, and a last one for durations beyond the largest.
    private let buckets: [Bucket]
    private let histogram: ValueHistogram
    private let published: Mutex<[(count: Int, nanoseconds: Int)]>

    init(into histogram: ValueHistogram, bounds: [Double]) {
        self.bounds = bounds
        self.histogram = histogram
        buckets = (0...bounds.count).map { _ in Bucket() }
        published = Mutex(Array(repeating: (0, 0), count: bounds.count + 1))
        publishEverySecond()
    }

    /// Ends a second after the tally is released.
    private func publishEverySecond() {
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + 1) { [weak self] in
            self?.publish()
            self?.publishEverySecond()
        }
    }

    func record(seconds: Double) {
        // A clock that went wrong must not trap the request: negative and NaN count as 0, anything past 30 years
        // as 30 years (which keeps the nanoseconds within Int).
        let seconds = seconds >= 0 ? min(seconds, 1e9) : 0
        let bucket = buckets[bounds.firstIndex { seconds <= $0 } ?? bounds.count]
        bucket.nanoseconds.wrappingAdd(Int((seconds * 1e9).rounded()), ordering: .relaxed)
        bucket.count.wrappingAdd(1, ordering: .relaxed)
    }

    func publish() {
        published.withLock { published in
            for (index, bucket) in buckets.enumerated() {
                let count = bucket.count.load(ordering: .relaxed)
                let nanoseconds = bucket.nanoseconds.load(ordering: .relaxed)
                let newCount = count - published[index].count
                guard newCount > 0 else { continue }
                let newSeconds = Double(nanoseconds - published[index].nanoseconds) / 1e9
                // The mean stays in its bucket even if a duration's nanoseconds were added before its count was.
                let lower = index == 0 ? 0 : bounds[index - 1].nextUp
                let upper = index < bounds.count ? bounds[index] : Double.greatestFiniteMagnitude
                let mean = min(max(newSeconds / Double(newCount), lower), upper)
                for _ in 0..<newCount { histogram.record(mean) }
                published[index] = (count, nanoseconds)
            }
        }
    }
}

/// Whether `GET /readyz` should say the server takes traffic: false until it listens and again once shutdown begins,
/// so a load balancer drains it before connections close.
public final class ServiceReadiness: Sendable {
    private let ready: Atomic<Bool>

    public init(isReady: Bool = true) {
        ready = Atomic(isReady)
    }

    public var isReady: Bool { ready.load(ordering: .acquiring) }

    public func markReady() { ready.store(true, ordering: .releasing) }

    public func markShuttingDown() { ready.store(false, ordering: .releasing) }
}
