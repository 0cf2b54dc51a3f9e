@testable import Ledger
import TestSupport
import Testing

/// An upgraded transaction entitles to nothing, and one-time purchases are not subscriptions.
struct UpgradeStatusTests {
    typealias E = AppleEvents

    static func upgraded(_ facts: TransactionFacts) -> TransactionFacts {
        var copy = facts
        copy.isUpgraded = true
        return copy
    }

    @Test func upgradedBeforeExpiry_isUpgraded_notActive() {
        #expect(SubscriptionState(latest: Self.upgraded(E.firstMonth), renewal: nil, now: E.t0 + E.day) == .upgraded)
        var refunded = Self.upgraded(E.firstMonth)
        refunded.revocationDate = E.t0 + E.day
        #expect(SubscriptionState(latest: refunded, renewal: nil, now: E.t0 + 2 * E.day) == .revoked)
    }

    @Test(arguments: Backend.tested)
    func theTransactionThatReplacedIt_decides_evenWithAnEarlierExpiry(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        // A year bought at t0, upgraded ten days later to a higher monthly product of the same group.
        let year = Self.upgraded(E.transaction("1000", purchase: E.t0, expires: E.t0 + 365 * E.day, signed: E.t0 + 10 * E.day))
        try ledger.record(transactions: [year], source: .jws)
        let onlyTheOld = try #require(try ledger.subscription(originalTransactionID: E.original))
        #expect(onlyTheOld.transactions.first?.isUpgraded == true)
        #expect(onlyTheOld.status(at: E.t0 + 11 * E.day) == .upgraded)

        let month = E.transaction("1001", purchase: E.t0 + 10 * E.day, expires: E.t0 + 40 * E.day, signed: E.t0 + 10 * E.day)
        try ledger.record(transactions: [month], source: .jws)
        let facts = try #require(try ledger.subscription(originalTransactionID: E.original))
        #expect(facts.latestTransaction?.transactionID == "1001")
        #expect(facts.status(at: E.t0 + 11 * E.day) == .active)
        #expect(facts.status(at: E.t0 + 41 * E.day) == .expired)
    }

    @Test(arguments: [
        ("Auto-Renewable Subscription", Int64?.some(1), true), ("Consumable", nil, false),
        ("Non-Consumable", nil, false), ("Non-Renewing Subscription", Int64?.some(1), false),
    ])
    func storeKit2Type_tellsASubscription(_ type: String, _ expires: Int64?, _ renews: Bool) {
        var facts = E.transaction("1", purchase: E.t0, expires: expires, signed: E.t0)
        facts.type = type
        #expect(facts.isAutoRenewable == renews)
        let subscription = SubscriptionFacts(
            originalTransactionID: "1", transactions: [facts], renewal: nil, lastNotification: nil, updatedAt: 0)
        #expect(subscription.isAutoRenewable == renews)
    }

    @Test func receiptEntry_isASubscriptionWhenItExpires() {
        var entry = E.transaction("1", purchase: E.t0, expires: nil, signed: E.t0)
        entry.type = nil
        #expect(!entry.isAutoRenewable)
        entry.expiresDate = E.t0 + E.day
        #expect(entry.isAutoRenewable)
    }
}
