public import ReceiptEngine
internal import Synchronization
internal import AppStoreServerAPI

/// Counters behind `GET /metrics`, in Prometheus text exposition format 0.0.4.
///
/// One instance per server, injected into the routes: no global registry, so tests read exactly what their own
/// requests did. Guarded by one mutex; each request takes it twice for a few additions, far below a validation's cost.
public final class ServiceMetrics: Sendable {
    /// Upper bounds in seconds: a cached-chain validation takes well under a millisecond, a first one a few.
    public static let durationBuckets: [Double] = [
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]

    private struct RequestKey: Hashable {
        var route: String
        var status: Int
    }

    private struct VerdictKey: Hashable, Comparable {
        var kind: String
        var result: String
        static func < (lhs: VerdictKey, rhs: VerdictKey) -> Bool { (lhs.kind, lhs.result) < (rhs.kind, rhs.result) }
    }

    private struct State {
        var requests: [RequestKey: Int] = [:]
        var validations: [String: Int] = [:]
        var verdicts: [VerdictKey: Int] = [:]
        var bucketCounts = [Int](repeating: 0, count: ServiceMetrics.durationBuckets.count)
        var durationSum: Double = 0
        var durationCount = 0
        var notificationConflicts = 0
        var openConnections: (@Sendable () -> Int)?
    }

    private let state: Mutex<State>
    /// Outside `state`: counted by whoever logs, which must not wait on the request counters' lock.
    private let logLinesDropped = Atomic<Int>(0)
    /// Requests to Apple and sync ages (ServerAPIMetrics.swift).
    public let serverAPI = ServerAPIMetrics()

    public init() {
        var initial = State()
        // Every verdict appears from the start, so that rate() and alerts work before the first failure.
        initial.validations["valid"] = 0
        for code in ValidationError.Code.all { initial.validations[code.rawValue] = 0 }
        for kind in SignedDataKind.allCases.map(\.rawValue) {
            initial.verdicts[VerdictKey(kind: kind, result: "valid")] = 0
            for code in ValidationError.Code.all { initial.verdicts[VerdictKey(kind: kind, result: code.rawValue)] = 0 }
        }
        state = Mutex(initial)
    }

    /// Where `receiptd_open_connections` is read from, e.g. `{ server.openConnections }`; set once the server exists.
    public func observeOpenConnections(_ source: @escaping @Sendable () -> Int) {
        state.withLock { $0.openConnections = source }
    }

    /// One answered request. `route` is the matched route's template, never the raw path, to bound cardinality.
    public func recordRequest(route: String, status: Int, seconds: Double) {
        state.withLock { state in
            state.requests[RequestKey(route: route, status: status), default: 0] += 1
            for (index, bound) in Self.durationBuckets.enumerated() where seconds <= bound {
                state.bucketCounts[index] += 1
            }
            state.durationSum += seconds
            state.durationCount += 1
        }
    }

    /// One verdict: `"valid"` or the engine's error code.
    public func recordValidation(_ result: ValidationResult) {
        let label = result.error?.code.rawValue ?? "valid"
        state.withLock { state in
            state.validations[label, default: 0] += 1
            state.verdicts[VerdictKey(kind: SignedDataKind.receipt.rawValue, result: label), default: 0] += 1
        }
    }

    /// One StoreKit 2 verdict; `kind` is nil when the JWS did not verify far enough to tell (counted as `unknown`).
    public func recordVerdict(kind: SignedDataKind?, error: ValidationError?) {
        let key = VerdictKey(kind: kind?.rawValue ?? "unknown", result: error?.code.rawValue ?? "valid")
        state.withLock { $0.verdicts[key, default: 0] += 1 }
    }

    /// One notification whose uuid was stored before with a different signed payload.
    public func recordNotificationConflict() {
        state.withLock { $0.notificationConflicts += 1 }
    }

    /// One log line dropped because the log's queue was full: its stream (stdout) is not being read fast enough.
    public func recordLogLineDropped() {
        logLinesDropped.add(1, ordering: .relaxed)
    }

    /// The exposition text, series sorted so that scrapes diff cleanly.
    public func exposition() -> String {
        let snapshot = state.withLock { state in
            (state.requests, state.validations, state.bucketCounts, state.durationSum, state.durationCount,
             state.openConnections, state.verdicts, state.notificationConflicts)
        }
        let (
            requests, validations, bucketCounts, durationSum, durationCount, openConnectionsSource, verdicts,
            notificationConflicts
        ) = snapshot
        // Read outside the lock: the source belongs to the server and may take its own lock.
        let openConnections = openConnectionsSource?() ?? 0

        var text = ""
        text += "# HELP receiptd_http_requests_total HTTP requests answered, by route and status.\n"
        text += "# TYPE receiptd_http_requests_total counter\n"
        let sortedRequests = requests.sorted { ($0.key.route, $0.key.status) < ($1.key.route, $1.key.status) }
        for (key, count) in sortedRequests {
            text += "receiptd_http_requests_total{route=\"\(Self.escape(key.route))\",status=\"\(key.status)\"} \(count)\n"
        }
        text += "# HELP receiptd_validations_total Receipt verdicts, by result (valid or the error code).\n"
        text += "# TYPE receiptd_validations_total counter\n"
        for (result, count) in validations.sorted(by: { $0.key < $1.key }) {
            text += "receiptd_validations_total{result=\"\(Self.escape(result))\"} \(count)\n"
        }
        text += "# HELP receiptd_verdicts_total Verdicts on receipts and StoreKit 2 JWS, by kind and result.\n"
        text += "# TYPE receiptd_verdicts_total counter\n"
        for (key, count) in verdicts.sorted(by: { $0.key < $1.key }) {
            text += "receiptd_verdicts_total{kind=\"\(Self.escape(key.kind))\",result=\"\(Self.escape(key.result))\"} \(count)\n"
        }
        text += "# HELP receiptd_request_duration_seconds Time to answer a request, in seconds.\n"
        text += "# TYPE receiptd_request_duration_seconds histogram\n"
        for (index, bound) in Self.durationBuckets.enumerated() {
            text += "receiptd_request_duration_seconds_bucket{le=\"\(Self.format(bound))\"} \(bucketCounts[index])\n"
        }
        text += "receiptd_request_duration_seconds_bucket{le=\"+Inf\"} \(durationCount)\n"
        text += "receiptd_request_duration_seconds_sum \(Self.format(durationSum))\n"
        text += "receiptd_request_duration_seconds_count \(durationCount)\n"
        text += "# HELP receiptd_notification_conflicts_total Notifications whose uuid was stored before with "
            + "a different signed payload (answered as duplicates, not stored).\n"
        text += "# TYPE receiptd_notification_conflicts_total counter\n"
        text += "receiptd_notification_conflicts_total \(notificationConflicts)\n"
        text += "# HELP receiptd_log_lines_dropped_total Log lines dropped because standard output was not read fast "
            + "enough (the log's queue was full); requests are answered regardless.\n"
        text += "# TYPE receiptd_log_lines_dropped_total counter\n"
        text += "receiptd_log_lines_dropped_total \(logLinesDropped.load(ordering: .relaxed))\n"
        text += "# HELP receiptd_open_connections HTTP connections open now.\n"
        text += "# TYPE receiptd_open_connections gauge\n"
        text += "receiptd_open_connections \(openConnections)\n"
        text += serverAPI.exposition(now: wallClockSeconds())
        return text
    }

    /// Label values escape backslash, quote and newline (exposition format 0.0.4).
    static func escape(_ value: String) -> String {
        var out = ""
        for character in value {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }

    private static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
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
