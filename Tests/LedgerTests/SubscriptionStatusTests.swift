import Ledger
import Testing

/// The pure status function, without a database.
struct SubscriptionStatusTests {
    typealias E = AppleEvents
    static let month = E.firstMonth

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var latest: TransactionFacts?
        var renewal: RenewalFacts?
        var now: Int64
        var expected: SubscriptionState?
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "no transaction", latest: nil, renewal: nil, now: E.t0, expected: nil),
        Case(name: "before expiry", latest: month, renewal: nil, now: E.t0 + E.day, expected: .active),
        Case(name: "at expiry", latest: month, renewal: nil, now: E.t0 + 30 * E.day, expected: .expired),
        Case(name: "no expiry date", latest: E.transaction("9", purchase: E.t0, expires: nil, signed: E.t0),
            renewal: nil, now: E.t0 + 999 * E.day, expected: .active),
        Case(name: "revoked before expiry",
            latest: E.transaction("9", purchase: E.t0, expires: E.t0 + 30 * E.day, signed: E.t0, revoked: E.t0),
            renewal: nil, now: E.t0 + E.day, expected: .revoked),
        Case(name: "retry inside grace", latest: month,
            renewal: E.renewal(signed: E.t0, retry: true, grace: E.t0 + 36 * E.day), now: E.t0 + 31 * E.day,
            expected: .inGracePeriod),
        Case(name: "retry at grace end", latest: month,
            renewal: E.renewal(signed: E.t0, retry: true, grace: E.t0 + 36 * E.day), now: E.t0 + 36 * E.day,
            expected: .inBillingRetry),
        Case(name: "retry without grace", latest: month, renewal: E.renewal(signed: E.t0, retry: true),
            now: E.t0 + 31 * E.day, expected: .inBillingRetry),
        Case(name: "grace while still active", latest: month,
            renewal: E.renewal(signed: E.t0, retry: true, grace: E.t0 + 36 * E.day), now: E.t0 + E.day,
            expected: .active),
        Case(name: "expired, no retry", latest: month, renewal: E.renewal(signed: E.t0, autoRenew: false),
            now: E.t0 + 31 * E.day, expected: .expired),
    ]

    @Test(arguments: cases)
    func status_followsTheDocumentedOrder(_ example: Case) {
        let status = SubscriptionState(latest: example.latest, renewal: example.renewal, now: example.now)
        #expect(status == example.expected)
    }

    @Test func latestTransaction_isTheGreatestExpiresDate_thenTheLatestPurchase() {
        let renewed = E.transaction("1001", purchase: E.t0 + 30 * E.day, expires: E.t0 + 60 * E.day, signed: E.t0)
        let refundedLater = E.transaction("1000", purchase: E.t0, expires: E.t0 + 30 * E.day, signed: E.t0 + 50 * E.day)
        let facts = SubscriptionFacts(
            originalTransactionID: E.original, transactions: [refundedLater, renewed], renewal: nil,
            lastNotification: nil, updatedAt: 0
        )
        #expect(facts.latestTransaction?.transactionID == "1001")

        let lifetimeA = E.transaction("a", purchase: E.t0, expires: nil, signed: E.t0)
        let lifetimeB = E.transaction("b", purchase: E.t0 + 1, expires: nil, signed: E.t0)
        let noExpiry = SubscriptionFacts(
            originalTransactionID: E.original, transactions: [lifetimeB, lifetimeA], renewal: nil,
            lastNotification: nil, updatedAt: 0
        )
        #expect(noExpiry.latestTransaction?.transactionID == "b")
    }
}
