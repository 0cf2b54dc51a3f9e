import Dispatch
import Synchronization
import TestSupport
import Testing

@testable import Ledger

/// Apple's refund questions in the ledger: opened with their notification, answered per transaction, claimed by one
/// sender at a time, finished into their states, expired when Apple's window closes.
struct ConsumptionTests {
    typealias E = AppleEvents
    static let hour: Int64 = 3_600_000

    static func consumable(_ id: String) -> TransactionFacts {
        var facts = E.transaction(id, purchase: E.t0, expires: nil, signed: E.t0, original: id)
        facts.type = "Consumable"
        return facts
    }

    static func request(_ id: String, uuid: String, signed: Int64 = E.t0, reason: String? = "UNINTENDED_PURCHASE")
        -> NotificationFacts
    {
        var notification = E.notification(
            "CONSUMPTION_REQUEST", signed: signed, uuid: uuid, transaction: consumable(id))
        notification.consumptionRequestReason = reason
        return notification
    }

    static let answer = #"{"customer_consented":true,"delivery_status":"DELIVERED","sample_content_provided":false}"#

    @Test(arguments: Backend.tested)
    func aConsumptionRequestNotification_opensARequestForTwelveHoursFromItsSignedDate(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        #expect(try ledger.record(Self.request("3001", uuid: "u1")) == .stored)
        let request = try #require(try ledger.consumptionRequest(transactionID: "3001"))
        #expect(request.state == .open)
        #expect(request.requestedAt == E.t0)
        #expect(request.expiresAt == E.t0 + 12 * Self.hour)
        #expect(request.reason == "UNINTENDED_PURCHASE")
        #expect(request.bundleID == "com.example.app")
        #expect(request.answer == nil)
        #expect(try ledger.transaction(id: "3001") != nil)
    }

    @Test(arguments: Backend.tested)
    func aRedeliveredNotification_addsNoRequest(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        _ = try ledger.record(Self.request("3001", uuid: "u1"))
        #expect(try ledger.record(Self.request("3001", uuid: "u1")) == .duplicate)
        #expect(try ledger.consumptionRequests(openOnly: false, now: E.t0, limit: 10).count == 1)
    }

    @Test(arguments: Backend.tested)
    func otherNotifications_openNoRequest(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        _ = try ledger.record(E.notification("REFUND", signed: E.t0, uuid: "r1", transaction: Self.consumable("3001")))
        #expect(try ledger.consumptionRequest(transactionID: "3001") == nil)
    }

    @Test(arguments: Backend.tested)
    func onlyAnsweredRequests_areClaimed_andAnAnswerIsReplaced(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        _ = try ledger.record(Self.request("3001", uuid: "u1"))
        let now = E.t0 + Self.hour
        #expect(try ledger.claimConsumptionRequests(holder: "a", now: now, leaseUntil: now + 1000, limit: 10).isEmpty)
        let stored = try ledger.storeConsumptionAnswer(transactionID: "3001", body: "{}", at: now)
        #expect(stored?.answer?.body == "{}")
        _ = try ledger.storeConsumptionAnswer(transactionID: "3001", body: Self.answer, at: now + 1)
        #expect(try ledger.consumptionAnswer(transactionID: "3001")?.body == Self.answer)
        let claimed = try ledger.claimConsumptionRequests(holder: "a", now: now + 1, leaseUntil: now + 1000, limit: 10)
        #expect(claimed.map(\.request.notificationUUID) == ["u1"])
        #expect(claimed.first?.productType == "Consumable")
        #expect(claimed.first?.isClaimed == false)
        #expect(claimed.first?.request.answer?.body == Self.answer)
    }

