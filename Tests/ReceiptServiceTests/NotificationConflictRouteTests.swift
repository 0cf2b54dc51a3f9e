import Foundation
import HTTP1Server
import JSONText
import Ledger
import TestSupport
import Testing

@testable import ReceiptService

/// A uuid Apple delivered before, now with other content: answered like a retry, but logged and counted.
struct NotificationConflictRouteTests {
    typealias E = SignedEvents

    @Test(arguments: Backend.tested)
    func sameUUIDOtherPayload_is200Duplicate_loggedAsConflict_andCounted(_ backend: Backend) throws {
        let lines = CapturedLines()
        let routes = NotificationLogTests.routes(PurchaseLedger(store: try makeLedger(backend)), lines)
        let original = try E.subscribed()
        let other = try E.notification(
            "DID_RENEW", signed: -9, uuid: "subscribed-initial_buy--10.0",
            transaction: E.transaction("7000", purchased: -10, expires: 50, signed: -9))
        #expect(routes.deliver(original).status == 200)
        #expect(routes.deliver(original).status == 200)
        let conflict = routes.deliver(other)
        #expect(conflict.status == 200)
        #expect(conflict.json?["duplicate"] == .bool(true))

        let logged = NotificationLogTests.events(lines, named: "notification")
        try #require(logged.count == 3)
        #expect(logged.map { $0["duplicate"] } == [.string("false"), .string("true"), .string("true")])
        #expect(logged.map { $0["conflict"] } == [.string("false"), .string("false"), .string("true")])
        NotificationLogTests.expectNoSignedData(lines, other)

        let metrics = routes.handle(get("/metrics"), on: .main).text.split(separator: "\n")
        #expect(metrics.contains("receiptd_notification_conflicts_total 1"))
        // The first delivery stays the record.
        #expect(routes.handle(get("/v1/subscriptions/7000"), on: .main).json?["expires_date"] == LedgerRouteTests.day(20))
    }

    @Test func noConflictYet_isCountedAsZero() throws {
        let routes = try LedgerService.routes(.sqlite)
        #expect(routes.handle(get("/metrics"), on: .main).text.split(separator: "\n").contains("receiptd_notification_conflicts_total 0"))
    }
}
