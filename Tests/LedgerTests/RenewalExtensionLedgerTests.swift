import Synchronization
import TestSupport
import Testing

@testable import Ledger

/// `renewal_extensions` on both databases: Apple's answer is kept whole and replaced only in what Apple answers; an
/// extension Apple granted is a change the outbox rules see in the same write, once.
struct RenewalExtensionLedgerTests {
    typealias E = AppleEvents

    /// One `RENEWAL_EXTENDED` draft per granted extension, keyed as EventRules keys it; every change is kept.
    final class Rules: Sendable {
        let causes = Mutex<[LedgerChangeCause]>([])

        var outbox: OutboxRules {
            OutboxRules(
                events: { [self] change in
                    causes.withLock { $0.append(change.cause) }
                    guard case .renewalExtension(_, let effectiveDate) = change.cause else { return [] }
                    return [
                        EventDraft(
                            type: "RENEWAL_EXTENDED", dedupeKey: "RENEWAL_EXTENDED:\(change.originalTransactionID):\(effectiveDate)",
                            account: change.accountAfter, originalTransactionID: change.originalTransactionID,
                            bundleID: "com.example.app", environment: "Sandbox", bodyMembers: #""environment":"Sandbox""#)
                    ]
                },
                subscribers: { _ in ["backend"] }, formatTime: { String($0) })
        }
    }

    static func open(_ backend: Backend, _ rules: Rules) throws -> any LedgerStore {
        switch try DatabaseLocation.fresh(backend) {
        case .sqlite(let path): try SQLiteLedger(path: path, clock: TestClock.fixed, outbox: rules.outbox)
        case .postgres(let connectionString):
            try PostgresLedger(connectionString: connectionString, poolSize: 2, clock: TestClock.fixed, outbox: rules.outbox)
        }
    }

    static func granted(_ id: String, effectiveDate: Int64) -> RenewalExtensionRecord {
        RenewalExtensionRecord(
            requestIdentifier: id, originalTransactionID: E.original, bundleID: "com.example.app",
            environment: "Sandbox", days: 7, reasonCode: 3, requestedBy: "support", requestedAt: E.t0 + E.day,
            outcome: .extended, effectiveDate: effectiveDate, webOrderLineItemID: "w1000", appleStatus: 200)
    }

    @Test(arguments: Backend.tested)
    func grantedExtension_isStoredWithItsEvent_andTheSameExtensionAgainIsNoSecondEvent(_ backend: Backend) throws {
        let rules = Rules()
        let ledger = try Self.open(backend, rules)
        try ledger.record(transactions: [E.firstMonth], source: .jws)
        let expiry = E.t0 + 37 * E.day
        try ledger.record(renewalExtension: Self.granted("req-1", effectiveDate: expiry))

        #expect(try ledger.renewalExtension(requestIdentifier: "req-1") == Self.granted("req-1", effectiveDate: expiry))
        #expect(try ledger.renewalExtensions(originalTransactionID: E.original).map(\.requestIdentifier) == ["req-1"])
        let events = try ledger.events(OutboxQuery())
        #expect(events.map(\.type) == ["RENEWAL_EXTENDED"])
        #expect(events.first?.deliveries.map(\.webhook) == ["backend"])
        #expect(rules.causes.withLock { $0 }.contains(.renewalExtension(requestIdentifier: "req-1", effectiveDate: expiry)))

        // Another request that Apple answers with the same expiry is the same extension to the backend.
        try ledger.record(renewalExtension: Self.granted("req-2", effectiveDate: expiry))
        #expect(try ledger.events(OutboxQuery()).count == 1)
        // Only the ledger's facts are Apple's signed ones: the subscription's expiry has not moved.
        #expect(try ledger.subscription(originalTransactionID: E.original)?.latestTransaction?.expiresDate == E.t0 + 30 * E.day)
    }

    @Test(arguments: Backend.tested)
    func refusedExtension_isStored_withoutAnEvent(_ backend: Backend) throws {
        let ledger = try Self.open(backend, Rules())
        try ledger.record(transactions: [E.firstMonth], source: .jws)
        var refused = Self.granted("req-3", effectiveDate: 0)
        refused.outcome = .refused
        refused.effectiveDate = nil
        refused.appleStatus = 403
        refused.appleErrorCode = 4_030_005
        refused.message = "at most twice in 365 days"
        try ledger.record(renewalExtension: refused)
        #expect(try ledger.renewalExtension(requestIdentifier: "req-3") == refused)
        #expect(try ledger.events(OutboxQuery()).isEmpty)
    }

    @Test(arguments: Backend.tested)
    func massExtension_isRequestedThenComplete_keepingItsRequest(_ backend: Backend) throws {
        let ledger = try Self.open(backend, Rules())
        var mass = RenewalExtensionRecord(
            requestIdentifier: "mass-1", productID: "com.example.monthly", bundleID: "com.example.app",
            environment: "Production", days: 5, reasonCode: 3, storefronts: ["USA", "CAN"], requestedBy: "cli",
            requestedAt: E.t0, outcome: .requested, appleStatus: 200)
        try ledger.record(renewalExtension: mass)
        #expect(try ledger.renewalExtension(requestIdentifier: "mass-1") == mass)

        var complete = mass
        complete.outcome = .extended
        complete.completedAt = E.t0 + 60_000
        complete.succeededCount = 30
        complete.failedCount = 2
        // A completion never rewrites who asked nor when.
        complete.requestedBy = "someone else"
        try ledger.record(renewalExtension: complete)
        mass.outcome = .extended
        mass.completedAt = E.t0 + 60_000
        mass.succeededCount = 30
        mass.failedCount = 2
        #expect(try ledger.renewalExtension(requestIdentifier: "mass-1") == mass)
        #expect(try ledger.events(OutboxQuery()).isEmpty)
    }
}