    @Test(arguments: Backend.tested)
    func aSentRequest_keepsAppleStatusAndBody_andIsClaimedNoMore(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        _ = try ledger.record(Self.request("3001", uuid: "u1"))
        let now = E.t0 + Self.hour
        _ = try ledger.storeConsumptionAnswer(transactionID: "3001", body: Self.answer, at: now)
        _ = try ledger.claimConsumptionRequests(holder: "a", now: now, leaseUntil: now + 1000, limit: 10)
        #expect(try ledger.finishConsumptionRequest(
            notificationUUID: "u1", holder: "b", result: .sent(status: 202, body: "{}"), at: now) == false)
        #expect(try ledger.finishConsumptionRequest(
            notificationUUID: "u1", holder: "a", result: .sent(status: 202, body: "{\"x\":1}"), at: now + 5))
        let request = try #require(try ledger.consumptionRequest(transactionID: "3001"))
        #expect(request.state == .sent)
        #expect(request.appleStatus == 202)
        #expect(request.sentBody == "{\"x\":1}")
        #expect(request.sentAt == now + 5)
        #expect(request.attempts == 1)
        #expect(
            try ledger.claimConsumptionRequests(holder: "a", now: now + 9, leaseUntil: now + 2000, limit: 10).isEmpty)
        #expect(try ledger.consumptionRequestCounts(now: now)[.sent] == 1)
    }

    @Test(arguments: Backend.tested)
    func aRetry_waitsItsTime_andAFailureKeepsAppleErrorCode(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        _ = try ledger.record(Self.request("3001", uuid: "u1"))
        let now = E.t0 + Self.hour
        _ = try ledger.storeConsumptionAnswer(transactionID: "3001", body: Self.answer, at: now)
        _ = try ledger.claimConsumptionRequests(holder: "a", now: now, leaseUntil: now + 1000, limit: 10)
        #expect(try ledger.finishConsumptionRequest(
            notificationUUID: "u1", holder: "a",
            result: .retry(at: now + 60_000, status: 500, appleErrorCode: nil, error: "down"), at: now))
        #expect(try ledger.claimConsumptionRequests(holder: "a", now: now + 1, leaseUntil: now + 9, limit: 10).isEmpty)
        // A new answer makes it due now.
        _ = try ledger.storeConsumptionAnswer(transactionID: "3001", body: Self.answer, at: now + 2)
        let again = try ledger.claimConsumptionRequests(holder: "a", now: now + 2, leaseUntil: now + 9, limit: 10)
        #expect(again.first?.request.attempts == 1)
        #expect(try ledger.finishConsumptionRequest(
            notificationUUID: "u1", holder: "a",
            result: .failed(status: 400, appleErrorCode: 4_000_042, error: "refused"), at: now + 3))
        let request = try #require(try ledger.consumptionRequest(transactionID: "3001"))
        #expect(request.state == .failed)
        #expect(request.appleErrorCode == 4_000_042)
        #expect(request.attempts == 2)
    }

    @Test(arguments: Backend.tested)
    func twelveHoursAfterItsSignedDate_anUnsentRequestExpires(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        _ = try ledger.record(Self.request("3001", uuid: "u1"))
        _ = try ledger.storeConsumptionAnswer(transactionID: "3001", body: Self.answer, at: E.t0)
        let closed = E.t0 + 12 * Self.hour
        #expect(try ledger.consumptionRequestCounts(now: closed - 1)[.open] == 1)
        #expect(try ledger.consumptionRequestCounts(now: closed)[.expired] == 1)
        #expect(try ledger.consumptionRequests(openOnly: true, now: closed, limit: 10).isEmpty)
        #expect(
            try ledger.claimConsumptionRequests(holder: "a", now: closed, leaseUntil: closed + 9, limit: 10).isEmpty)
        #expect(try ledger.expireConsumptionRequests(now: closed) == 1)
        #expect(try ledger.consumptionRequest(transactionID: "3001")?.state == .expired)
    }

    @Test(arguments: Backend.tested)
    func twoSenders_neverClaimOneRequestAtOnce_untilTheLeaseRunsOut(_ backend: Backend) throws {
        let location = try DatabaseLocation.fresh(backend)
        let first = try location.open()
        let second = backend == .postgres ? try location.open() : first
        for index in 0..<20 {
            _ = try first.record(Self.request("30\(index)", uuid: "u\(index)"))
            _ = try first.storeConsumptionAnswer(transactionID: "30\(index)", body: Self.answer, at: E.t0)
        }
        let now = E.t0 + Self.hour
        let senders: [any LedgerStore] = [first, second]
        let claimed = Mutex<[[String]]>([[], []])
        DispatchQueue.concurrentPerform(iterations: 2) { index in
            let uuids = ((try? senders[index].claimConsumptionRequests(
                holder: "sender-\(index)", now: now, leaseUntil: now + 60_000, limit: 15)) ?? []
            ).map(\.request.notificationUUID)
            claimed.withLock { $0[index] = uuids }
        }
        let claims = claimed.withLock { $0 }
        #expect(Set(claims[0]).isDisjoint(with: claims[1]))
        #expect(claims[0].count + claims[1].count == 20)
        // The lease ran out (a sender killed mid-send): the request is claimable again.
        let later = try first.claimConsumptionRequests(
            holder: "c", now: now + 60_000, leaseUntil: now + 90_000, limit: 50)
        #expect(later.count == 20)
    }
}
