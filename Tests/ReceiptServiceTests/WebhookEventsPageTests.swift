import Foundation
import HTTP1Server
import Ledger
import ReceiptEngine
import StoreKitJWS
import TestSupport
import Testing

@testable import ReceiptService

/// The support page lists the outbox's events for an account and for a subscription, with each webhook's delivery
/// state, when webhooks are configured; without them it neither asks the outbox nor shows the table.
struct WebhookEventsPageTests {
    typealias E = SignedEvents

    static let failed = OutboxEvent.Delivery(
        webhook: "backend", state: .failed, attempts: 31, nextAttemptAt: nil, lastStatus: 500,
        lastError: "HTTP 500 <b>down</b>", deliveredAt: nil)
    static let delivered = OutboxEvent.Delivery(
        webhook: "audit", state: .delivered, attempts: 1, nextAttemptAt: nil, lastStatus: 200, lastError: nil,
        deliveredAt: 1_714_564_801_000)
    static let events = [
        OutboxEvent(
            id: "evt_b", type: "RENEWAL", account: "alice", originalTransactionID: "7000", stream: "alice", sequence: 2,
            createdAt: 1_714_564_800_000, body: "{}", deliveries: [failed, delivered]),
        OutboxEvent(
            id: "evt_a", type: "INITIAL_PURCHASE", account: "alice", originalTransactionID: "7000", stream: "alice",
            sequence: 1, createdAt: 1_714_564_700_000, body: "{}", deliveries: [delivered]),
    ]

    static func accountPage(_ events: [OutboxEvent]?) -> String {
        var configuration = LedgerService.configuration
        configuration.apps[0].entitlements = ["pro": ["pro.monthly"]]
        let snapshot = AccountSnapshot(
            record: .empty("alice", at: 0), subscriptions: [:])
        return LookupPage.accountPage(
            account: "alice", summary: AccountSummary(snapshot: snapshot, configuration: configuration, at: 0),
            subscriptions: [], webhookEvents: events, now: 1_714_564_800_000)
    }

    @Test func accountPage_listsEventsNewestFirst_withEachDeliverysState() {
        let page = Self.accountPage(Self.events)
        let rows = page.components(separatedBy: "<tr data-event-id=").dropFirst()
        #expect(rows.count == 2)
        #expect(rows.first?.hasPrefix("\"evt_b\" data-type=\"RENEWAL\" data-sequence=\"2\"") == true)
        #expect(rows.last?.hasPrefix("\"evt_a\" data-type=\"INITIAL_PURCHASE\" data-sequence=\"1\"") == true)
        #expect(page.contains("data-webhook=\"backend\" data-state=\"failed\" data-attempts=\"31\""))
        #expect(page.contains("data-webhook=\"audit\" data-state=\"delivered\" data-attempts=\"1\""))
        // The receiver's text is escaped like everything else on the page.
        #expect(page.contains("HTTP 500 &lt;b&gt;down&lt;/b&gt;") && !page.contains("<b>down</b>"))
    }

    @Test func accountPage_withoutWebhooks_hasNoEventsTable() {
        #expect(!Self.accountPage(nil).contains("webhook-events"))
        #expect(Self.accountPage([]).contains("<table class=\"webhook-events\">"))
    }

    /// Routes over a fresh SQLite ledger that writes events for the webhook `backend`.
    static func routes(webhooks: Bool) throws -> ReceiptRoutes {
        var configuration = LedgerService.configuration
        configuration.apps[0].entitlements = ["pro": ["pro.monthly"]]
        if webhooks {
            configuration.webhooks = [
                Webhook(
                    name: "backend", url: "http://127.0.0.1:1/hooks", secretFile: "secret",
                    secret: WebhookSecret(Array("secret".utf8)), allowHTTP: true)
            ]
        }
        let store = try SQLiteLedger(
            path: Scratch.newPath("webhook-page.sqlite"), clock: TestClock.fixed,
            linkRules: configuration.accountLinkRules, outbox: configuration.outboxRules)
        let validator = configuration.makeValidator()
        return ReceiptRoutes(
            configuration: configuration, validator: validator, jwsVerifier: JWSVerifier(policy: validator.policy),
            ledger: PurchaseLedger(store: store), metrics: ServiceMetrics(), clock: { fixedNow })
    }

    @Test(arguments: [true, false])
    func accountAndSubscriptionViews_showTheEventsTable_onlyWithWebhooks(webhooks: Bool) throws {
        let routes = try Self.routes(webhooks: webhooks)
        #expect(routes.deliver(try E.subscribed()).status == 200)
        #expect(routes.claim("7000", account: "alice").status == 200)
        // The purchase's first event came before the claim linked it (its stream was the original); the claim gave
        // alice `pro`, an event of her own stream.
        for (target, type) in [
            ("/lookup?id=7000", "INITIAL_PURCHASE"), ("/lookup?account=alice", "ENTITLEMENTS_CHANGED"),
        ] {
            let response = routes.handle(get(target), on: .main)
            #expect(response.status == 200)
            #expect(response.text.contains("<table class=\"webhook-events\">") == webhooks, "\(target)")
            #expect(response.text.contains("data-type=\"\(type)\" data-sequence=\"1\"") == webhooks, "\(target)")
            // No dispatcher runs here: every event waits for its first try.
            #expect(
                response.text.contains("data-webhook=\"backend\" data-state=\"pending\" data-attempts=\"0\"")
                    == webhooks,
                "\(target)")
        }
    }
}
