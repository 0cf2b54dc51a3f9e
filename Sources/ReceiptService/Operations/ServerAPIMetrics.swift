internal import AppStoreServerAPI
public import Prometheus
internal import Synchronization

/// The App Store Server API part of `/metrics`: requests to Apple by endpoint and outcome, and how long ago each app
/// and environment's notification history was last synced completely. Its series live in the service's registry.
public final class ServerAPIMetrics: Sendable {
    static let requestsFamily = MetricFamily(
        name: "receiptd_server_api_requests_total",
        help: "Requests to Apple's App Store Server API, by endpoint and outcome.")
    static let syncAgeFamily = MetricFamily(
        name: "receiptd_server_api_last_sync_age_seconds",
        help: "Seconds since the last complete sync of Apple's notification history.")
    static let waitingFamily = MetricFamily(
        name: "receiptd_server_api_waiting_requests",
        help: "Requests waiting on Apple now (at most server_api.max_concurrent_requests).")

    private struct SyncKey: Hashable {
        var app: String
        var environment: String
    }

    private let registry: PrometheusCollectorRegistry
    /// Each app and environment's gauge with the time of its last sync: the age is set when `/metrics` is read.
    private let lastSyncs = Mutex<[SyncKey: (gauge: Gauge, time: Double)]>([:])
    /// `receiptd_server_api_waiting_requests`: read from the threads of the routes that wait on Apple at each scrape.
    private let waitingRequests = Mutex<(source: @Sendable () -> Int, gauge: Gauge)?>(nil)

    public init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    /// One request sent to Apple: `endpoint` as `get_notification_history`, `outcome` as `ok`, `rate_limited`,
    /// `server_error`, `unauthorized`, `not_found`, `client_error` or `network_error`. Waits on the registry's lock,
    /// which is nothing beside the request to Apple it counts.
    public func recordRequest(endpoint: String, outcome: String) {
        Self.requestsFamily.counter([("endpoint", endpoint), ("outcome", outcome)], in: registry).increment()
    }

    /// A sync of `app` in `environment` that read its whole span, at `time` (seconds since 1970).
    public func recordSync(app: String, environment: String, at time: Double) {
        let key = SyncKey(app: app, environment: environment)
        let gauge = registry.makeGauge(
            descriptor: Self.syncAgeFamily.descriptor, labels: [("app", app), ("environment", environment)])
        lastSyncs.withLock { $0[key] = (gauge, time) }
    }

    /// Where `receiptd_server_api_waiting_requests` is read from: the threads of the routes that wait on Apple.
    func observeWaitingRequests(_ source: @escaping @Sendable () -> Int) {
        let gauge = registry.makeGauge(descriptor: Self.waitingFamily.descriptor)
        waitingRequests.withLock { $0 = (source, gauge) }
    }

    func publishSyncAges(now: Double) {
        for (gauge, time) in lastSyncs.withLock({ Array($0.values) }) {
            gauge.set(to: (now - time).rounded(.down))
        }
        if let waiting = waitingRequests.withLock({ $0 }) { waiting.gauge.set(to: Double(waiting.source())) }
    }

    /// The observer a client reports each request to.
    var observer: AppStoreServerAPIClient.RequestObserver {
        { [self] endpoint, outcome in recordRequest(endpoint: endpoint, outcome: outcome) }
    }
}
