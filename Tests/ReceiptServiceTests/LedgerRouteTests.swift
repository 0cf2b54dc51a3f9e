import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import Synchronization
import TestSupport
import Testing

@testable import ReceiptService

/// The ledger's endpoints after Apple's notifications, through the router on each backend.
struct LedgerRouteTests {
    typealias E = SignedEvents

    static func day(_ days: Double) -> JSONValue { .string(ReceiptDate(E.at(days)).rfc3339) }

    static let subscriptionKeys = [
        "original_transaction_id", "product_id", "status", "expires_date", "auto_renew_status", "auto_renew_product_id",
        "is_in_billing_retry_period", "grace_period_expires_date", "expiration_intent", "revocation_date",
        "environment", "latest_transaction", "transactions", "last_notification", "updated_at",
    ]

    /// A month bought 40 days before `fixedNow`, which ran out 10 days ago.
    static func subscribedLastMonth() throws -> String {
        try E.notification(
            "SUBSCRIBED", "INITIAL_BUY", signed: -40, transaction: E.transaction("7000", purchased: -40, expires: -10, signed: -40),
            renewal: E.renewal(signed: -40))
    }

    /// Notifications for one subscription and what `GET /v1/subscriptions/7000` must then say at `fixedNow`.
    struct Story: CustomTestStringConvertible, Sendable {
        var name: String
        var notifications: @Sendable () throws -> [String]
        var expected: [(key: String, value: JSONValue)]
        var testDescription: String { name }
    }

    static let stories: [Story] = [
        Story(
            name: "SUBSCRIBED", notifications: { [try E.subscribed()] },
            expected: [
                ("status", .string("active")), ("expires_date", day(20)), ("auto_renew_status", .bool(true)),
                ("is_in_billing_retry_period", .bool(false)),
            ]),
        Story(
            name: "DID_RENEW",
            notifications: {
                [
                    try subscribedLastMonth(),
                    try E.notification(
                        "DID_RENEW", signed: -10, transaction: E.transaction("7001", purchased: -10, expires: 20, signed: -10),
                        renewal: E.renewal(signed: -10)),
                ]
            },
            expected: [("status", .string("active")), ("expires_date", day(20))]),
        Story(
            name: "DID_FAIL_TO_RENEW",
            notifications: { [try subscribedLastMonth(), try failedToRenew(grace: nil)] },
            expected: [
                ("status", .string("in_billing_retry")), ("expires_date", day(-10)), ("is_in_billing_retry_period", .bool(true)),
                ("grace_period_expires_date", .null), ("expiration_intent", .integer(2)),
            ]),
        Story(
            name: "DID_FAIL_TO_RENEW/GRACE_PERIOD",
            notifications: { [try subscribedLastMonth(), try failedToRenew(grace: 6)] },
            expected: [
                ("status", .string("in_grace_period")), ("is_in_billing_retry_period", .bool(true)),
                ("grace_period_expires_date", day(6)),
            ]),
        Story(
            name: "EXPIRED",
            notifications: {
                [
                    try subscribedLastMonth(),
                    try E.notification(
                        "EXPIRED", "VOLUNTARY", signed: -10,
                        transaction: E.transaction("7000", purchased: -40, expires: -10, signed: -10),
                        renewal: E.renewal(signed: -10, autoRenew: false, intent: 1)),
                ]
            },
            expected: [("status", .string("expired")), ("auto_renew_status", .bool(false)), ("expiration_intent", .integer(1))]),
        Story(
            name: "REFUND",
            notifications: { [try E.subscribed(), try refund()] },
            expected: [("status", .string("revoked")), ("revocation_date", day(-5))]),
        Story(
            name: "REFUND_REVERSED",
            notifications: { [try E.subscribed(), try refund(), try refundReversed()] },
            expected: [("status", .string("active")), ("revocation_date", .null)]),
    ]

    /// The renewal of last month's subscription failed ten days ago; Apple retries billing, with a grace period or not.
    static func failedToRenew(grace: Double?) throws -> String {
        try E.notification(
            "DID_FAIL_TO_RENEW", grace == nil ? nil : "GRACE_PERIOD", signed: -10,
            transaction: E.transaction("7000", purchased: -40, expires: -10, signed: -10),
            renewal: E.renewal(signed: -10, retry: true, grace: grace, intent: 2))
    }

    static func refund() throws -> String {
        try E.notification(
            "REFUND", signed: -5, transaction: E.transaction("7000", purchased: -10, expires: 20, signed: -5, revoked: -5))
    }

    /// Apple sends the transaction again, newer and without a revocation date.
    static func refundReversed() throws -> String {
        try E.notification("REFUND_REVERSED", signed: -3, transaction: E.transaction("7000", purchased: -10, expires: 20, signed: -3))
    }

