import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService

/// `PUT /v1/transactions/{id}/consumption`: every rule Apple applies to a ConsumptionRequest is refused at once,
/// naming the member; a good answer is stored and shown with the request it answers.
struct ConsumptionRouteTests {
    typealias E = SignedEvents

    static let consumableID = "9100"
    static let good: [(String, String)] = [
        ("customer_consented", "true"), ("delivery_status", #""DELIVERED""#), ("sample_content_provided", "false"),
    ]

    static func body(_ members: [(String, String)]) -> String {
        "{" + members.map { #""\#($0.0)":\#($0.1)"# }.joined(separator: ",") + "}"
    }

    static func consumable() -> TransactionBlueprint {
        var blueprint = E.transaction(consumableID, purchased: -1, expires: 0, signed: -1, original: consumableID)
        blueprint.type = "Consumable"
        blueprint.expiresDate = nil
        return blueprint
    }

    static func consumptionRequest() throws -> String {
        try E.notification("CONSUMPTION_REQUEST", signed: -0.1, transaction: consumable())
    }

    static func put(_ routes: ReceiptRoutes, _ id: String, _ text: String) -> HTTPResponse {
        routes.handle(
            HTTPRequest(
                method: .put, target: "/v1/transactions/\(id)/consumption",
                headers: HTTPHeaders([("Content-Type", "application/json")]), body: Array(text.utf8),
                peer: .loopbackClient, listener: .loopback),
            on: .main)
    }

    static func routes(deliveryStatusFromClaims: Bool = false) throws -> ReceiptRoutes {
        var configuration = LedgerService.configuration
        configuration.apps[0].consumptionDeliveryStatusFromClaims = deliveryStatusFromClaims
        let validator = configuration.makeValidator()
        let routes = ReceiptRoutes(
            configuration: configuration, validator: validator, ledger: PurchaseLedger(store: try makeLedger(.sqlite)),
            metrics: ServiceMetrics(), clock: { fixedNow })
        #expect(routes.deliver(try consumptionRequest()).status == 200)
        return routes
    }

    /// Each broken body, and the member the refusal must name.
    static let refusals: [(members: [(String, String)], field: String)] = [
        ([("delivery_status", #""DELIVERED""#), ("sample_content_provided", "false")], "customer_consented"),
        ([("customer_consented", "false"), ("delivery_status", #""DELIVERED""#), ("sample_content_provided", "false")],
         "customer_consented"),
        ([("customer_consented", "\"yes\""), ("delivery_status", #""DELIVERED""#), ("sample_content_provided", "true")],
         "customer_consented"),
        ([("customer_consented", "true"), ("sample_content_provided", "false")], "delivery_status"),
        (good.filter { $0.0 != "delivery_status" } + [("delivery_status", #""LOST""#)], "delivery_status"),
        (good.filter { $0.0 != "sample_content_provided" }, "sample_content_provided"),
        (good.filter { $0.0 != "sample_content_provided" } + [("sample_content_provided", "0")],
         "sample_content_provided"),
        (good + [("refund_preference", #""MAYBE""#)], "refund_preference"),
        (good + [("consumption_percentage", "-1")], "consumption_percentage"),
        (good + [("consumption_percentage", "100001")], "consumption_percentage"),
        (good + [("consumption_percentage", "50.5")], "consumption_percentage"),
        (good + [("consumption_percentage", #""50""#)], "consumption_percentage"),
        (good + [("refund_preference", #""GRANT_PRORATED""#)], "consumption_percentage"),
        (good + [("refund_preference", #""GRANT_PRORATED""#), ("consumption_percentage", "0")],
         "consumption_percentage"),
        (good + [("customerConsented", "true")], "customerConsented"),
    ]

    @Test(arguments: refusals.indices)
    func aBodyAppleWouldRefuse_is400NamingTheMember(_ index: Int) throws {
        let routes = try Self.routes()
        let (members, field) = Self.refusals[index]
        let response = Self.put(routes, Self.consumableID, Self.body(members))
        #expect(response.status == 400, "\(Self.body(members))")
        #expect(response.errorCode == "bad_request")
        #expect(response.errorDetail == "invalid_field")
        #expect(response.json?["error"]?["field"] == .string(field), "\(Self.body(members))")
    }

    @Test func aPercentage_isRefusedForASubscription() throws {
        let routes = try Self.routes()
        #expect(routes.deliver(try E.subscribed()).status == 200)
        let response = Self.put(routes, E.original, Self.body(Self.good + [("consumption_percentage", "10")]))
        #expect(response.status == 400)
        #expect(response.json?["error"]?["field"] == .string("consumption_percentage"))
        #expect(Self.put(routes, E.original, Self.body(Self.good)).status == 200)
    }

    @Test func anUnknownTransaction_is404() throws {
        let response = Self.put(try Self.routes(), "424242", Self.body(Self.good))
        #expect(response.status == 404)
        #expect(response.errorCode == "not_found")
    }

    @Test func notJSON_is400() throws {
        let response = Self.put(try Self.routes(), Self.consumableID, "customer_consented=true")
        #expect(response.status == 400)
        #expect(response.errorDetail == "body_not_json")
    }

    @Test func aGoodAnswer_isStoredAndShownWithTheOpenRequest() throws {
        let routes = try Self.routes()
        let members = Self.good + [("refund_preference", #""GRANT_PRORATED""#), ("consumption_percentage", "25000")]
        let response = Self.put(routes, Self.consumableID, Self.body(members))
        #expect(response.status == 200)
        let answer = try #require(response.json?["answer"])
        #expect(answer["consumption_percentage"] == .integer(25000))
        #expect(answer["refund_preference"] == .string("GRANT_PRORATED"))
        #expect(response.json?["consumption_request"]?["state"] == .string("open"))

        let record = try #require(routes.handle(get("/v1/transactions/\(Self.consumableID)"), on: .main).json)
        let request = try #require(record["consumption_request"])
        #expect(request["state"] == .string("open"))
        #expect(request["answer"] == answer)
        #expect(request["attempts"] == .integer(0))
        #expect(request["sent_at"] == .null)

        // A new answer replaces the old.
        _ = Self.put(routes, Self.consumableID, Self.body(Self.good))
        let replaced = routes.handle(get("/v1/transactions/\(Self.consumableID)"), on: .main).json
        #expect(replaced?["consumption_request"]?["answer"]?["refund_preference"] == nil)
    }

    @Test func withoutARequest_theTransactionShowsNone() throws {
        let routes = try Self.routes()
        #expect(routes.deliver(try E.subscribed()).status == 200)
        #expect(routes.handle(get("/v1/transactions/\(E.original)"), on: .main).json?["consumption_request"] == .null)
    }

    @Test func deliveryStatus_mayBeLeftOut_onlyWhenTheAppFillsItFromClaims() throws {
        let members = Self.good.filter { $0.0 != "delivery_status" }
        #expect(Self.put(try Self.routes(), Self.consumableID, Self.body(members)).status == 400)
        let filling = try Self.routes(deliveryStatusFromClaims: true)
        let response = Self.put(filling, Self.consumableID, Self.body(members))
        #expect(response.status == 200)
        #expect(response.json?["answer"]?["delivery_status"] == nil)
    }

    @Test func theSupportPage_showsTheRequestAndWhetherTheBackendAnswered() throws {
        let routes = try Self.routes()
        let unanswered = routes.handle(get("/lookup?id=\(Self.consumableID)"), on: .main)
        #expect(unanswered.status == 200)
        #expect(unanswered.text.contains("<h3>Refund requests</h3>"))
        #expect(unanswered.text.contains("data-state=\"open\""))
        #expect(unanswered.text.contains("no answer from the backend yet"))
        _ = Self.put(routes, Self.consumableID, Self.body(Self.good))
        let answered = routes.handle(get("/lookup?id=\(Self.consumableID)"), on: .main)
        #expect(answered.text.contains("answered, sending"))
    }
}
