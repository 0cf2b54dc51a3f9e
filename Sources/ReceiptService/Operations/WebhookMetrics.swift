public import Ledger
public import Prometheus

/// The webhooks' part of `/metrics` (issue 25): tries by webhook and outcome, each webhook's backlog and how old its
/// oldest pending event is, and how long tries take. Recorded by the dispatcher's threads, never a request's.
public final class WebhookMetrics: Sendable {
    /// Upper bounds in seconds: a local receiver answers in milliseconds, a slow one up to its `timeout` (at most 55).
    public static let deliveryBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

    static let deliveriesFamily = MetricFamily(
        name: "receiptd_webhook_deliveries_total",
        help: "Tries to deliver an event to a webhook, by webhook and outcome (delivered, retry, failed).")
    static let pendingFamily = MetricFamily(
        name: "receiptd_webhook_pending", help: "Events not yet delivered to a webhook (waiting, retrying, in flight).")
    static let oldestPendingFamily = MetricFamily(
        name: "receiptd_webhook_oldest_pending_seconds",
        help: "Age of the oldest event not yet delivered to a webhook, in seconds (0 when none is).")
    static let durationFamily = MetricFamily(
        name: "receiptd_webhook_delivery_seconds", help: "Time one try to deliver an event took, in seconds.")

    /// What a try's outcome is called in `receiptd_webhook_deliveries_total`.
    public enum Outcome: String, Sendable, CaseIterable {
        case delivered, retry, failed
    }

    private let registry: PrometheusCollectorRegistry
    private let durations: ValueHistogram

    public init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
        durations = registry.makeValueHistogram(
            descriptor: Self.durationFamily.descriptor, buckets: Self.deliveryBuckets)
    }

    /// Makes `webhook`'s series at 0, so that rates and alerts work before its first event.
    public func register(webhook: String) {
        for outcome in Outcome.allCases { _ = counter(webhook, outcome) }
        publish(WebhookBacklog(webhook: webhook, pending: 0, oldestPendingCreatedAt: nil), now: 0)
    }

    /// One try that ended `outcome` after `seconds`.
    public func recordTry(webhook: String, outcome: Outcome, seconds: Double) {
        counter(webhook, outcome).increment()
        durations.record(seconds.isFinite ? max(0, seconds) : 0)
    }

    /// A webhook's backlog as the ledger counted it at `now` (Unix ms).
    public func publish(_ backlog: WebhookBacklog, now: Int64) {
        let labels = [("webhook", backlog.webhook)]
        registry.makeGauge(descriptor: Self.pendingFamily.descriptor, labels: labels).set(to: Double(backlog.pending))
        let age = backlog.oldestPendingCreatedAt.map { max(0, Double(now - $0) / 1000).rounded(.down) } ?? 0
        registry.makeGauge(descriptor: Self.oldestPendingFamily.descriptor, labels: labels).set(to: age)
    }

    private func counter(_ webhook: String, _ outcome: Outcome) -> Counter {
        Self.deliveriesFamily.counter([("webhook", webhook), ("outcome", outcome.rawValue)], in: registry)
    }
}
