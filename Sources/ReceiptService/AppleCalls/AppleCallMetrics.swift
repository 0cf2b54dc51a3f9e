public import Ledger
public import Prometheus

/// `receiptd_apple_calls{kind, state}`: the calls to Apple that claims queued and that are not done, as the worker
/// last counted them (every few seconds while it runs): `pending` ones wait for a try, `failed` ones need a person.
public final class AppleCallMetrics: Sendable {
    static let family = MetricFamily(
        name: "receiptd_apple_calls",
        help: "Calls to Apple that claims queued and are not done, by kind and state (pending, failed).")
    /// The states counted: a done call is history, not a backlog.
    static let counted: [AppleCallState] = [.pending, .failed]

    private let registry: PrometheusCollectorRegistry

    public init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    /// Every kind and counted state, from the calls the ledger holds in those states.
    public func publish(_ calls: [AppleCall]) {
        for kind in AppleCallKind.allCases {
            for state in Self.counted {
                let count = calls.count { $0.kind == kind && $0.state == state }
                registry.makeGauge(
                    descriptor: Self.family.descriptor, labels: [("kind", kind.rawValue), ("state", state.rawValue)]
                ).set(to: Double(count))
            }
        }
    }
}
