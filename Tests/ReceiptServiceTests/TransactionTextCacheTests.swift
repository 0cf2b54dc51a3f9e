import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService

/// Normalized transactions' texts kept across requests (issue 24's speed): the subscription and account answers copy
/// them, and must say byte for byte what the trees said, before and after the ledger changes under them.
struct TransactionTextCacheTests {
    typealias E = SignedEvents

    static let account = "/v1/accounts/alice"
    static let subscription = "/v1/subscriptions/\(E.original)"
    /// Before the refund below: `asOf` edits the refunded payload, whose text is then another.
    static let beforeRefund = ReceiptDate(E.at(-7)).rfc3339

    /// The same service over the same ledger, with no text kept yet.
    static func cold(_ routes: ReceiptRoutes) -> ReceiptRoutes {
        ReceiptRoutes(
            configuration: routes.configuration, validator: routes.validator, jwsVerifier: routes.jwsVerifier,
            ledger: routes.ledger, metrics: ServiceMetrics(), clock: { fixedNow })
    }

    /// What the answers were before texts were kept: the trees, from facts read from the database.
    static func trees(_ routes: ReceiptRoutes, at: Date?) throws -> (account: [UInt8], subscription: [UInt8]) {
        let instant = ReceiptDate(at ?? fixedNow).millisecondsSince1970
        let (snapshot, facts) = try routes.ledger.withStore { (store) throws(LedgerError) in
            (try store.account("alice"), try store.subscription(originalTransactionID: E.original))
        }
        let report = AccountReport(snapshot: try #require(snapshot), rules: routes.entitlementRules, at: instant)
        var subscription = try #require(facts)
        if at != nil { subscription = subscription.asOf(instant) }
        let tree = ReceiptRoutes.withExtensions(ReceiptRoutes.subscriptionJSON(subscription, at: instant), [])
        return (report.json.serialized(), tree.serialized())
    }

    /// Each answer twice (the second from kept texts), from a service that kept none, and as the trees said.
    static func expectAnswersAsTheTreesSay(_ routes: ReceiptRoutes, sourceLocation: SourceLocation = #_sourceLocation)
        throws
    {
        let cold = Self.cold(routes)
        for at in [nil, Self.beforeRefund] {
            let query = at.map { "?at=\($0)" } ?? ""
            let expected = try trees(routes, at: at.flatMap(ReceiptDate.init(rfc3339:))?.date)
            for (path, tree) in [(account, expected.account), (subscription, expected.subscription)] {
                let first = routes.handle(get(path + query), on: .main)
                let second = routes.handle(get(path + query), on: .main)
                let unkept = cold.handle(get(path + query), on: .main)
                #expect(first.status == 200, "\(path + query)", sourceLocation: sourceLocation)
                #expect(difference(first.body, tree) == nil, "\(path + query)", sourceLocation: sourceLocation)
                #expect(
                    difference(second.body, tree) == nil, "\(path + query), its texts kept",
                    sourceLocation: sourceLocation)
                #expect(
                    difference(unkept.body, tree) == nil, "\(path + query), no text kept",
                    sourceLocation: sourceLocation)
            }
        }
    }

    /// Where an answer parts from the expected one, with a little of each from there; nil when they are the same.
    static func difference(_ answer: [UInt8], _ expected: [UInt8]) -> String? {
        guard answer != expected else { return nil }
        let at = zip(answer, expected).prefix { $0 == $1 }.count
        func excerpt(_ bytes: [UInt8]) -> String {
            String(decoding: bytes[max(0, at - 40)..<min(bytes.count, at + 80)], as: UTF8.self)
        }
        return "byte \(at) of \(answer.count) (expected \(expected.count)): \(excerpt(answer)) | expected: "
            + excerpt(expected)
    }

    static func purchases(_ routes: ReceiptRoutes) -> [JSONValue] {
        routes.handle(get(account), on: .main).json?["purchases"]?.arrayValue ?? []
    }

    static func renewed() throws -> String {
        try E.notification(
            "DID_RENEW", signed: -10, transaction: E.transaction("7001", purchased: -10, expires: 20, signed: -10),
            renewal: E.renewal(signed: -10))
    }

    static func refunded(signed: Double = -5) -> TransactionBlueprint {
        E.transaction("7001", purchased: -10, expires: 20, signed: signed, revoked: -5)
    }

