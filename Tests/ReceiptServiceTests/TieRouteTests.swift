import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService

/// Apple's notifications signed in the same millisecond, delivered in either order, give one answer over HTTP.
struct TieRouteTests {
    typealias E = SignedEvents

    /// A refund and a renewal status change of the same transaction, both signed two days ago.
    static func sameInstant() throws -> [String] {
        [
            try E.notification(
                "REFUND", signed: -2, uuid: "00000000-refund",
                transaction: E.transaction("7000", purchased: -10, expires: 20, signed: -2, revoked: -2)),
            try E.notification(
                "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", signed: -2, uuid: "ffffffff-renewal",
                transaction: E.transaction("7000", purchased: -10, expires: 20, signed: -2),
                renewal: E.renewal(signed: -2, autoRenew: false)),
        ]
    }

    @Test(arguments: Backend.tested)
    func refundAndRenewalChangeInOneMillisecond_eitherOrder_revokedWithTheRenewalChange(_ backend: Backend) throws {
        let events = try Self.sameInstant()
        var answers: [JSONValue] = []
        for order in [[0, 1], [1, 0]] {
            let routes = try LedgerService.routes(backend)
            #expect(routes.deliver(try E.subscribed()).status == 200)
            for index in order { #expect(routes.deliver(events[index]).status == 200) }
            let state = try #require(routes.handle(get("/v1/subscriptions/\(E.original)"), on: .main).json)
            #expect(state["status"] == .string("revoked"), "order \(order)")
            #expect(state["auto_renew_status"] == .bool(false), "order \(order)")
            #expect(state["last_notification"]?["notification_uuid"] == .string("ffffffff-renewal"), "order \(order)")
            #expect(routes.claim("7000", account: "alice").errorCode == "revoked", "order \(order)")
            answers.append(state)
        }
        #expect(answers[0] == answers[1])
    }

    @Test(arguments: Backend.tested)
    func refundJWSSignedWithTheSameDate_reachesTheLedger_afterTheSameTransactionWasValidated(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        let purchase = E.transaction("7000", purchased: -10, expires: 20, signed: -2)
        let refund = E.transaction("7000", purchased: -10, expires: 20, signed: -2, revoked: -2)
        for blueprint in [purchase, refund, purchase] {
            #expect(routes.handle(JWSUpload.text.request(try JWSPKI.atFixedNow.sign(blueprint.payload)), on: .main).status == 200)
        }
        #expect(routes.handle(get("/v1/subscriptions/\(E.original)"), on: .main).json?["status"] == .string("revoked"))
        #expect(routes.claim("7000", account: "alice").errorCode == "revoked")
    }
}
