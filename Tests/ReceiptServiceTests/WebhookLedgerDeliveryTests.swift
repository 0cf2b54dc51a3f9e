import Foundation
import HTTP1Server
import Ledger
import Prometheus
import TestSupport
import Testing

@testable import ReceiptService

/// The dispatcher on a real ledger (SQLite, and PostgreSQL when the tests can start one): events written with their
/// facts reach a live receiver that fails at first, each once it answers 2xx, in order per stream.
@Suite(.serialized)
struct WebhookLedgerDeliveryTests {
    /// An event per new transaction, in the stream of its original transaction, for the one webhook `backend`.
    static let rules = OutboxRules(
        events: { change in
            let known = Set(change.before?.transactions.map(\.transactionID) ?? [])
            return (change.after?.transactions ?? []).filter { !known.contains($0.transactionID) }
                .sorted { $0.transactionID < $1.transactionID }
                .map { transaction in
                    EventDraft(
                        type: "RENEWAL", dedupeKey: "RENEWAL:\(transaction.transactionID)", account: nil,
                        originalTransactionID: change.originalTransactionID, bundleID: "com.example.app",
                        environment: "Sandbox",
                        bodyMembers: #""environment":"Sandbox","stream":"otx:\#(change.originalTransactionID)""#)
                }
        },
        subscribers: { _ in ["backend"] }, formatTime: { String($0) })

    static func transaction(_ id: Int, original: Int) -> TransactionFacts {
        let time: Int64 = 1_700_000_000_000 + Int64(id) * 1000
        return TransactionFacts(
            transactionID: String(id), originalTransactionID: String(original), productID: "com.example.monthly",
            bundleID: "com.example.app", type: "Auto-Renewable Subscription", purchaseDate: time,
            originalPurchaseDate: time, expiresDate: time + 86_400_000, revocationDate: nil, revocationReason: nil,
            inAppOwnershipType: "PURCHASED", webOrderLineItemID: "w\(id)", environment: "Sandbox", signedDate: time,
            payloadJSON: #"{"transactionId":"\#(id)"}"#)
    }

    /// `originals` streams of `perOriginal` events each, written as separate facts.
    static func write(into store: any LedgerStore, originals: Int, perOriginal: Int) throws {
        for round in 0..<perOriginal {
            for original in 0..<originals {
                let id = 1000 + original * 100 + round
                try store.record(transactions: [Self.transaction(id, original: 1000 + original * 100)], source: .jws)
            }
        }
    }

    static func open(_ backend: Backend) throws -> (any LedgerStore, connectionString: String?) {
        switch backend {
        case .sqlite: return (try SQLiteLedger(path: Scratch.newPath("webhooks.sqlite"), outbox: rules), nil)
        case .postgres:
            let connectionString = try PostgresCluster.shared.get().newDatabase()
            return (try PostgresLedger(connectionString: connectionString, outbox: rules), connectionString)
        }
    }

    @Test(arguments: Backend.tested)
    func eventsWrittenWithTheirFacts_reachARecoveringReceiver_onceEach_inOrderPerStream(_ backend: Backend) throws {
        let (store, _) = try Self.open(backend)
        let originals = 6
        let perOriginal = 5
        try Self.write(into: store, originals: originals, perOriginal: perOriginal)
        let ledger = PurchaseLedger(store: store)
        let receiver = try WebhookReceiver(answer: { _, _ in 500 })
        defer { receiver.stop() }
        var settings = WebhookDispatcherTests.fastSettings
        settings.retrySchedule.first = 50
        settings.retrySchedule.longest = 200
        let dispatcher = try WebhookDispatcher(
            webhooks: [receiver.webhook(name: "backend")], outbox: ledger, settings: settings,
            metrics: WebhookMetrics(registry: PrometheusCollectorRegistry()), log: nil, random: { 0.5 })
        defer { dispatcher.stop(within: 2) }

        #expect(waitUntil(seconds: 20) { receiver.requests.count >= 2 * originals })
        receiver.setAnswer { _, _ in 200 }
        #expect(waitUntil(seconds: 30) { (try? store.webhookBacklogs().first?.pending ?? 0) == 0 })
        receiver.expectEachDeliveredOnce_inOrder(
            streams: (0..<originals).map { "otx:\(1000 + $0 * 100)" }, eventsPerStream: perOriginal)
        #expect(receiver.mostInFlightOfOneStream == 1)
        #expect(receiver.badSignatures == 0)
        let events = try store.events(OutboxQuery(limit: 1000))
        #expect(events.count == originals * perOriginal)
        #expect(events.allSatisfy { $0.deliveries.allSatisfy { $0.state == .delivered } })
    }

    /// Two servers on one PostgreSQL database: each event delivered (at least once, here exactly once as nothing
    /// fails), and no stream ever has two in flight or goes backwards at the receiver.
    @Test func twoReplicasOnPostgreSQL_shareTheOutbox_keepingEachStreamInOrder() throws {
        guard !Backend.skipPostgres else { return }
        let (store, connectionString) = try Self.open(.postgres)
        let replica = try PostgresLedger(connectionString: try #require(connectionString), outbox: Self.rules)
        let originals = 20
        let perOriginal = 5
        try Self.write(into: store, originals: originals, perOriginal: perOriginal)
        let receiver = try WebhookReceiver(answer: { _, _ in 200 })
        defer { receiver.stop() }
        var dispatchers: [WebhookDispatcher] = []
        defer { for dispatcher in dispatchers { dispatcher.stop(within: 2) } }
        for (index, ledger) in [store, replica].enumerated() {
            var settings = WebhookDispatcherTests.fastSettings
            settings.holder = "replica-\(index)"
            dispatchers.append(
                try WebhookDispatcher(
                    webhooks: [receiver.webhook(name: "backend")], outbox: PurchaseLedger(store: ledger),
                    settings: settings, metrics: WebhookMetrics(registry: PrometheusCollectorRegistry()), log: nil))
        }

        #expect(waitUntil(seconds: 60) { (try? store.webhookBacklogs().first?.pending ?? 0) == 0 })
        receiver.expectEachDeliveredOnce_inOrder(
            streams: (0..<originals).map { "otx:\(1000 + $0 * 100)" }, eventsPerStream: perOriginal)
        #expect(receiver.mostInFlightOfOneStream == 1)
    }

    /// A lane whose next poll is a minute away still sends a notification's event at once: the intake nudges it after
    /// the write that stored it.
    @Test func notificationStored_wakesTheLanes_beforeTheirNextPoll() throws {
        let (store, _) = try Self.open(.sqlite)
        let routes = LedgerService.routes(PurchaseLedger(store: store))
        let receiver = try WebhookReceiver(answer: { _, _ in 200 })
        defer { receiver.stop() }
        var settings = WebhookDispatcherTests.fastSettings
        settings.idlePoll = 60
        let dispatcher = try WebhookDispatcher(
            webhooks: [receiver.webhook(name: "backend")], outbox: routes.ledger, settings: settings,
            metrics: WebhookMetrics(registry: PrometheusCollectorRegistry()), log: nil)
        defer { dispatcher.stop(within: 2) }
        routes.intake.webhookNudge.attach(dispatcher)

        #expect(routes.deliver(try SignedEvents.subscribed()).status == .ok)
        #expect(waitUntil(seconds: 10) { receiver.accepted.count == 1 })
        // The lane records that try and claims again, finding nothing: it then waits out its minute.
        Thread.sleep(forTimeInterval: 0.5)
        let renewed = SignedEvents.transaction("7001", purchased: -1, expires: 50, signed: -1)
        #expect(routes.deliver(try SignedEvents.notification("DID_RENEW", signed: -1, transaction: renewed)).status == .ok)
        #expect(waitUntil(seconds: 10) { receiver.accepted.count == 2 })
    }
}
