import AppStoreServerAPI
import Foundation
import JSONText
import Ledger
import TestSupport
import Testing

@testable import ReceiptService

/// The consumption sender's rounds against a fake Apple: an answered request is sent once with Apple's body, Apple's
/// refusal fails it for good, Apple's outage retries it, and consent is never invented.
struct ConsumptionRoundTests {
    static let t0: Int64 = 1_700_000_000_000
    static let hour: Int64 = 3_600_000
    static let answer =
        #"{"customer_consented":true,"consumption_percentage":25000,"delivery_status":"DELIVERED","#
        + #""refund_preference":"GRANT_PRORATED","sample_content_provided":false}"#

    struct DirectLedger: ConsumptionLedger {
        let store: any LedgerStore
        func withConsumption<Result>(
            _ body: (any LedgerConsumption) throws(LedgerError) -> Result
        ) throws(LedgerError) -> Result { try body(store) }
    }

    static func ledger(claimed: Bool = false) throws -> any LedgerStore {
        let store = try makeLedger(.sqlite)
        let transaction = TransactionFacts(
            transactionID: "3001", originalTransactionID: "3001", productID: "coins.100",
            bundleID: FakeAppStoreServer.bundleID, type: "Consumable", purchaseDate: t0 - hour,
            environment: "Production", signedDate: t0 - hour, payloadJSON: "{}")
        _ = try store.record(
            NotificationFacts(
                uuid: "u1", type: "CONSUMPTION_REQUEST", signedDate: t0, environment: "Production",
                bundleID: FakeAppStoreServer.bundleID, signedPayload: "h.p.s", transaction: transaction,
                consumptionRequestReason: "UNINTENDED_PURCHASE"))
        if claimed { _ = try store.claim(transactionID: "3001", account: "alice", at: t0) }
        return store
    }

    static func round(
        _ store: any LedgerStore, _ fake: FakeAppStoreServer, fromClaims: Bool = false
    ) throws -> ConsumptionRound {
        var configuration = ServiceConfiguration()
        var app = ServiceConfiguration.App(bundleID: FakeAppStoreServer.bundleID)
        app.consumptionDeliveryStatusFromClaims = fromClaims
        configuration.apps = [app]
        let client = try fake.client()
        return ConsumptionRound(
            ledger: DirectLedger(store: store), configuration: configuration, client: { _, _ in client })
    }

    /// A fake App Store whose consumption endpoint for 3001 gives `answers` in turn, then its usual 202.
    static func fake(answeringConsumption answers: [JSONValue]) throws -> FakeAppStoreServer {
        try FakeAppStoreServer(fixture: [
            ("faults", .object([("/inApps/v2/transactions/consumption/3001", .array(answers))]))
        ])
    }

    /// The ledger with 3001's request and the app's answer to it, at t0.
    static func answeredLedger() throws -> any LedgerStore {
        let store = try ledger()
        _ = try store.storeConsumptionAnswer(transactionID: "3001", body: answer, at: t0)
        return store
    }

    static func consumptionCalls(_ fake: FakeAppStoreServer) throws -> [JSONValue] {
        try fake.requests().filter { $0["path"] == .string("/inApps/v2/transactions/consumption/3001") }
    }

