import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService

/// A classic receipt on `/v1/validate` with a ledger: its purchases are remembered, and what Apple said later wins.
struct ReceiptLedgerRouteTests {
    static func day(_ days: Double) -> ReceiptDate { ReceiptDate(SignedEvents.at(days)) }

    /// Made six days before `fixedNow`: a subscription "8000" that expired the day after, and a consumable.
    static func receipt() throws -> HTTPRequest {
        var blueprint = ReceiptBlueprint(
            bundleID: LedgerService.bundleID, applicationVersion: "1.0", creationDate: day(-6))
        blueprint.receiptType = "ProductionSandbox"
        blueprint.purchases = [
            PurchaseBlueprint(productID: "pro.monthly", transactionID: "8000", purchaseDate: day(-35), expiresDate: day(-5)),
            PurchaseBlueprint(productID: "coins.100", transactionID: "8100", purchaseDate: day(-20)),
        ]
        return post(
            "/v1/validate", contentType: "application/octet-stream", body: try blueprint.forge(with: TestPKI.atFixedNow))
    }

    static func subscription(_ response: HTTPResponse) throws -> JSONValue {
        let entries = try #require(response.json?["subscriptions"]?.arrayValue)
        #expect(entries.count == 1)
        return try #require(entries.first)
    }

    @Test(arguments: Backend.tested)
    func receiptPurchases_landInLedger_thenLaterNotificationsDecideItsSubscription(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        let first = routes.handle(try Self.receipt(), on: .main)
        #expect(first.status == 200)
        #expect(first.json?["ledger"] == .string("available"))
        let fromReceipt = try Self.subscription(first)
        #expect(fromReceipt["source"] == .string("receipt"))
        #expect(fromReceipt["as_of"] == .string(Self.day(-6).rfc3339))
        #expect(fromReceipt["active"] == .bool(false))
        #expect(fromReceipt["expires_date"] == .string(Self.day(-5).rfc3339))
        for id in ["8000", "8100"] {
            let record = routes.handle(get("/v1/transactions/\(id)"), on: .main)
            #expect(record.status == 200, "\(id)")
            #expect(record.json?["sources"] == .array([.string("receipt")]), "\(id)")
        }

        let renewed = routes.deliver(
            try SignedEvents.notification(
                "DID_RENEW", signed: -5,
                transaction: SignedEvents.transaction("8001", purchased: -5, expires: 25, signed: -5, original: "8000"),
                renewal: SignedEvents.renewal(signed: -5, original: "8000")))
        #expect(renewed.status == 200)
        let afterRenewal = try Self.subscription(routes.handle(try Self.receipt(), on: .main))
        #expect(afterRenewal["source"] == .string("ledger"))
        #expect(afterRenewal["as_of"] == .string(Self.day(-5).rfc3339))
        #expect(afterRenewal["latest_transaction_id"] == .string("8001"))
        #expect(afterRenewal["expires_date"] == .string(Self.day(25).rfc3339))
        #expect(afterRenewal["active"] == .bool(true))
        #expect(afterRenewal["cancelled"] == .bool(false))

        let refunded = routes.deliver(
            try SignedEvents.notification(
                "REFUND", signed: -1,
                transaction: SignedEvents.transaction(
                    "8001", purchased: -5, expires: 25, signed: -1, revoked: -1, original: "8000")))
        #expect(refunded.status == 200)
        let afterRefund = try Self.subscription(routes.handle(try Self.receipt(), on: .main))
        #expect(afterRefund["source"] == .string("ledger"))
        #expect(afterRefund["cancelled"] == .bool(true))
        #expect(afterRefund["active"] == .bool(false))
        #expect(afterRefund["as_of"] == .string(Self.day(-1).rfc3339))
    }

    @Test(arguments: Backend.tested)
    func olderLedgerFacts_leaveTheReceiptAsSource(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        // Signed before the receipt was made: the receipt is the newer word.
        _ = routes.deliver(
            try SignedEvents.notification(
                "SUBSCRIBED", signed: -35,
                transaction: SignedEvents.transaction("8000", purchased: -35, expires: -5, signed: -35, original: "8000")))
        let entry = try Self.subscription(routes.handle(try Self.receipt(), on: .main))
        #expect(entry["source"] == .string("receipt"))
        #expect(entry["as_of"] == .string(Self.day(-6).rfc3339))
    }
}
