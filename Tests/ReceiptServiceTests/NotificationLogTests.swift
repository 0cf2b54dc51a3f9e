import Foundation
import HTTP1Server
import JSONText
import Ledger
import TestSupport
import Testing

@testable import ReceiptService

/// Each notification Apple delivers leaves one log event saying what became of it, and never the JWS.
struct NotificationLogTests {
    /// The JSON log's events whose `event` is `name`.
    static func events(_ lines: CapturedLines, named name: String) -> [JSONValue] {
        lines.all.compactMap { try? JSONValue(parsing: Array($0.utf8)) }.filter { $0["event"] == .string(name) }
    }

    static func routes(_ ledger: PurchaseLedger, _ lines: CapturedLines) -> ReceiptRoutes {
        LedgerService.routes(ledger, log: ServiceLog(format: .json, clock: { fixedNow }, sink: lines.sink))
    }

    static func expectNoSignedData(_ lines: CapturedLines, _ signedPayload: String) {
        for segment in signedPayload.split(separator: ".") {
            #expect(!lines.all.contains { $0.contains(segment.prefix(32)) }, "a log line carries the JWS")
        }
    }

    @Test func storedThenDuplicate_logUUIDTypeSubtypeAndDuplicate() throws {
        let lines = CapturedLines()
        let routes = Self.routes(PurchaseLedger(store: try makeLedger(.sqlite)), lines)
        let notification = try SignedEvents.subscribed()
        #expect(routes.deliver(notification).status == 200)
        #expect(routes.deliver(notification).status == 200)

        let logged = Self.events(lines, named: "notification")
        try #require(logged.count == 2)
        for (event, duplicate) in zip(logged, ["false", "true"]) {
            #expect(event["uuid"] == .string("subscribed-initial_buy--10.0"))
            #expect(event["type"] == .string("SUBSCRIBED"))
            #expect(event["subtype"] == .string("INITIAL_BUY"))
            #expect(event["duplicate"] == .string(duplicate))
        }
        Self.expectNoSignedData(lines, notification)
    }

    @Test func forged_logsRefusedWithCodeAndReason_butNothingItClaims() throws {
        let lines = CapturedLines()
        let routes = Self.routes(PurchaseLedger(store: try makeLedger(.sqlite)), lines)
        let forged = try NotificationRouteTests.Forgery.envelope.notification()
        #expect(routes.deliver(forged).status == 422)

        let refused = Self.events(lines, named: "notification refused")
        try #require(refused.count == 1)
        #expect(refused[0]["code"] == .string("certificate_untrusted"))
        #expect(refused[0]["reason"] == .string("no_trusted_root"))
        #expect(refused[0]["uuid"] == nil)
        #expect(refused[0]["type"] == nil)
        #expect(Self.events(lines, named: "notification").isEmpty)
        Self.expectNoSignedData(lines, forged)
    }

    @Test func storeDown_logsNotStoredWithTheLedgersCode() throws {
        let (ledger, _, end) = try Outage.sqliteUnwritable.begin()
        defer { end() }
        let lines = CapturedLines()
        #expect(Self.routes(ledger, lines).deliver(try SignedEvents.subscribed()).status == 503)

        let notStored = Self.events(lines, named: "notification not stored")
        try #require(notStored.count == 1)
        #expect(notStored[0]["uuid"] == .string("subscribed-initial_buy--10.0"))
        #expect(notStored[0]["code"] == .string("store_unavailable"))
        #expect(notStored[0]["ledger_error"] == .string("unavailable"))
        #expect(Self.events(lines, named: "notification").isEmpty)
    }
}
