@testable import Ledger
import TestSupport
import Testing

/// Deliveries in any order, any number of times, end in the same facts; each notification type gives its status.
struct NotificationOrderingTests {
    typealias E = AppleEvents

    @Test(arguments: Backend.tested)
    func deliveriesInOrderReversedAndDuplicated_convergeToTheSameFacts(_ backend: Backend) throws {
        let inOrder = E.lifetime
        var rng = SplitMix64(seed: 42)
        let orders: [[NotificationFacts]] = [
            inOrder,
            inOrder.reversed(),
            (inOrder + inOrder.reversed() + inOrder).shuffled(using: &rng),
        ]
        var results: [SubscriptionFacts?] = []
        var counts: [LedgerCounts] = []
        for order in orders {
            let ledger = try makeLedger(backend)
            for notification in order { _ = try ledger.record(notification) }
            results.append(try ledger.subscription(originalTransactionID: E.original))
            counts.append(try ledger.counts())
        }
        let expected = try #require(results[0])
        for result in results.dropFirst() { #expect(result == expected) }
        for count in counts.dropFirst() { #expect(count == counts[0]) }
        #expect(counts[0].notifications == Int64(inOrder.count))
        // The newest by signed date, though reversed delivery received it first.
        #expect(expected.lastNotification?.type == "DID_RENEW")
        // Every one of them, oldest first, though deliveries came in every order.
        let byDate = inOrder
            .filter { ($0.transaction?.originalTransactionID ?? $0.renewal?.originalTransactionID) == E.original }
            .sorted { ($0.signedDate, $0.uuid) < ($1.signedDate, $1.uuid) }
        #expect(expected.notifications.map(\.uuid) == byDate.map(\.uuid))
        #expect(expected.notifications.last == expected.lastNotification)
        #expect(expected.transactions.map(\.transactionID) == ["1001", "1000"])
        #expect(expected.transactions.last?.revocationDate == nil)
        #expect(expected.renewal?.signedDate == E.t0 + 40 * E.day)
        #expect(expected.status(at: E.t0 + 41 * E.day) == .active)
    }

    struct Scenario: Sendable, CustomTestStringConvertible {
        var name: String
        var notifications: [NotificationFacts]
        var now: Int64
        var expected: SubscriptionState
        var testDescription: String { name }
    }

    static let scenarios: [Scenario] = [
        Scenario(name: "SUBSCRIBED", notifications: [E.subscribed], now: E.t0 + E.day, expected: .active),
        Scenario(name: "SUBSCRIBED, a month later", notifications: [E.subscribed], now: E.t0 + 31 * E.day,
            expected: .expired),
        Scenario(name: "DID_RENEW", notifications: [E.subscribed, E.didRenew()], now: E.t0 + 45 * E.day,
            expected: .active),
        Scenario(name: "DID_FAIL_TO_RENEW GRACE_PERIOD", notifications: [E.subscribed, E.didFailToRenew(grace: true)],
            now: E.t0 + 31 * E.day, expected: .inGracePeriod),
        Scenario(name: "DID_FAIL_TO_RENEW", notifications: [E.subscribed, E.didFailToRenew(grace: false)],
            now: E.t0 + 31 * E.day, expected: .inBillingRetry),
        Scenario(name: "GRACE_PERIOD_EXPIRED",
            notifications: [E.subscribed, E.didFailToRenew(grace: true), E.gracePeriodExpired],
            now: E.t0 + 37 * E.day, expected: .inBillingRetry),
        Scenario(name: "DID_RENEW BILLING_RECOVERY after retry",
            notifications: [E.subscribed, E.didFailToRenew(grace: false), E.didRenew(at: E.t0 + 33 * E.day)],
            now: E.t0 + 34 * E.day, expected: .active),
        Scenario(name: "EXPIRED VOLUNTARY", notifications: [E.subscribed, E.expiredVoluntary],
            now: E.t0 + 31 * E.day, expected: .expired),
        Scenario(name: "DID_CHANGE_RENEWAL_STATUS", notifications: [E.subscribed, E.autoRenewDisabled],
            now: E.t0 + 6 * E.day, expected: .active),
        Scenario(name: "REFUND", notifications: [E.subscribed, E.refund], now: E.t0 + 11 * E.day, expected: .revoked),
        Scenario(name: "REVOKE", notifications: [E.subscribed, E.revoke], now: E.t0 + 11 * E.day, expected: .revoked),
        Scenario(name: "REFUND_REVERSED", notifications: [E.subscribed, E.refund, E.refundReversed],
            now: E.t0 + 13 * E.day, expected: .active),
        Scenario(name: "REFUND_REVERSED before REFUND arrives",
            notifications: [E.subscribed, E.refundReversed, E.refund], now: E.t0 + 13 * E.day, expected: .active),
    ]

    @Test(arguments: Backend.tested, scenarios)
    func eachNotificationType_givesTheDocumentedStatus(_ backend: Backend, _ scenario: Scenario) throws {
        let ledger = try makeLedger(backend)
        for notification in scenario.notifications { #expect(try ledger.record(notification) == .stored) }
        let facts = try #require(try ledger.subscription(originalTransactionID: E.original))
        #expect(facts.status(at: scenario.now) == scenario.expected)
        let newest = scenario.notifications.max { $0.signedDate < $1.signedDate }
        #expect(facts.lastNotification?.uuid == newest?.uuid)
    }

    @Test(arguments: Backend.tested)
    func autoRenewDisabled_changesOnlyTheRenewalInfo(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        _ = try ledger.record(E.subscribed)
        _ = try ledger.record(E.autoRenewDisabled)
        let facts = try #require(try ledger.subscription(originalTransactionID: E.original))
        #expect(facts.renewal?.autoRenewStatus == false)
        #expect(facts.transactions.first?.expiresDate == E.firstMonth.expiresDate)
    }

    @Test(arguments: Backend.tested)
    func testAndUnknownTypes_areStoredAndChangeNothing(_ backend: Backend) throws {
        let ledger = try makeLedger(backend, clock: TestClock.counting())
        _ = try ledger.record(E.subscribed)
        let before = try ledger.subscription(originalTransactionID: E.original)
        let countsBefore = try ledger.counts()
        #expect(try ledger.record(E.test) == .stored)
        #expect(try ledger.record(E.unknownType) == .stored)
        #expect(try ledger.subscription(originalTransactionID: E.original) == before)
        #expect(try ledger.notification(uuid: E.test.uuid)?.type == "TEST")
        #expect(try ledger.notification(uuid: E.unknownType.uuid)?.signedPayload == E.unknownType.signedPayload)
        var expectedCounts = countsBefore
        expectedCounts.notifications += 2
        #expect(try ledger.counts() == expectedCounts)
    }

    @Test(arguments: Backend.tested)
    func repeatedUUID_isADuplicateWithNoSecondEffect(_ backend: Backend) throws {
        let ledger = try makeLedger(backend, clock: TestClock.counting())
        #expect(try ledger.record(E.subscribed) == .stored)
        let first = try ledger.transaction(id: "1000")
        let storedFirst = try ledger.notification(uuid: E.subscribed.uuid)
        var retried = E.subscribed
        // A retry with different content under the same uuid still changes nothing.
        retried.transaction = E.with(E.firstMonth, signed: E.t0 + 99)
        #expect(try ledger.record(retried) == .duplicate)
        #expect(try ledger.record(E.subscribed) == .duplicate)
        #expect(try ledger.transaction(id: "1000") == first)
        #expect(try ledger.notification(uuid: E.subscribed.uuid) == storedFirst)
        #expect(try ledger.counts().notifications == 1)
    }

    @Test(arguments: Backend.tested)
    func notification_keepsEveryFieldOfTheEnvelope(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        var notification = E.subscribed
        notification.appTransactionJSON = #"{"bundleId":"com.example.app","appAppleId":1}"#
        _ = try ledger.record(notification)
        let stored = try #require(try ledger.notification(uuid: notification.uuid))
        #expect(stored.type == "SUBSCRIBED")
        #expect(stored.subtype == "INITIAL_BUY")
        #expect(stored.signedDate == E.t0)
        #expect(stored.environment == "Sandbox")
        #expect(stored.bundleID == "com.example.app")
        #expect(stored.signedPayload == notification.signedPayload)
        #expect(stored.transactionID == "1000")
        #expect(stored.originalTransactionID == E.original)
        #expect(stored.appTransactionJSON == notification.appTransactionJSON)
        #expect(stored.receivedAt == TestClock.fixed())
        #expect(try ledger.notification(uuid: "never-sent") == nil)
    }
}

/// A small seeded generator so shuffles repeat from run to run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
