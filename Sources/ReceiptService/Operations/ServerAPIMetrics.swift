internal import AppStoreServerAPI
internal import Synchronization

/// The App Store Server API part of `/metrics`: requests to Apple by endpoint and outcome, and how long ago each app
/// and environment's notification history was last synced completely.
public final class ServerAPIMetrics: Sendable {
    private struct RequestKey: Hashable, Comparable {
        var endpoint: String
        var outcome: String
        static func < (lhs: RequestKey, rhs: RequestKey) -> Bool { (lhs.endpoint, lhs.outcome) < (rhs.endpoint, rhs.outcome) }
    }

    private struct SyncKey: Hashable, Comparable {
        var app: String
        var environment: String
        static func < (lhs: SyncKey, rhs: SyncKey) -> Bool { (lhs.app, lhs.environment) < (rhs.app, rhs.environment) }
    }

    private let requests = Mutex<[RequestKey: Int]>([:])
    private let lastSyncs = Mutex<[SyncKey: Double]>([:])
    private let waitingRequests = Mutex<(@Sendable () -> Int)?>(nil)

    public init() {}

    /// One request sent to Apple: `endpoint` as `get_notification_history`, `outcome` as `ok`, `rate_limited`,
    /// `server_error`, `unauthorized`, `not_found`, `client_error` or `network_error`.
    public func recordRequest(endpoint: String, outcome: String) {
        requests.withLock { $0[RequestKey(endpoint: endpoint, outcome: outcome), default: 0] += 1 }
    }

    /// A sync of `app` in `environment` that read its whole span, at `time` (seconds since 1970).
    public func recordSync(app: String, environment: String, at time: Double) {
        lastSyncs.withLock { $0[SyncKey(app: app, environment: environment)] = time }
    }

    /// Where `receiptd_server_api_waiting_requests` is read from: the threads of the routes that wait on Apple.
    func observeWaitingRequests(_ source: @escaping @Sendable () -> Int) {
        waitingRequests.withLock { $0 = source }
    }

    func exposition(now: Double) -> String {
        let requests = requests.withLock { $0 }
        let syncs = lastSyncs.withLock { $0 }
        let waiting = waitingRequests.withLock { $0 }?() ?? 0
        var text = "# HELP receiptd_server_api_requests_total Requests to Apple's App Store Server API, by endpoint and outcome.\n"
        text += "# TYPE receiptd_server_api_requests_total counter\n"
        for (key, count) in requests.sorted(by: { $0.key < $1.key }) {
            text += "receiptd_server_api_requests_total{endpoint=\"\(key.endpoint)\",outcome=\"\(key.outcome)\"} \(count)\n"
        }
        text += "# HELP receiptd_server_api_last_sync_age_seconds Seconds since the last complete sync of Apple's notification history.\n"
        text += "# TYPE receiptd_server_api_last_sync_age_seconds gauge\n"
        for (key, time) in syncs.sorted(by: { $0.key < $1.key }) {
            text += "receiptd_server_api_last_sync_age_seconds{app=\"\(ServiceMetrics.escape(key.app))\",environment=\"\(key.environment)\"} \(Int((now - time).rounded(.down)))\n"
        }
        text += "# HELP receiptd_server_api_waiting_requests Requests waiting on Apple now (at most server_api.max_concurrent_requests).\n"
        text += "# TYPE receiptd_server_api_waiting_requests gauge\n"
        text += "receiptd_server_api_waiting_requests \(waiting)\n"
        return text
    }

    /// The observer a client reports each request to.
    var observer: AppStoreServerAPIClient.RequestObserver {
        { [self] endpoint, outcome in recordRequest(endpoint: endpoint, outcome: outcome) }
    }
}
