import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService

/// `GET /v1/subscriptions/{id}` answers only for auto-renewable subscriptions, and an upgrade ends what it replaced.
struct SubscriptionKindRouteTests {
    typealias E = SignedEvents

    static func validate(_ routes: ReceiptRoutes, _ blueprint: TransactionBlueprint) throws -> HTTPResponse {
        routes.handle(JWSUpload.text.request(try JWSPKI.atFixedNow.sign(blueprint.payload)), on: .main)
    }

    @Test(arguments: Backend.tested, ["Consumable", "Non-Consumable", "Non-Renewing Subscription"])
    func oneTimePurchase_is404NotASubscription_pointingToTheTransaction(_ backend: Backend, _ type: String) throws {
        let routes = try LedgerService.routes(backend)
        var purchase = E.transaction("8000", purchased: -3, expires: 20, signed: -3, original: "8000")
        purchase.type = type
        if type != "Non-Renewing Subscription" { purchase.expiresDate = nil }
        #expect(try Self.validate(routes, purchase).json?["ledger"] == .string("available"))

        let response = routes.handle(get("/v1/subscriptions/8000"), on: .main)
        #expect(response.status == 404)
        #expect(response.errorCode == "not_a_subscription")
        #expect(response.json?["error"]?["message"]?.stringValue?.contains("/v1/transactions/8000") == true)
        #expect(routes.handle(get("/v1/transactions/8000"), on: .main).status == 200)
    }

    @Test(arguments: Backend.tested)
    func receiptEntries_areSubscriptionsWhenTheyExpire(_ backend: Backend) throws {
        let store = try makeLedger(backend)
        let routes = LedgerService.routes(PurchaseLedger(store: store))
        let lifetime = TransactionFacts(
            transactionID: "9000", originalTransactionID: "9000", productID: "lifetime", signedDate: 1,
            payloadJSON: #"{"transactionId":"9000"}"#)
        var monthly = lifetime
        monthly.transactionID = "9100"
        monthly.originalTransactionID = "9100"
        monthly.expiresDate = 2
        monthly.type = TransactionFacts.autoRenewableType
        try store.record(transactions: [lifetime, monthly], source: .receipt)
        #expect(routes.handle(get("/v1/subscriptions/9000"), on: .main).errorCode == "not_a_subscription")
        #expect(routes.handle(get("/v1/subscriptions/9100"), on: .main).status == 200)
    }

    @Test(arguments: Backend.tested)
    func upgradedTransaction_isNotActive_andSaysSo(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        var year = E.transaction("7000", purchased: -10, expires: 355, signed: -2)
        year.edits.set.append(("isUpgraded", .bool(true)))
        #expect(try Self.validate(routes, year).status == 200)

        let upgraded = try #require(routes.handle(get("/v1/subscriptions/7000"), on: .main).json)
        #expect(upgraded["status"] == .string("upgraded"))
        #expect(upgraded["transactions"]?[0]?["upgraded"] == .bool(true))
        #expect(upgraded["latest_transaction"]?["upgraded"] == .bool(true))

        var month = E.transaction("7001", purchased: -2, expires: 28, signed: -2)
        month.productID = "pro.monthly.plus"
        #expect(try Self.validate(routes, month).status == 200)
        let replaced = try #require(routes.handle(get("/v1/subscriptions/7000"), on: .main).json)
        #expect(replaced["status"] == .string("active"))
        #expect(replaced["product_id"] == .string("pro.monthly.plus"))
        #expect(replaced["latest_transaction"]?["upgraded"] == .bool(false))
        #expect(replaced["expires_date"] == LedgerRouteTests.day(28))
    }
}
