import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService

/// `POST /v1/notifications`, Apple's delivery endpoint, through the router on each ledger backend.
struct NotificationRouteTests {
    @Test(arguments: ["", "not json", "[]", #""eyJ""#, "{}", #"{"signedPayload": 1}"#, #"{"signedPayload": ""}"#,
                      #"{"signedPayload": null}"#, #"{"jws": "a.b.c"}"#])
    func bodyNotAppleShape_is400(_ body: String) throws {
        let routes = try LedgerService.routes(.sqlite)
        let response = routes.handle(post("/v1/notifications", contentType: "application/json", text: body), on: .main)
        #expect(response.status == 400)
        #expect(response.errorCode == "bad_request")
    }

    @Test func withoutStore_is503StoreNotConfigured() throws {
        let response = LedgerService.routes(.none).deliver(try SignedEvents.subscribed())
        #expect(response.status == 503)
        #expect(response.errorCode == "store_not_configured")
    }

    @Test(arguments: Backend.tested)
    func firstDelivery_is200_sameUUIDAgain_isDuplicate(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        let notification = try SignedEvents.subscribed()
        let first = routes.deliver(notification)
        #expect(first.status == 200)
        #expect(first.json?["received"] == .bool(true))
        #expect(first.json?["notification_uuid"] == .string("subscribed-initial_buy--10.0"))
        #expect(first.json?["notification_type"] == .string("SUBSCRIBED"))
        #expect(first.json?["duplicate"] == .bool(false))

        let again = routes.deliver(notification)
        #expect(again.status == 200)
        #expect(again.json?["notification_uuid"] == first.json?["notification_uuid"])
        #expect(again.json?["duplicate"] == .bool(true))
        let subscription = routes.handle(get("/v1/subscriptions/\(SignedEvents.original)"), on: .main)
        #expect(subscription.json?["transactions"]?.arrayValue?.count == 1)
    }

    /// Apple's signature does not make a uuid an id: one with a NUL (which PostgreSQL refuses in text) was answered
    /// 503, and so retried by Apple forever; a dot-segment would change the path of a history lookup.
    @Test(arguments: Backend.tested, ["a\u{0}b", "a\u{1}b", "line\nbreak", "..", ".", String(repeating: "f", count: 65)])
    func verifiedNotification_whoseUUIDIsNotAnID_is400_andStoresNothing(_ backend: Backend, _ uuid: String) throws {
        let routes = try LedgerService.routes(backend)
        let response = routes.deliver(
            try SignedEvents.notification("SUBSCRIBED", signed: -10, uuid: uuid, transaction: SignedEvents.firstMonth))
        #expect(response.status == 400)
        #expect(response.errorCode == "bad_request")
        #expect(response.errorDetail == "invalid_notification_uuid")
        #expect(routes.handle(get("/v1/subscriptions/\(SignedEvents.original)"), on: .main).status == 404)
    }

    /// The nested transaction's ids key the ledger too, and backfill sends them to Apple.
    @Test(arguments: Backend.tested, ["a\u{0}b", "..", "tab\there"])
    func verifiedNotification_whoseTransactionIDsAreNotIDs_is400_andStoresNothing(
        _ backend: Backend, _ id: String
    ) throws {
        let routes = try LedgerService.routes(backend)
        for edit in [\TransactionBlueprint.transactionID, \TransactionBlueprint.originalTransactionID] {
            var transaction = SignedEvents.firstMonth
            transaction[keyPath: edit] = id
            let response = routes.deliver(
                try SignedEvents.notification("SUBSCRIBED", signed: -10, transaction: transaction))
            #expect(response.status == 400)
            #expect(response.errorDetail == "invalid_id")
        }
        #expect(routes.handle(get("/v1/subscriptions/\(SignedEvents.original)"), on: .main).status == 404)
    }

    /// A transaction or renewal info validated with a ledger is recorded and backfilled like a notification's, so its
    /// ids must be ids too: 400, nothing stored.
    @Test(arguments: Backend.tested, ["a\u{0}b", "..", "tab\there"])
    func validatedJWS_whoseIDsAreNotIDs_is400_andStoresNothing(_ backend: Backend, _ id: String) throws {
        let routes = try LedgerService.routes(backend)
        for edit in [\TransactionBlueprint.transactionID, \TransactionBlueprint.originalTransactionID] {
            var transaction = SignedEvents.firstMonth
            transaction[keyPath: edit] = id
            let response = routes.handle(JWSUpload.json.request(try JWSPKI.atFixedNow.sign(transaction.payload)), on: .main)
            #expect(response.status == 400)
            #expect(response.errorDetail == "invalid_id")
        }
        let renewal = SignedEvents.renewal(signed: -10, original: id)
        let response = routes.handle(JWSUpload.json.request(try JWSPKI.atFixedNow.sign(renewal.payload)), on: .main)
        #expect(response.errorDetail == "invalid_id")
        #expect(routes.handle(get("/v1/subscriptions/\(SignedEvents.original)"), on: .main).status == 404)
    }

    /// The envelope, or only its nested transaction, signed by a chain nobody trusts.
    enum Forgery: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case envelope, nestedTransaction = "nested-transaction"

        var testDescription: String { rawValue }

        func notification() throws -> String {
            let rogue = ValidateJWSRouteTests.rogue
            switch self {
            case .envelope:
                return try SignedEvents.notification(
                    "SUBSCRIBED", signed: -10, transaction: SignedEvents.firstMonth, by: rogue)
            case .nestedTransaction:
                var blueprint = NotificationBlueprint(
                    type: "SUBSCRIBED", bundleID: LedgerService.bundleID, signedDate: SignedEvents.at(-10))
                blueprint.signedTransactionInfo = try rogue.sign(SignedEvents.firstMonth.payload)
                return try JWSPKI.atFixedNow.sign(blueprint.payload)
            }
        }
    }

    @Test(arguments: Backend.tested, Forgery.allCases)
    func forgedNotification_is422WithVerdict_andStoresNothing(_ backend: Backend, _ forgery: Forgery) throws {
        let routes = try LedgerService.routes(backend)
        let response = routes.deliver(try forgery.notification())
        #expect(response.status == 422)
        #expect(response.json?["valid"] == .bool(false))
        if forgery == .nestedTransaction { #expect(response.json?["kind"] == .string("notification")) }
        #expect(response.errorCode == "certificate_untrusted")
        #expect(response.json?["error"]?["reason"] == .string("no_trusted_root"))
        #expect(routes.handle(get("/v1/subscriptions/\(SignedEvents.original)"), on: .main).status == 404)
        #expect(routes.handle(get("/v1/transactions/7000"), on: .main).status == 404)
    }

    @Test(arguments: Backend.tested)
    func notificationForAppNotConfigured_is422BundleIdMismatch(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        var other = SignedEvents.firstMonth
        other.bundleID = "com.example.other"
        let response = routes.deliver(
            try SignedEvents.notification("SUBSCRIBED", signed: -10, transaction: other, bundleID: "com.example.other"))
        #expect(response.status == 422)
        #expect(response.errorCode == "bundle_id_mismatch")
        #expect(response.json?["checks"]?["bundle_id"] == .string("failed"))
        #expect(routes.handle(get("/v1/subscriptions/\(SignedEvents.original)"), on: .main).status == 404)
    }

    /// Apple adds types every year; TEST carries no transaction. Both are acknowledged and change no subscription.
    @Test(arguments: Backend.tested)
    func testAndUnknownTypes_are200AndChangeNothing(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        #expect(routes.deliver(try SignedEvents.subscribed()).status == 200)
        let before = routes.handle(get("/v1/subscriptions/\(SignedEvents.original)"), on: .main).json
        for type in ["TEST", "SOMETHING_APPLE_ADDS_LATER"] {
            let response = routes.deliver(try SignedEvents.notification(type, signed: -1))
            #expect(response.status == 200, "\(type)")
            #expect(response.json?["notification_type"] == .string(type))
            #expect(response.json?["duplicate"] == .bool(false))
        }
        #expect(routes.handle(get("/v1/subscriptions/\(SignedEvents.original)"), on: .main).json == before)
    }
}
