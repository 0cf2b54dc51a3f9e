import Dispatch
import Foundation
import HTTP1Server
import Ledger
import ReceiptEngine
import ReceiptForge
import ReceiptService
import Synchronization

/// The ledger's two figures (the ledger issue): what it adds to a receipt validation, and verified-and-committed
/// notifications per second with concurrent senders, both through `ReceiptRoutes.handle` (everything but sockets).
func ledgerCosts(receipt: [UInt8], senders: Int, postgres: String?) {
    let folder = NSTemporaryDirectory() + "receipt-bench-ledger-\(getpid())"
    try! FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }

    // 1. One real receipt, validated over and over (a backend re-checking stored receipts), with and without a
    //    SQLite ledger, taking turns so both see the same machine.
    let configuration = ServiceConfiguration()
    func routes(_ ledger: PurchaseLedger) -> ReceiptRoutes {
        ReceiptRoutes(
            configuration: configuration, validator: configuration.makeValidator(), ledger: ledger,
            metrics: ServiceMetrics())
    }
    let stateless = routes(.none)
    let stateful = routes(PurchaseLedger(store: try! SQLiteLedger(path: folder + "/validate.sqlite")))
    let request = HTTPRequest(
        method: .post, target: "/v1/validate",
        headers: HTTPHeaders([(.contentType, "application/octet-stream")]), body: receipt, peer: .benchmarkClient,
        listener: .benchmarkListener)
    guard stateless.handle(request, on: .main).status == .ok, stateful.handle(request, on: .main).status == .ok else {
        fatalError("the benchmark receipt does not validate")
    }
    let (times, _) = measureInterleaved(sampleSeconds: 0.5, [
        { stateless.handle(request, on: .main).body.count },
        { stateful.handle(request, on: .main).body.count },
    ])
    row("/v1/validate, stateless", String(format: "%.1f µs", times[0] / 1000))
    row("/v1/validate, SQLite ledger", String(format: "%.1f µs", times[1] / 1000),
        String(format: "%.2fx (goal: at most 1.20x)", times[1] / times[0]))

    // 2. Distinct notifications, each verified (envelope and two nested JWS) and durably committed before its 200.
    let authority = try! JWSTestAuthority.generate()
    var notificationConfiguration = ServiceConfiguration()
    notificationConfiguration.trustAnchors = [authority.rootAnchor]
    let count = 2_000
    let bodies = forgedNotificationBodies(count: count, authority: authority)
    var stores: [(name: String, store: any LedgerStore)] = [("SQLite", try! SQLiteLedger(path: folder + "/notifications.sqlite"))]
    if let postgres { stores.append(("PostgreSQL", try! PostgresLedger(connectionString: postgres))) }
    for (name, store) in stores {
        let delivery = ReceiptRoutes(
            configuration: notificationConfiguration, validator: notificationConfiguration.makeValidator(),
            jwsVerifier: notificationConfiguration.makeJWSVerifier(), ledger: PurchaseLedger(store: store),
            metrics: ServiceMetrics())
        let next = Atomic<Int>(0)
        let stored = Atomic<Int>(0)
        let started = nanoseconds()
        DispatchQueue.concurrentPerform(iterations: senders) { _ in
            while case let index = next.add(1, ordering: .relaxed).oldValue, index < count {
                let response = delivery.handle(HTTPRequest(
                    method: .post, target: "/v1/notifications",
                    headers: HTTPHeaders([(.contentType, "application/json")]), body: bodies[index],
                    peer: .benchmarkClient, listener: .benchmarkListener), on: .main)
                if response.status == .ok { stored.add(1, ordering: .relaxed) }
            }
        }
        let seconds = Double(nanoseconds() - started) / 1e9
        guard stored.load(ordering: .relaxed) == count else {
            fatalError("\(count - stored.load(ordering: .relaxed)) notifications were not stored on \(name)")
        }
        row("notifications committed, \(name)", String(format: "%.0f/s", Double(count) / seconds),
            "\(senders) concurrent senders, \(count) distinct notifications (goal on SQLite: at least 1,000/s)")
    }
}
