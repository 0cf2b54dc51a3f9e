import Dispatch
import AppStoreServerAPI
import ReceiptEngine
import ReceiptService
import Synchronization

/// `serve`'s own sync: once at start-up, covering the time since each app and environment's cursor, then every
/// `server_api.sync_interval`, so an outage heals without anyone acting. Runs on its own serial queue, never on a
/// request's thread: Apple being slow or down changes no answer and not `/readyz`.
final class ServerAPISyncSchedule {
    private let queue = DispatchQueue(label: "receiptd.server-api-sync")
    private let timer: any DispatchSourceTimer
    private let stopped = StopFlag()

    /// Nil when no app has a `server_api` key or there is no ledger to heal.
    init?(routes: ReceiptRoutes, log: ServiceLog) {
        let configuration = routes.configuration
        let apps = configuration.serverAPIApps
        guard !apps.isEmpty, routes.ledger.isConfigured else { return nil }
        let environments = AppStoreEnvironment.allCases.filter { environment in
            configuration.environments.contains { $0.rawValue == environment.rawValue }
        }
        timer = DispatchSource.makeTimerSource(queue: queue)
        let stopped = self.stopped
        timer.setEventHandler { @Sendable in
            for app in apps {
                for environment in environments where !stopped.isSet {
                    var sync = NotificationHistorySync(
                        configuration: configuration, routes: routes, bundleID: app.bundleID, environment: environment,
                        report: { log.event("server api sync", [("result", $0)]) },
                        complain: { log.event("server api sync failed", [("reason", $0)]) })
                    sync.shouldContinue = { !stopped.isSet }
                    _ = sync.run(since: nil, until: Int64(wallClockSeconds() * 1000), now: Int64(wallClockSeconds() * 1000))
                }
            }
        }
        let interval = configuration.serverAPI.syncInterval
        timer.schedule(deadline: .now(), repeating: .milliseconds(Int(interval * 1000)), leeway: .seconds(1))
    }

    func start() { timer.resume() }

    /// Stops the schedule and waits for a sync in progress to finish its current request (bounded by
    /// `server_api.timeout` and the client's few retries); the sync stops at its next page.
    func stop() {
        stopped.set()
        timer.cancel()
        queue.sync {}
    }
}

private final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .relaxed) }
    func set() { value.store(true, ordering: .relaxed) }
}
