@testable import Ledger
import TestSupport
import Testing

/// Versions of one transaction signed in the same millisecond: every order of delivery ends in one answer, the one
/// docs/ledger.md names (a revocation first, then a version without a notification uuid, then the greater uuid, then
/// the greater payload).
struct TieBreakTests {
    typealias E = AppleEvents

    static let tie = E.t0 + 10 * E.day

    /// One write of a scenario, made for the transaction `id` so that each order of delivery gets ids of its own.
    struct Delivery: Sendable {
        var label: String
        var write: @Sendable (_ id: String, _ ledger: any LedgerStore) throws -> Void
    }

    /// A transaction version whose payload carries `label`, to tell afterwards which version the ledger kept.
    static func facts(_ id: String, _ label: String, signed: Int64, revoked: Bool = false) -> TransactionFacts {
        var facts = E.transaction(
            id, purchase: E.t0, expires: E.t0 + 30 * E.day, signed: signed, revoked: revoked ? signed : nil, original: id)
        facts.payloadJSON = #"{"transactionId":"\#(id)","signedDate":\#(signed),"label":"\#(label)"}"#
        return facts
    }

    /// A notification whose uuid starts with `uuid`, carrying a transaction version labelled `label` and, with
    /// `autoRenew`, renewal info.
    static func notified(_ label: String, uuid: String, revoked: Bool = false, autoRenew: Bool? = nil) -> Delivery {
        Delivery(label: label) { id, ledger in
            var renewal = autoRenew.map { E.renewal(signed: tie, autoRenew: $0, original: id) }
            renewal?.payloadJSON = #"{"originalTransactionId":"\#(id)","label":"\#(label)"}"#
            var notification = E.notification(
                revoked ? "REFUND" : "DID_CHANGE_RENEWAL_STATUS", signed: tie, uuid: "\(uuid)-\(id)",
                transaction: facts(id, label, signed: tie, revoked: revoked), renewal: renewal)
            notification.signedPayload = "header.\(label).signature"
            _ = try ledger.record(notification)
        }
    }

    /// A transaction version recorded on its own (a StoreKit 2 JWS or a receipt's entry), which has no uuid.
    static func recorded(
        _ label: String, _ source: TransactionSource, signed: Int64 = tie, revoked: Bool = false
    ) -> Delivery {
        Delivery(label: label) { id, ledger in
            try ledger.record(transactions: [facts(id, label, signed: signed, revoked: revoked)], source: source)
        }
    }

    struct Scenario: Sendable, CustomTestStringConvertible {
        var name: String
        var deliveries: [Delivery]
        /// The label of the transaction version every order must keep.
        var kept: String
        /// The auto-renew status of the renewal info every order must keep, if the scenario has renewal info.
        var autoRenew: Bool? = nil
        /// The uuid prefix of the notification every order must report as the last.
        var lastNotification: String? = nil
        var testDescription: String { name }
    }

    static let scenarios: [Scenario] = [
        Scenario(
            name: "REFUND and a renewal status change in one millisecond: the refund stays",
            deliveries: [notified("renewal-off", uuid: "f", autoRenew: false), notified("refund", uuid: "0", revoked: true)],
            kept: "refund", autoRenew: false, lastNotification: "f"),
        Scenario(
            name: "two notifications in one millisecond: the greater uuid",
            deliveries: [
                notified("from-a", uuid: "a", autoRenew: true), notified("from-b", uuid: "b", autoRenew: false),
                notified("from-9", uuid: "9", autoRenew: true),
            ],
            kept: "from-b", autoRenew: false, lastNotification: "b"),
        Scenario(
            name: "a JWS refund and a renewal notification in one millisecond: the refund",
            deliveries: [recorded("refund-jws", .jws, revoked: true), notified("renewal", uuid: "z")],
            kept: "refund-jws"),
        Scenario(
            name: "notification, JWS and a later receipt: the JWS",
            deliveries: [
                recorded("jws", .jws), notified("notification", uuid: "1"),
                recorded("receipt", .receipt, signed: tie + E.day),
            ],
            kept: "jws"),
        Scenario(
            name: "two JWS in one millisecond: the greater payload",
            deliveries: [recorded("B", .jws), recorded("A", .jws)], kept: "B"),
        Scenario(
            name: "two receipts made in one millisecond: the greater payload",
            deliveries: [recorded("a", .receipt), recorded("b", .receipt)], kept: "b"),
        Scenario(
            name: "refund, renewal, JWS and receipt, one retried",
            deliveries: [
                notified("renewal", uuid: "e"), notified("refund", uuid: "d", revoked: true), recorded("jws", .jws),
                recorded("receipt", .receipt), notified("renewal", uuid: "e"),
            ],
            kept: "refund", lastNotification: "e"),
    ]