    @Test(arguments: Backend.tested)
    func keptTexts_answerAsTheTrees_acrossARenewalAndARefund(_ backend: Backend) throws {
        let routes = try AccountRoutesTests.routes(backend)
        let lastMonth = E.transaction("7000", purchased: -40, expires: -10, signed: -40).payload
        let bought = AccountRoutesTests.purchase(routes, account: "alice", jws: try AccountRoutesTests.signed(lastMonth))
        #expect(bought.status == 200)
        try Self.expectAnswersAsTheTreesSay(routes)

        #expect(routes.deliver(try Self.renewed()).status == 200)
        #expect(Self.purchases(routes).compactMap { $0["transaction_id"]?.stringValue } == ["7001", "7000"])
        try Self.expectAnswersAsTheTreesSay(routes)

        let refund = try E.notification("REFUND", signed: -5, transaction: Self.refunded())
        #expect(routes.deliver(refund).status == 200)
        #expect(Self.purchases(routes).first?["revocation_date"] == .string(ReceiptDate(E.at(-5)).rfc3339))
        try Self.expectAnswersAsTheTreesSay(routes)
    }

    /// Two subscriptions bought the same instant: `purchases` interleaves their kept orders, ids tied on the date
    /// listed by their UTF-8 ("800" before "7000"), before and after a renewal and a refund of one of them.
    @Test(arguments: Backend.tested)
    func keptTextsOfTwoSubscriptions_answerAsTheTrees_acrossARenewalAndARefund(_ backend: Backend) throws {
        let routes = try AccountRoutesTests.routes(backend)
        for (id, original) in [("7000", E.original), ("800", "8000")] {
            let month = E.transaction(id, purchased: -40, expires: -10, signed: -40, original: original).payload
            let signed = try AccountRoutesTests.signed(month)
            #expect(AccountRoutesTests.purchase(routes, account: "alice", jws: signed).status == 200)
        }
        #expect(Self.purchaseIDs(routes) == ["800", "7000"])
        try Self.expectAnswersAsTheTreesSay(routes)

        #expect(routes.deliver(try Self.renewed()).status == 200)
        #expect(Self.purchaseIDs(routes) == ["7001", "800", "7000"])
        try Self.expectAnswersAsTheTreesSay(routes)

        let refund = try E.notification("REFUND", signed: -5, transaction: Self.refunded())
        #expect(routes.deliver(refund).status == 200)
        #expect(Self.purchases(routes).first?["revocation_date"] == .string(ReceiptDate(E.at(-5)).rfc3339))
        try Self.expectAnswersAsTheTreesSay(routes)
    }

    static func purchaseIDs(_ routes: ReceiptRoutes) -> [String] {
        purchases(routes).compactMap { $0["transaction_id"]?.stringValue }
    }

    /// Another replica stores a refund in the shared database: the next answer shows it, though this process wrote
    /// nothing and its texts of that transaction were kept.
    @Test(.enabled(if: !Backend.skipPostgres)) func anotherReplicasRefund_showsAtOnce() throws {
        let routes = try AccountRoutesTests.routes(.postgres)
        let lastMonth = E.transaction("7000", purchased: -40, expires: -10, signed: -40).payload
        #expect(AccountRoutesTests.purchase(routes, account: "alice", jws: try AccountRoutesTests.signed(lastMonth)).status == 200)
        #expect(routes.deliver(try Self.renewed()).status == 200)
        try Self.expectAnswersAsTheTreesSay(routes)

        let facts = try #require(LedgerFacts.transaction(Self.refunded().payload))
        try routes.ledger.withStore { (store) throws(LedgerError) in
            try store.record(transactions: [facts], source: .serverAPI)
        }
        #expect(Self.purchases(routes).first?["revocation_date"] == .string(ReceiptDate(E.at(-5)).rfc3339))
        try Self.expectAnswersAsTheTreesSay(routes)
    }

    // MARK: - The kept texts themselves

    static func facts(_ id: Int, revoked: Bool = false, upgraded: Bool? = nil) throws -> TransactionFacts {
        var blueprint = E.transaction(
            "\(id)", purchased: -10, expires: 20, signed: revoked ? -5 : -10, revoked: revoked ? -5 : nil)
        if let upgraded { blueprint.edits.set.append(("isUpgraded", .bool(upgraded))) }
        return try #require(LedgerFacts.transaction(blueprint.payload))
    }