    @Test func anAnsweredRequest_isSentOnceWithApplesBody() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        let store = try Self.ledger()
        let round = try Self.round(store, fake)
        #expect(round.run(now: Self.t0 + Self.hour).isEmpty)
        _ = try store.storeConsumptionAnswer(transactionID: "3001", body: Self.answer, at: Self.t0 + Self.hour)
        let outcomes = round.run(now: Self.t0 + Self.hour)
        #expect(outcomes.count == 1)
        #expect(outcomes.first?.recorded == true)
        let calls = try Self.consumptionCalls(fake)
        #expect(calls.count == 1)
        #expect(calls.first?["method"] == .string("PUT"))
        let expected =
            #"{"customerConsented":true,"consumptionPercentage":25000,"deliveryStatus":"DELIVERED","#
            + #""refundPreference":"GRANT_PRORATED","sampleContentProvided":false}"#
        #expect(calls.first?["body"] == .string(expected))
        let request = try #require(try store.consumptionRequest(transactionID: "3001"))
        #expect(request.state == .sent)
        #expect(request.appleStatus == 202)
        #expect(request.sentBody == expected)
        #expect(round.run(now: Self.t0 + 2 * Self.hour).isEmpty)
        #expect(try Self.consumptionCalls(fake).count == 1)
    }

    @Test func applesRefusal_failsTheRequestWithApplesCode() throws {
        let fake = try Self.fake(answeringConsumption: [
            .object([("status", .integer(400)), ("errorCode", .integer(4_000_036))])
        ])
        let store = try Self.answeredLedger()
        _ = try Self.round(store, fake).run(now: Self.t0 + Self.hour)
        let request = try #require(try store.consumptionRequest(transactionID: "3001"))
        #expect(request.state == .failed)
        #expect(request.appleStatus == 400)
        #expect(request.appleErrorCode == 4_000_036)
        #expect(try Self.consumptionCalls(fake).count == 1)
    }

    /// Apple documents 202 for this call; a 200 (with a body) is taken as sent too, and recorded as it came.
    @Test func applesOtherSuccess_isRecordedAsApplesStatus() throws {
        let fake = try Self.fake(answeringConsumption: [.object([("status", .integer(200))])])
        let store = try Self.answeredLedger()
        _ = try Self.round(store, fake).run(now: Self.t0 + Self.hour)
        let request = try #require(try store.consumptionRequest(transactionID: "3001"))
        #expect(request.state == .sent)
        #expect(request.appleStatus == 200)
        #expect(try Self.consumptionCalls(fake).count == 1)
    }

    @Test func applesOutage_leavesTheRequestOpenForALaterTry() throws {
        let fake = try Self.fake(answeringConsumption: Array(repeating: .object([("status", .integer(503))]), count: 3))
        let store = try Self.answeredLedger()
        let round = try Self.round(store, fake)
        let now = Self.t0 + Self.hour
        _ = round.run(now: now)
        let waiting = try #require(try store.consumptionRequest(transactionID: "3001"))
        #expect(waiting.state == .open)
        #expect(waiting.attempts == 1)
        #expect((waiting.nextAttemptAt ?? 0) > now)
        #expect(waiting.lastError != nil)
        #expect(round.run(now: now + 1).isEmpty)
        _ = round.run(now: waiting.nextAttemptAt ?? now)
        #expect(try store.consumptionRequest(transactionID: "3001")?.state == .sent)
    }

    @Test(arguments: [false, true])
    func withoutDeliveryStatus_onlyAClaimedConsumableIsSentAsDelivered(_ claimed: Bool) throws {
        let fake = try FakeAppStoreServer(fixture: [])
        let store = try Self.ledger(claimed: claimed)
        _ = try store.storeConsumptionAnswer(
            transactionID: "3001", body: #"{"customer_consented":true,"sample_content_provided":true}"#, at: Self.t0)
        _ = try Self.round(store, fake, fromClaims: true).run(now: Self.t0 + Self.hour)
        let calls = try Self.consumptionCalls(fake)
        #expect(calls.count == (claimed ? 1 : 0))
        if claimed {
            #expect(calls.first?["body"] == .string(
                #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":true}"#))
        }
        #expect(try store.consumptionRequest(transactionID: "3001")?.state == (claimed ? .sent : .open))
    }

    @Test func anExpiredRequest_isNeverSent() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        let store = try Self.answeredLedger()
        _ = try Self.round(store, fake).run(now: Self.t0 + 12 * Self.hour)
        #expect(try Self.consumptionCalls(fake).isEmpty)
        #expect(try store.consumptionRequest(transactionID: "3001")?.state == .expired)
    }
}