    @Test(arguments: Backend.tested, stories)
    func subscription_afterNotifications_hasEveryKeyAndTheStatus(_ backend: Backend, _ story: Story) throws {
        let routes = try LedgerService.routes(backend)
        for notification in try story.notifications() {
            #expect(routes.deliver(notification).status == 200)
        }
        let response = routes.handle(get("/v1/subscriptions/\(E.original)"), on: .main)
        #expect(response.status == 200)
        let json = try #require(response.json)
        // `extensions`: the renewal extensions asked of Apple, which only this answer lists.
        #expect(json.keys == Self.subscriptionKeys + ["extensions"])
        #expect(json["original_transaction_id"] == .string(E.original))
        #expect(json["product_id"] == .string("pro.monthly"))
        #expect(json["environment"] == .string("Sandbox"))
        for (key, value) in story.expected {
            #expect(json[key] == value, "\(key)")
        }
        #expect(json["latest_transaction"]?["expires_date"] == json["expires_date"])
    }

    /// A life of one subscription, touching refunds, a renewal and the renewal status.
    static func lifetime() throws -> [String] {
        [
            try subscribedLastMonth(),
            try E.notification(
                "REFUND", signed: -35, transaction: E.transaction("7000", purchased: -40, expires: -10, signed: -35, revoked: -35)),
            try E.notification(
                "REFUND_REVERSED", signed: -33, transaction: E.transaction("7000", purchased: -40, expires: -10, signed: -33)),
            try E.notification(
                "DID_RENEW", signed: -10, transaction: E.transaction("7001", purchased: -10, expires: 20, signed: -10),
                renewal: E.renewal(signed: -10)),
            try E.notification(
                "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", signed: -2,
                transaction: E.transaction("7001", purchased: -10, expires: 20, signed: -2),
                renewal: E.renewal(signed: -2, autoRenew: false)),
        ]
    }

    @Test(arguments: Backend.tested)
    func outOfOrderAndDuplicatedDeliveries_convergeToOneState(_ backend: Backend) throws {
        let events = try Self.lifetime()
        let orders: [[Int]] = [[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [3, 0, 3, 4, 1, 2, 0, 4, 1]]
        var states: [JSONValue] = []
        for order in orders {
            let routes = try LedgerService.routes(backend)
            var delivered: Set<Int> = []
            for index in order {
                let response = routes.deliver(events[index])
                #expect(response.status == 200)
                #expect(response.json?["duplicate"] == .bool(!delivered.insert(index).inserted))
            }
            states.append(try #require(routes.handle(get("/v1/subscriptions/\(E.original)"), on: .main).json))
        }
        #expect(states[1] == states[0])
        #expect(states[2] == states[0])
        let state = states[0]
        #expect(state["status"] == .string("active"))
        #expect(state["auto_renew_status"] == .bool(false))
        #expect(state["revocation_date"] == .null)
        #expect(state["latest_transaction"]?["transaction_id"] == .string("7001"))
        #expect(state["transactions"]?.arrayValue?.compactMap { $0["transaction_id"]?.stringValue } == ["7001", "7000"])
        #expect(state["last_notification"]?["notification_type"] == .string("DID_CHANGE_RENEWAL_STATUS"))
    }

    @Test(arguments: Backend.tested)
    func lastNotification_isTheNewestBySignedDate_notTheLastReceived(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        let renewal = try E.notification(
            "DID_RENEW", signed: -10, uuid: "renewal-uuid",
            transaction: E.transaction("7001", purchased: -10, expires: 20, signed: -10), renewal: E.renewal(signed: -10))
        #expect(routes.deliver(renewal).status == 200)
        #expect(routes.deliver(try Self.subscribedLastMonth()).status == 200)
        let last = routes.handle(get("/v1/subscriptions/\(E.original)"), on: .main).json?["last_notification"]
        #expect(last?.keys == ["notification_type", "subtype", "notification_uuid", "signed_date"])
        #expect(last?["notification_type"] == .string("DID_RENEW"))
        #expect(last?["subtype"] == .null)
        #expect(last?["notification_uuid"] == .string("renewal-uuid"))
        #expect(last?["signed_date"] == Self.day(-10))
    }

    @Test(arguments: Backend.tested)
    func unknownIDs_are404NotFound(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        #expect(routes.deliver(try E.subscribed()).status == 200)
        for path in ["/v1/subscriptions/9999", "/v1/transactions/9999", "/v1/subscriptions/7001"] {
            let response = routes.handle(get(path), on: .main)
            #expect(response.status == 404, "\(path)")
            #expect(response.errorCode == "not_found", "\(path)")
        }
    }

    @Test(arguments: Backend.tested)
    func transaction_listsItsSourcesAndClaim(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        #expect(routes.deliver(try E.subscribed()).status == 200)
        let heard = try #require(routes.handle(get("/v1/transactions/7000"), on: .main).json)
        #expect(
            heard.keys == [
                "transaction", "first_seen", "sources", "claim", "finished_at", "apple_calls", "consumption_request",
            ])
        #expect(heard["consumption_request"] == .null)
        #expect(heard["transaction"]?["transaction_id"] == .string("7000"))
        #expect(heard["transaction"]?["original_transaction_id"] == .string("7000"))
        #expect(heard["transaction"]?["expires_date"] == Self.day(20))
        #expect(heard["first_seen"] == .string(ReceiptDate(millisecondsSince1970: TestClock.fixed()).rfc3339))
        #expect(heard["sources"] == .array([.string("notification")]))
        #expect(heard["claim"] == .null)

        let validated = routes.handle(JWSUpload.text.request(try JWSPKI.atFixedNow.sign(E.firstMonth.payload)), on: .main)
        #expect(validated.json?["ledger"] == .string("available"))
        #expect(routes.claim("7000", account: "alice").status == 200)
        let known = try #require(routes.handle(get("/v1/transactions/7000"), on: .main).json)
        #expect(Set(known["sources"]?.arrayValue ?? []) == [.string("notification"), .string("jws")])
        #expect(known["claim"]?.keys == ["account", "claimed_at"])
        #expect(known["claim"]?["account"] == .string("alice"))
        #expect(known["claim"]?["claimed_at"] == .string(ReceiptDate(fixedNow).rfc3339))
    }

    @Test(arguments: Backend.tested)
    func claim_firstSameOtherAndUnknown(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        #expect(routes.deliver(try E.subscribed()).status == 200)

        let first = routes.claim("7000", account: "alice")
        #expect(first.status == 200)
        #expect(first.json?.keys == [
            "transaction_id", "account", "claimed_at", "first_claim", "product_id", "environment", "finished_at",
            "apple_calls",
        ])
        #expect(first.json?["transaction_id"] == .string("7000"))
        #expect(first.json?["account"] == .string("alice"))
        #expect(first.json?["claimed_at"] == .string(ReceiptDate(fixedNow).rfc3339))
        #expect(first.json?["first_claim"] == .bool(true))