    @Test func aTextIsFoundOnlyForItsOwnPayloadAndUpgrade() throws {
        let texts = NormalizedTransactionTexts()
        let bought = try Self.facts(7001)
        let refunded = try Self.facts(7001, revoked: true)
        var upgraded = bought
        upgraded.isUpgraded = true
        for facts in [bought, refunded, upgraded, bought, refunded, upgraded] {
            #expect(texts.text(of: facts) == ReceiptRoutes.transactionJSON(facts).serialized())
        }
        #expect(texts.count == 1)
    }

    /// A subscription's transactions written once are kept for the very same transactions only: a refund stored
    /// since, and the facts as of an earlier instant, are written afresh, each as the trees say.
    @Test func subscriptionTexts_areKeptForTheSameTransactionsOnly() throws {
        let texts = NormalizedTransactionTexts()
        func subscription(_ transactions: [TransactionFacts]) -> SubscriptionFacts {
            SubscriptionFacts(
                originalTransactionID: E.original, transactions: transactions, renewal: nil, lastNotification: nil,
                updatedAt: 0)
        }
        func expectWrittenAsTheTrees(_ facts: SubscriptionFacts, sourceLocation: SourceLocation = #_sourceLocation) {
            let written = texts.texts(of: facts)
            let tree = JSONValue.array(facts.transactions.map(ReceiptRoutes.transactionJSON)).serialized()
            #expect(Self.difference(written.array, tree) == nil, sourceLocation: sourceLocation)
            #expect(written.latest == facts.latestTransactionIndex, sourceLocation: sourceLocation)
            let order = facts.transactions.indices.sorted {
                SubscriptionTexts.isListed(facts.transactions[$0], before: facts.transactions[$1])
            }
            #expect(written.purchaseOrder == order, sourceLocation: sourceLocation)
        }
        let bought = subscription([try Self.facts(7001), try Self.facts(7000)])
        let refunded = subscription([try Self.facts(7001, revoked: true), try Self.facts(7000)])
        let instant = ReceiptDate(E.at(-7)).millisecondsSince1970
        for facts in [bought, bought, refunded, refunded.asOf(instant), bought] { expectWrittenAsTheTrees(facts) }
        #expect(texts.subscriptionCount == 1)
        #expect(texts.texts(of: subscription([])).array == Array("[]".utf8))
    }

    @Test func keptTexts_stayWithinTheirBound() throws {
        let texts = NormalizedTransactionTexts(byteLimit: 64 << 10)
        let all = try (0..<400).map { try Self.facts(10_000 + $0) }
        for facts in all { _ = texts.text(of: facts) }
        let perEntry = all[0].payloadJSON.utf8.count + ReceiptRoutes.transactionJSON(all[0]).serialized().count
        #expect(texts.count > 0)
        #expect(texts.count * perEntry <= texts.byteLimit)
        // What is read again stays: the newest half of the limit is still there.
        #expect(texts.text(of: all[399]) == ReceiptRoutes.transactionJSON(all[399]).serialized())
    }

    /// Requests on many threads reading versions of the same transactions while they change: each gets the text of
    /// the facts it holds.
    @Test func concurrentReadersOfChangingFacts_eachGetTheirOwnText() async throws {
        let texts = NormalizedTransactionTexts(byteLimit: 256 << 10)
        let versions = try (0..<50).map { id in
            [try Self.facts(20_000 + id), try Self.facts(20_000 + id, revoked: true)]
        }
        let expected = versions.map { $0.map { ReceiptRoutes.transactionJSON($0).serialized() } }
        let mismatches = await withTaskGroup(of: Int.self) { group in
            for reader in 0..<8 {
                group.addTask {
                    var mismatches = 0
                    for round in 0..<40 {
                        for (id, facts) in versions.enumerated() {
                            let version = (reader + round + id) % 2
                            if texts.text(of: facts[version]) != expected[id][version] { mismatches += 1 }
                        }
                    }
                    return mismatches
                }
            }
            return await group.reduce(0, +)
        }
        #expect(mismatches == 0)
    }
}