    @Test(arguments: Backend.tested, scenarios)
    func everyOrderOfDelivery_keepsTheSameVersion(_ backend: Backend, _ scenario: Scenario) throws {
        let ledger = try makeLedger(backend)
        for (number, order) in Self.permutations(scenario.deliveries.count).enumerated() {
            let id = "p\(number)"
            for index in order { try scenario.deliveries[index].write(id, ledger) }
            let labels = order.map { scenario.deliveries[$0].label }
            let record = try #require(try ledger.transaction(id: id))
            #expect(record.facts.payloadJSON.contains(#""label":"\#(scenario.kept)""#), "delivered \(labels)")
            #expect((record.facts.revocationDate != nil) == scenario.kept.contains("refund"), "delivered \(labels)")
            if let autoRenew = scenario.autoRenew {
                #expect(try ledger.renewalInfos(originalTransactionIDs: [id]).first?.autoRenewStatus == autoRenew,
                        "delivered \(labels)")
            }
            if let last = scenario.lastNotification {
                let uuid = try ledger.subscription(originalTransactionID: id)?.lastNotification?.uuid
                #expect(uuid == "\(last)-\(id)", "delivered \(labels)")
            }
        }
    }

    @Test func version_ordersByKindThenDateThenRevocationThenUUIDThenPayload() {
        typealias V = LedgerStatements.Version
        let base = V(
            isStoreKit2: true, signedDate: 5, isRevocation: false, notificationUUID: "b", payloadJSON: #"{"a":1}"#)
        var receipt = base
        receipt.isStoreKit2 = false
        receipt.signedDate = 9
        #expect(receipt < base)
        var later = base
        later.signedDate = 6
        later.notificationUUID = nil
        #expect(base < later)
        var revocation = base
        revocation.notificationUUID = "a"
        revocation.isRevocation = true
        #expect(base < revocation)
        var greaterUUID = base
        greaterUUID.notificationUUID = "c"
        #expect(base < greaterUUID)
        var noUUID = base
        noUUID.notificationUUID = nil
        noUUID.payloadJSON = "{}"
        #expect(base < noUUID)
        var greaterPayload = base
        greaterPayload.payloadJSON = #"{"b":1}"#
        #expect(base < greaterPayload)
        #expect(!(base < base))
        // Bytes decide, not Swift's canonical equivalence: é precomposed and decomposed are two payloads.
        var precomposed = base
        precomposed.payloadJSON = "\u{E9}"
        var decomposed = base
        decomposed.payloadJSON = "e\u{301}"
        #expect(precomposed != decomposed)
        #expect((precomposed < decomposed) != (decomposed < precomposed))
    }

    /// Every order of `0..<count`.
    static func permutations(_ count: Int) -> [[Int]] {
        guard count > 0 else { return [[]] }
        return permutations(count - 1).flatMap { shorter in
            (0...shorter.count).map { position in
                var order = shorter
                order.insert(count - 1, at: position)
                return order
            }
        }
    }
}