        let again = routes.claim("7000", account: "alice")
        #expect(again.status == 200)
        #expect(again.json?["first_claim"] == .bool(false))
        #expect(again.json?["claimed_at"] == first.json?["claimed_at"])

        let other = routes.claim("7000", account: "bob")
        #expect(other.status == 409)
        #expect(other.errorCode == "already_claimed")
        #expect(other.json?["claim"]?["account"] == .string("alice"))
        #expect(other.json?["claim"]?["claimed_at"] == first.json?["claimed_at"])

        let unknown = routes.claim("9999", account: "alice")
        #expect(unknown.status == 404)
        #expect(unknown.errorCode == "not_found")
    }

    @Test(arguments: ["", "[]", "{}", #"{"account": ""}"#, #"{"account": 7}"#, #"{"account": null}"#, "account=alice"])
    func claim_bodyWithoutAccount_is400(_ body: String) throws {
        let routes = try LedgerService.routes(.sqlite)
        #expect(routes.deliver(try E.subscribed()).status == 200)
        let response = routes.handle(
            post("/v1/transactions/7000/claim", contentType: "application/json", text: body), on: .main)
        #expect(response.status == 400)
        #expect(response.errorCode == "bad_request")
        #expect(routes.handle(get("/v1/transactions/7000"), on: .main).json?["claim"] == .null)
    }

    @Test(arguments: Backend.tested)
    func concurrentClaims_exactlyOneIsFirst(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        #expect(routes.deliver(try E.subscribed()).status == 200)
        let answers = Mutex<[(account: String, status: Int, first: JSONValue?, holder: JSONValue?)]>([])
        onThreads(16) { index in
            let account = "account-\(index % 4)"
            let response = routes.claim("7000", account: account)
            answers.withLock {
                $0.append((account, response.status.code, response.json?["first_claim"], response.json?["claim"]?["account"]))
            }
        }
        let all = answers.withLock { $0 }
        #expect(all.count == 16)
        let winners = all.filter { $0.first == .bool(true) }
        #expect(winners.count == 1)
        let winner = try #require(winners.first?.account)
        for answer in all where answer.account == winner {
            #expect(answer.status == 200)
        }
        for answer in all where answer.account != winner {
            #expect(answer.status == 409)
            #expect(answer.holder == .string(winner))
        }
    }

    @Test(arguments: [
        ("GET", "/v1/notifications", "POST"), ("GET", "/v1/transactions/7000/claim", "POST"),
        ("POST", "/v1/subscriptions/7000", "GET"), ("DELETE", "/v1/transactions/7000", "GET"),
    ])
    func ledgerRoutes_otherMethod_is405WithAllow(_ method: String, _ path: String, _ allowed: String) throws {
        let routes = try LedgerService.routes(.sqlite)
        let response = routes.handle(request(HTTPMethod(rawValue: method), path), on: .main)
        #expect(response.status == 405)
        #expect(response.errorCode == "method_not_allowed")
        #expect(response.headers["Allow"] == allowed)
    }
}
