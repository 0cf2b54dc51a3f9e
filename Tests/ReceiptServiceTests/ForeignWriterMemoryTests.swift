import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import StoreKitJWS
import TestSupport
import Testing

@testable import ReceiptService

/// A server on a SQLite file remembers subscriptions and what it wrote between its own writes; the command line
/// (`store sync`, `accounts delete`, …) commits to the same file from another process without telling it. The next
/// answer must show that commit: a refund answered as still active is the worst answer receiptd can give.
struct ForeignWriterMemoryTests {
    typealias E = SignedEvents

    static let account = "/v1/accounts/alice"
    static let subscription = "/v1/subscriptions/\(E.original)"

    /// The accounts tests' service over a SQLite file at `path`.
    static func routes(at path: String) throws -> ReceiptRoutes {
        var configuration = LedgerService.configuration
        configuration.apps[0].entitlements = ["pro": ["pro.monthly"]]
        let store = try SQLiteLedger(
            path: path, clock: TestClock.fixed, linkRules: configuration.accountLinkRules)
        let validator = configuration.makeValidator()
        return ReceiptRoutes(
            configuration: configuration, validator: validator, jwsVerifier: JWSVerifier(policy: validator.policy),
            ledger: PurchaseLedger(store: store), metrics: ServiceMetrics(), clock: { fixedNow })
    }

    /// Alice's subscription bought and renewed through the service, each answer asked twice so that it is remembered.
    static func servedAndRemembered() throws -> (routes: ReceiptRoutes, path: String) {
        let path = Scratch.newPath("shared.sqlite")
        let routes = try routes(at: path)
        let lastMonth = E.transaction("7000", purchased: -40, expires: -10, signed: -40).payload
        #expect(AccountRoutesTests.purchase(routes, account: "alice", jws: try AccountRoutesTests.signed(lastMonth)).status == 200)
        #expect(routes.deliver(try TransactionTextCacheTests.renewed()).status == 200)
        for _ in 0..<2 {
            #expect(routes.handle(get(subscription), on: .main).status == 200)
            #expect(routes.handle(get(account), on: .main).status == 200)
        }
        #expect(routes.ledger.rememberedSubscriptions == 1)
        return (routes, path)
    }

    /// What the command line does: its own ledger on the same file, a write, closed again.
    static func anotherProcess(
        writesTo path: String, _ write: (SQLiteLedger) throws(LedgerError) -> Void
    ) throws {
        let other = try SQLiteLedger(path: path, clock: TestClock.fixed)
        try write(other)
        try other.close()
    }

    static func revocationDate(_ routes: ReceiptRoutes, _ path: String) -> JSONValue? {
        let answer = routes.handle(get(path), on: .main)
        let transactions = path == account
            ? answer.json?["purchases"]?.arrayValue : answer.json?["transactions"]?.arrayValue
        return transactions?.first { $0["transaction_id"] == .string("7001") }?["revocation_date"]
    }

    @Test(arguments: [subscription, account])
    func anotherProcessesRefund_showsInTheNextAnswer(_ path: String) throws {
        let (routes, file) = try Self.servedAndRemembered()
        #expect(Self.revocationDate(routes, path) == .null || Self.revocationDate(routes, path) == nil)

        let refund = try #require(LedgerFacts.transaction(TransactionTextCacheTests.refunded().payload))
        try Self.anotherProcess(writesTo: file) { (ledger) throws(LedgerError) in
            try ledger.record(transactions: [refund], source: .serverAPI)
        }
        #expect(Self.revocationDate(routes, path) == .string(ReceiptDate(E.at(-5)).rfc3339))
        try TransactionTextCacheTests.expectAnswersAsTheTreesSay(routes)
    }

    @Test(arguments: [subscription, account])
    func anotherProcessesRenewal_showsInTheNextAnswer(_ path: String) throws {
        let (routes, file) = try Self.servedAndRemembered()
        let renewal = try #require(
            LedgerFacts.transaction(E.transaction("7002", purchased: -2, expires: 28, signed: -2).payload))
        try Self.anotherProcess(writesTo: file) { (ledger) throws(LedgerError) in
            try ledger.record(transactions: [renewal], source: .serverAPI)
        }
        let answer = routes.handle(get(path), on: .main)
        let transactions = path == Self.account
            ? answer.json?["purchases"]?.arrayValue : answer.json?["transactions"]?.arrayValue
        #expect(transactions?.compactMap { $0["transaction_id"]?.stringValue }.contains("7002") == true)
    }

    /// `receiptd accounts delete` from another process: the account read (and remembered) before is gone.
    @Test func anotherProcessesDeletion_showsInTheNextAnswer() throws {
        let (routes, file) = try Self.servedAndRemembered()
        try Self.anotherProcess(writesTo: file) { (ledger) throws(LedgerError) in
            #expect(try ledger.deleteAccount("alice"))
        }
        #expect(routes.handle(get(Self.account), on: .main).errorCode == "account_not_found")
    }

    /// The server's own commits (the heartbeat every second above all) are not another process's: what it
    /// remembers stays.
    @Test func ownCommits_keepWhatIsRemembered() throws {
        let (routes, _) = try Self.servedAndRemembered()
        try routes.ledger.withStore { (store) throws(LedgerError) in try store.checkWritable() }
        #expect(routes.handle(get(Self.subscription), on: .main).status == 200)
        #expect(routes.ledger.rememberedSubscriptions == 1)
    }

    /// A receipt validated again costs no write while this process wrote its payload; once another process committed
    /// (it may have deleted or replaced what was written), it goes to the ledger again.
    @Test func anotherProcessesCommit_makesTheNextValidationWriteAgain() throws {
        let file = Scratch.newPath("written.sqlite")
        let ledger = PurchaseLedger(store: try SQLiteLedger(path: file, clock: TestClock.fixed))
        let facts = try #require(
            LedgerFacts.transaction(E.transaction("7000", purchased: -40, expires: -10, signed: -40).payload))
        try ledger.withStore { (store) throws(LedgerError) in
            try ledger.record([facts], source: .receipt, in: store)
        }
        #expect(ledger.needsRecording(source: .receipt)("7000", facts.signedDate) == false)

        let unrelated = try #require(
            LedgerFacts.transaction(E.transaction("7100", purchased: -1, expires: 29, signed: -1, original: "7100").payload))
        try Self.anotherProcess(writesTo: file) { (other) throws(LedgerError) in
            try other.record(transactions: [unrelated], source: .serverAPI)
        }
        #expect(ledger.needsRecording(source: .receipt)("7000", facts.signedDate) == true)
    }
}
