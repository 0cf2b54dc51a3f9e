import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService

/// The support page's lookup box, `GET /lookup?id=`: which ids resolve to what, the errors as pages, who may ask,
/// and what the drawn timeline marks.
struct SupportLookupTests {
    typealias E = SignedEvents

    /// Bought 40 days before `fixedNow` for a month, renewed 10 days ago until 20 days from now.
    static func renewedStory() throws -> [String] {
        [
            try E.notification(
                "SUBSCRIBED", "INITIAL_BUY", signed: -40,
                transaction: E.transaction("7000", purchased: -40, expires: -10, signed: -40), renewal: E.renewal(signed: -40)),
            try E.notification(
                "DID_RENEW", signed: -10, transaction: E.transaction("7001", purchased: -10, expires: 20, signed: -10),
                renewal: E.renewal(signed: -10)),
        ]
    }

    static func routes(_ backend: Backend, delivering notifications: [String]) throws -> ReceiptRoutes {
        let routes = try LedgerService.routes(backend)
        for notification in notifications {
            try #require(routes.deliver(notification).status == 200)
        }
        return routes
    }

    static func lookup(_ id: String, _ routes: ReceiptRoutes) -> HTTPResponse {
        routes.handle(get("/lookup?id=\(id)"), on: .main)
    }

    /// The value of `attribute` on the element `#lookup-verdict`.
    static func verdict(_ response: HTTPResponse, _ attribute: String) -> String? {
        let text = response.text
        guard let start = text.range(of: "<p id=\"lookup-verdict\"") else { return nil }
        let tag = text[start.lowerBound...].prefix { $0 != ">" }
        guard let value = tag.range(of: "\(attribute)=\"") else { return nil }
        return String(tag[value.upperBound...].prefix { $0 != "\"" })
    }

    static func count(_ needle: String, in text: String) -> Int {
        text.components(separatedBy: needle).count - 1
    }

    /// The drawing alone, so that the events table's rows are not counted as marks.
    static func svg(_ response: HTTPResponse) -> String { svg(inPage: response.text) }

    static func svg(inPage text: String) -> String {
        guard let start = text.range(of: "<svg class=\"timeline\""), let end = text.range(of: "</svg>", range: start.upperBound..<text.endIndex)
        else { return "" }
        return String(text[start.lowerBound..<end.upperBound])
    }

    // MARK: - Ids

    @Test(arguments: Backend.tested)
    func transactionID_showsItsWholeSubscription(_ backend: Backend) throws {
        let routes = try Self.routes(backend, delivering: try Self.renewedStory())
        let response = Self.lookup("7001", routes)
        #expect(response.status == 200)
        #expect(response.headers["Content-Type"] == "text/html; charset=utf-8")
        #expect(Self.verdict(response, "data-state") == "found")
        #expect(Self.verdict(response, "data-matched") == "transaction")
        #expect(response.text.contains("data-original-transaction-id=\"7000\""))
        #expect(response.text.contains("<p class=\"status\" data-status=\"active\">"))
    }

    @Test(arguments: Backend.tested)
    func originalTransactionID_showsTheSubscription(_ backend: Backend) throws {
        let routes = try Self.routes(backend, delivering: try Self.renewedStory())
        let response = Self.lookup("7000", routes)
        #expect(response.status == 200)
        #expect(Self.verdict(response, "data-matched") == "original_transaction")
        #expect(response.text.contains("data-original-transaction-id=\"7000\""))
    }

    @Test func originalTransactionID_knownOnlyThroughRenewalInfo_isFound() throws {
        let store = try makeLedger(.sqlite)
        try store.record(
            renewal: RenewalFacts(
                originalTransactionID: "7100", productID: "pro.monthly", autoRenewStatus: true, signedDate: 1,
                payloadJSON: "{}"),
            source: .jws)
        let response = Self.lookup("7100", LedgerService.routes(PurchaseLedger(store: store)))
        #expect(response.status == 200)
        #expect(Self.verdict(response, "data-matched") == "original_transaction")
        #expect(response.text.contains("<p class=\"status\" data-status=\"expired\">"))
    }

    @Test func spacesAroundAPastedID_areIgnored() throws {
        let routes = try Self.routes(.sqlite, delivering: try Self.renewedStory())
        let response = Self.lookup("+7001%20%0A", routes)
        #expect(response.status == 200)
        #expect(Self.verdict(response, "data-matched") == "transaction")
    }

    @Test func orderID_withoutServerAPI_saysWhatItNeeds() throws {
        let routes = try Self.routes(.sqlite, delivering: try Self.renewedStory())
        let response = Self.lookup("MK5TTTVWJH", routes)
        #expect(response.status == 503)
        #expect(response.headers["Content-Type"] == "text/html; charset=utf-8")
        #expect(Self.verdict(response, "data-code") == "server_api_not_configured")
        #expect(response.text.contains("server_api"))
    }

    // MARK: - Through Apple (the fake App Store Server API)

    /// The scene's routes with their ledger open, as `serve` opens it before it listens.
    static func openRoutes(_ scene: StoreSyncTests.Scene) throws -> ReceiptRoutes {
        let routes = try StoreSyncTests.routes(scene)
        _ = try routes.ledger.openNow()
        return routes
    }

    @Test func orderID_isLookedUpAtApple_andShownFromTheLedger() throws {
        let orders: JSONValue = .object([("MQR7Z2JTKS", .array([.string(try OrderLookupRouteTests.transaction("8001"))]))])
        let scene = try OrderLookupRouteTests.scene(orders: orders)
        defer { withExtendedLifetime(scene) {} }
        let routes = try Self.openRoutes(scene)
        let response = routes.handle(get("/lookup?id=MQR7Z2JTKS"), on: .main)
        #expect(response.status == 200)
        #expect(Self.verdict(response, "data-matched") == "order")
        #expect(response.text.contains("data-original-transaction-id=\"8001\""))
        #expect(Self.svg(response).contains("data-transaction-id=\"8001\""))
        // Now in the ledger: the same id by its transaction id needs no Apple.
        #expect(Self.verdict(routes.handle(get("/lookup?id=8001"), on: .main), "data-matched") == "original_transaction")
    }

    @Test func transactionID_unknownToTheLedger_isAskedOfApple() throws {
        let scene = try OrderLookupRouteTests.scene(orders: .object([]))
        defer { withExtendedLifetime(scene) {} }
        try scene.fake.update([
            ("transactions", .object([("8101", .array([.string(try OrderLookupRouteTests.transaction("8101"))]))]))
        ])
        let routes = try Self.openRoutes(scene)
        let response = routes.handle(get("/lookup?id=8101"), on: .main)
        #expect(response.status == 200)
        #expect(Self.verdict(response, "data-matched") == "original_transaction")
        let unknown = routes.handle(get("/lookup?id=8199"), on: .main)
        #expect(unknown.status == 404)
        #expect(Self.verdict(unknown, "data-code") == "not_found")
    }

    @Test func unknownOrder_isOrderNotFoundPage() throws {
        let scene = try OrderLookupRouteTests.scene(orders: .object([]))
        defer { withExtendedLifetime(scene) {} }
        let response = try Self.openRoutes(scene).handle(get("/lookup?id=NOSUCHORDER"), on: .main)
        #expect(response.status == 404)
        #expect(Self.verdict(response, "data-code") == "order_not_found")
    }

    @Test func appleDown_isServerAPIUnavailablePage() throws {
        let scene = try OrderLookupRouteTests.scene(orders: .object([]))
        defer { withExtendedLifetime(scene) {} }
        let fault: JSONValue = .object([("status", .integer(401))])
        try scene.fake.update([("faults", .object([("/inApps/v1/lookup/A1", .array([fault, fault]))]))])
        let response = try Self.openRoutes(scene).handle(get("/lookup?id=A1"), on: .main)
        #expect(response.status == 503)
        #expect(Self.verdict(response, "data-code") == "server_api_unavailable")
    }

    @Test(arguments: Backend.tested)
    func unknownTransactionID_isNotFoundPage(_ backend: Backend) throws {
        let routes = try Self.routes(backend, delivering: try Self.renewedStory())
        let response = Self.lookup("9999", routes)
        #expect(response.status == 404)
        #expect(response.headers["Content-Type"] == "text/html; charset=utf-8")
        #expect(Self.verdict(response, "data-state") == "error")
        #expect(Self.verdict(response, "data-code") == "not_found")
        // The box is there again, holding the id, so the next try is one edit away.
        #expect(response.text.contains("name=\"id\" type=\"text\" value=\"9999\""))
    }

    @Test(arguments: [
        "", "a%2Fb", "7000%3B", String(repeating: "1", count: 65), "%3Cscript%3E", "caf%C3%A9", "a%00b",
    ])
    func badID_isBadRequestPage(_ query: String) throws {
        let routes = try Self.routes(.sqlite, delivering: [])
        let response = Self.lookup(query, routes)
        #expect(response.status == 400)
        #expect(Self.verdict(response, "data-code") == "bad_request")
        #expect(!response.text.contains("<script>"))
    }

    @Test func missingID_isBadRequestPage() throws {
        let response = LedgerService.routes(PurchaseLedger(store: try makeLedger(.sqlite))).handle(get("/lookup"), on: .main)
        #expect(response.status == 400)
        #expect(Self.verdict(response, "data-code") == "bad_request")
    }

    @Test func withoutStore_isServiceUnavailablePage() {
        let response = Self.lookup("7000", LedgerService.routes(.none))
        #expect(response.status == 503)
        #expect(Self.verdict(response, "data-code") == "store_not_configured")
    }

    @Test func otherMethods_areNotAllowed() throws {
        let routes = try Self.routes(.sqlite, delivering: [])
        let response = routes.handle(post("/lookup?id=7000", contentType: "text/plain", text: ""), on: .main)
        #expect(response.status == 405)
        #expect(response.headers["Allow"] == "GET")
        // HEAD is answered as GET: the ledger has no 7000.
        #expect(routes.handle(request(.head, "/lookup?id=7000"), on: .main).status == 404)
    }

    // MARK: - Who may look

    @Test func lookup_needsTheSupportScope() throws {
        var configuration = LedgerService.configuration
        let support = "support-token-0123456789abcdefghijklmnopqrstuv"
        let reader = "reader-token-0123456789abcdefghijklmnopqrstuvw"
        configuration.apiTokens = [
            APIToken(name: "support", token: support, scopes: [.support]),
            APIToken(name: "reader", token: reader, scopes: [.ledgerRead, .validate]),
        ]
        let routes = ReceiptRoutes(
            configuration: configuration, validator: configuration.makeValidator(),
            ledger: PurchaseLedger(store: try makeLedger(.sqlite)), metrics: ServiceMetrics(), clock: { fixedNow })
        func lookup(_ authorization: String?) -> HTTPResponse {
            routes.handle(get("/lookup?id=7000", headers: authorization.map { [(HTTPHeaderName("Authorization"), $0)] } ?? []), on: .main)
        }
        #expect(lookup(nil).status == 401)
        #expect(lookup(nil).errorCode == "unauthorized")
        #expect(lookup("Bearer \(reader)").status == 403)
        #expect(lookup("Bearer \(reader)").errorCode == "forbidden")
        #expect(lookup("Bearer \(support)").status == 404)
        #expect(lookup("Bearer \(support)").authenticatedUser == "support")
    }

    // MARK: - The drawing

    @Test(arguments: Backend.tested)
    func timeline_hasABarPerTransaction_andNowAndExpiry(_ backend: Backend) throws {
        let routes = try Self.routes(backend, delivering: try Self.renewedStory())
        let svg = Self.svg(Self.lookup("7000", routes))
        #expect(Self.count("<rect class=\"bar", in: svg) == 2)
        #expect(svg.contains("data-transaction-id=\"7000\""))
        #expect(svg.contains("data-transaction-id=\"7001\""))
        #expect(Self.count("<g class=\"expiry\"", in: svg) == 1)
        #expect(Self.count("<g class=\"now\"", in: svg) == 1)
        #expect(Self.count("class=\"refund\"", in: svg) == 0)
        #expect(svg.contains("role=\"img\""))
        #expect(!svg.contains("<script"))
        #expect(!svg.contains("href"))
    }

    @Test(arguments: Backend.tested)
    func timeline_marksARefund(_ backend: Backend) throws {
        let refund = try E.notification(
            "REFUND", signed: -5, transaction: E.transaction("7001", purchased: -10, expires: 20, signed: -5, revoked: -5))
        let routes = try Self.routes(backend, delivering: try Self.renewedStory() + [refund])
        let response = Self.lookup("7001", routes)
        let svg = Self.svg(response)
        #expect(Self.count("<rect class=\"bar", in: svg) == 2)
        #expect(svg.contains("<g class=\"refund\" data-transaction-id=\"7001\">"))
        #expect(svg.contains("class=\"revoked-part\""))
        #expect(response.text.contains("<tr data-event=\"refund\""))
        #expect(response.text.contains("data-status=\"revoked\""))
    }

    @Test(arguments: Backend.tested)
    func timeline_shadesGracePeriodAndBillingRetry(_ backend: Backend) throws {
        let failed = { (grace: Double) in
            try E.notification(
                "DID_FAIL_TO_RENEW", "GRACE_PERIOD", signed: -10,
                transaction: E.transaction("7000", purchased: -40, expires: -10, signed: -10),
                renewal: E.renewal(signed: -10, retry: true, grace: grace, intent: 2))
        }
        let subscribed = try Self.renewedStory()[0]
        // Still in the grace period: shaded until it ends, and no retry yet.
        let inGrace = Self.lookup("7000", try Self.routes(backend, delivering: [subscribed, try failed(6)]))
        #expect(inGrace.text.contains("data-status=\"in_grace_period\""))
        #expect(Self.count("<rect class=\"grace\"", in: Self.svg(inGrace)) == 1)
        #expect(Self.count("<rect class=\"billing-retry\"", in: Self.svg(inGrace)) == 0)
        #expect(inGrace.text.contains("<tr data-event=\"grace_period\""))
        // The grace period ended four days ago: Apple has retried since.
        let retrying = Self.lookup("7000", try Self.routes(backend, delivering: [subscribed, try failed(-4)]))
        #expect(retrying.text.contains("data-status=\"in_billing_retry\""))
        #expect(Self.count("<rect class=\"grace\"", in: Self.svg(retrying)) == 1)
        #expect(Self.count("<rect class=\"billing-retry\"", in: Self.svg(retrying)) == 1)
        #expect(retrying.text.contains("<tr data-event=\"billing_retry\""))
    }

    /// Two failed renewals, both recovered: a grace period that ran out into billing retry, then billing retry alone.
    static func recoveredStory() throws -> [String] {
        [
            try E.notification(
                "SUBSCRIBED", "INITIAL_BUY", signed: -100,
                transaction: E.transaction("7000", purchased: -100, expires: -70, signed: -100), renewal: E.renewal(signed: -100)),
            try E.notification(
                "DID_FAIL_TO_RENEW", "GRACE_PERIOD", signed: -70,
                transaction: E.transaction("7000", purchased: -100, expires: -70, signed: -70),
                renewal: E.renewal(signed: -70, retry: true, grace: -64, intent: 2)),
            try E.notification(
                "GRACE_PERIOD_EXPIRED", signed: -64,
                transaction: E.transaction("7000", purchased: -100, expires: -70, signed: -64),
                renewal: E.renewal(signed: -64, retry: true, grace: -64, intent: 2)),
            try E.notification(
                "DID_RENEW", "BILLING_RECOVERY", signed: -60,
                transaction: E.transaction("7001", purchased: -60, expires: -30, signed: -60), renewal: E.renewal(signed: -60)),
            try E.notification(
                "DID_FAIL_TO_RENEW", signed: -30, transaction: E.transaction("7001", purchased: -60, expires: -30, signed: -30),
                renewal: E.renewal(signed: -30, retry: true, intent: 2)),
            try E.notification(
                "DID_RENEW", "BILLING_RECOVERY", signed: -25,
                transaction: E.transaction("7002", purchased: -25, expires: 5, signed: -25), renewal: E.renewal(signed: -25)),
        ]
    }

    /// The `data-event` values of the events table, in the order the rows are, with their `data-date`s.
    static func eventRows(_ response: HTTPResponse) -> [(kind: String, date: Int64)] {
        response.text.components(separatedBy: "<tr data-event=\"").dropFirst().compactMap { row in
            let kind = String(row.prefix { $0 != "\"" })
            guard let date = row.range(of: "data-date=\"") else { return nil }
            return (kind, Int64(row[date.upperBound...].prefix { $0 != "\"" }) ?? .min)
        }
    }

    @Test(arguments: Backend.tested)
    func timeline_drawsPastGraceAndBillingRetryPeriods(_ backend: Backend) throws {
        let response = Self.lookup("7002", try Self.routes(backend, delivering: try Self.recoveredStory()))
        #expect(response.text.contains("data-status=\"active\""))
        let svg = Self.svg(response)
        #expect(Self.count("<rect class=\"grace\" data-period=\"past\"", in: svg) == 1)
        #expect(Self.count("<rect class=\"billing-retry\" data-period=\"past\"", in: svg) == 2)
        #expect(Self.count("data-period=\"current\"", in: svg) == 0)
        let rows = Self.eventRows(response)
        let day: Int64 = 86_400_000
        let now = Int64(fixedNow.timeIntervalSince1970 * 1000)
        // Grace from the missed renewal until it ran out; retry from then until the recovery; retry again.
        #expect(rows.filter { $0.kind == "grace_period" }.map(\.date) == [now - 70 * day])
        #expect(rows.filter { $0.kind == "billing_retry" }.map(\.date) == [now - 64 * day, now - 30 * day])
        #expect(response.text.contains("until \(LookupPage.dateText(now - 60 * day))"))
        #expect(response.text.contains("until \(LookupPage.dateText(now - 25 * day))"))
    }

    @Test(arguments: Backend.tested)
    func everyStoredNotification_isListed(_ backend: Backend) throws {
        let response = Self.lookup("7000", try Self.routes(backend, delivering: try Self.recoveredStory()))
        let rows = Self.eventRows(response)
        #expect(rows.filter { $0.kind == "notification" }.count == 6)
        for type in ["SUBSCRIBED / INITIAL_BUY", "DID_FAIL_TO_RENEW / GRACE_PERIOD", "GRACE_PERIOD_EXPIRED",
            "DID_RENEW / BILLING_RECOVERY", "DID_FAIL_TO_RENEW</td>"]
        {
            #expect(response.text.contains(type), "\(type)")
        }
    }

    @Test(arguments: Backend.tested)
    func eventsTable_isInDateOrder_nowAmongThem(_ backend: Backend) throws {
        let refund = try E.notification(
            "REFUND", signed: -5, transaction: E.transaction("7001", purchased: -10, expires: 20, signed: -5, revoked: -5))
        for story in [try Self.renewedStory(), try Self.renewedStory() + [refund], try Self.recoveredStory()] {
            let rows = Self.eventRows(Self.lookup("7000", try Self.routes(backend, delivering: story)))
            #expect(rows.count > 4)
            #expect(zip(rows, rows.dropFirst()).allSatisfy { $0.date <= $1.date }, "\(rows)")
            #expect(rows.filter { $0.kind == "now" }.count == 1)
        }
        // Renewed until 20 days from now: the expiry comes after now.
        let rows = Self.eventRows(Self.lookup("7000", try Self.routes(backend, delivering: try Self.renewedStory())))
        let kinds = rows.map(\.kind)
        #expect(try #require(kinds.firstIndex(of: "now")) < #require(kinds.firstIndex(of: "expiry")))
    }

    /// Where the label of each `<g class="KIND">` marker of the drawing sits: its baseline and which side of its line.
    static func markerLabels(_ svg: String) -> [(kind: String, y: String, anchor: String)] {
        svg.components(separatedBy: "<g class=\"").dropFirst().compactMap { group in
            func value(_ name: String, after start: String.Index) -> String? {
                group[start...].range(of: "\(name)=\"").map { String(group[$0.upperBound...].prefix { $0 != "\"" }) }
            }
            guard let text = group.range(of: "<text "), let y = value("y", after: text.upperBound),
                let anchor = value("text-anchor", after: text.upperBound)
            else { return nil }
            return (String(group.prefix { $0 != "\"" }), y, anchor)
        }
    }

    @Test func crowdedMarkers_neverShareARowOnTheSameSide() throws {
        // Refunded an hour ago, the period ending in an hour: expiry, now and refund within a pixel of each other.
        let story = [
            try Self.renewedStory()[0],
            try E.notification(
                "DID_RENEW", signed: -10, transaction: E.transaction("7001", purchased: -10, expires: 0.04, signed: -10),
                renewal: E.renewal(signed: -10)),
            try E.notification(
                "REFUND", signed: -0.04,
                transaction: E.transaction("7001", purchased: -10, expires: 0.04, signed: -0.04, revoked: -0.04)),
        ]
        let labels = Self.markerLabels(Self.svg(Self.lookup("7000", try Self.routes(.sqlite, delivering: story))))
        #expect(labels.map(\.kind).sorted() == ["expiry", "now", "refund"])
        // At one x, labels in the same row on the same side would be drawn over each other.
        #expect(Set(labels.map { "\($0.y) \($0.anchor)" }).count == 3, "\(labels)")
        // Three labels, two sides: at least one went to a second row.
        #expect(Set(labels.map(\.y)).count >= 2, "\(labels)")
    }

    @Test func markerLabels_neverOverlap_andStayInTheDrawing() {
        typealias T = SubscriptionTimeline
        let crowds: [[T.LabelRequest]] = [
            // Expiry and now on the same day, with refunds around them.
            [
                .init(kind: "expiry", x: 500, text: "expired 2026-01-01", prefersLeft: true),
                .init(kind: "now", x: 501, text: "now 2026-01-01", prefersLeft: false),
                .init(kind: "refund", x: 498, text: "refund", prefersLeft: false),
                .init(kind: "refund", x: 505, text: "refund", prefersLeft: false),
                .init(kind: "refund", x: 530, text: "refund", prefersLeft: false),
            ],
            // At both edges.
            [
                .init(kind: "expiry", x: 945, text: "expires 2099-01-01", prefersLeft: false),
                .init(kind: "now", x: 940, text: "now 2026-01-01", prefersLeft: false),
                .init(kind: "refund", x: 111, text: "refund", prefersLeft: true),
                .init(kind: "refund", x: 112, text: "refund", prefersLeft: true),
            ],
            (0..<12).map { .init(kind: "refund", x: 400 + Double($0) * 9, text: "refund", prefersLeft: false) },
        ]
        for requests in crowds {
            let labels = T.layOut(requests)
            #expect(labels.count == requests.count)
            for label in labels {
                #expect(label.extent.lowerBound >= 0 && label.extent.upperBound <= T.width, "\(label)")
                // Beside its own marker, on the side the anchor says.
                #expect(label.leftwards ? label.extent.upperBound <= label.x : label.extent.lowerBound >= label.x)
            }
            for (index, label) in labels.enumerated() {
                for other in labels[(index + 1)...] where other.row == label.row {
                    #expect(!label.extent.overlaps(other.extent), "\(label) and \(other)")
                }
            }
        }
    }

    // MARK: - Escaping

    @Test func everyValue_isEscaped() throws {
        var hostile = E.transaction("7000", purchased: -10, expires: 20, signed: -10)
        hostile.productID = "<img src=x onerror=alert(1)>\"'&"
        let routes = try Self.routes(
            .sqlite,
            delivering: [try E.notification("SUBSCRIBED", "INITIAL_BUY", signed: -10, transaction: hostile, renewal: E.renewal(signed: -10))])
        #expect(routes.claim("7000", account: "<script>alert(2)</script>").status == 200)
        let text = Self.lookup("7000", routes).text
        #expect(!text.contains("<img"))
        // The page's own script (the "Extend" button) aside, nothing hostile runs.
        #expect(!text.contains("<script>alert"))
        #expect(text.contains("&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;"))
        #expect(text.contains("&lt;script&gt;alert(2)&lt;/script&gt;"))
    }

    // MARK: - Layout without a server

    @Test func ticks_areCalendarAligned_andFew() {
        let day: Int64 = 86_400_000
        let start = CivilDate(year: 2025, month: 11, day: 17).daysSince1970 * day
        for days: Int64 in [1, 9, 40, 200, 700, 4_000, 3_000_000] {
            let ticks = SubscriptionTimeline.ticks(from: start, to: start + days * day)
            #expect(!ticks.isEmpty || days < 2, "\(days) days")
            #expect(ticks.count <= 10, "\(days) days: \(ticks.count) ticks")
            #expect(ticks.allSatisfy { $0.date % day == 0 && $0.date >= start })
        }
        let months = SubscriptionTimeline.ticks(from: start, to: start + 200 * day)
        #expect(months.first?.label == "Dec 2025")
    }

    @Test func oneTimePurchase_isNamedSo_andDrawnWhereItWasBought() {
        let bought = TransactionFacts(
            transactionID: "8000", originalTransactionID: "8000", productID: "coins.100", type: "Consumable",
            purchaseDate: 1_700_000_000_000, signedDate: 1_700_000_000_000, payloadJSON: "{}")
        let facts = SubscriptionFacts(
            originalTransactionID: "8000", transactions: [bought], renewal: nil, lastNotification: nil,
            updatedAt: 1_700_000_000_000)
        let page = LookupPage.page(
            id: "8000", found: LookupPage.Found(matchedAs: .transaction, subscriptions: [.init(facts: facts, claims: [:])]),
            now: 1_710_000_000_000)
        #expect(page.contains("<p class=\"status\" data-status=\"one_time_purchase\">"))
        #expect(page.contains("<rect class=\"bar one-time\" data-transaction-id=\"8000\""))
        #expect(!page.contains("<g class=\"expiry\""))
    }

    @Test func civilDates_roundTrip() {
        for days: Int64 in [-719_468, -1, 0, 59, 60, 11_016, 20_000, 2_932_896] {
            let civil = CivilDate(days: days)
            #expect(civil.daysSince1970 == days)
        }
        #expect(CivilDate(days: 0) == CivilDate(year: 1970, month: 1, day: 1))
        #expect(CivilDate(year: 2024, month: 2, day: 29).daysSince1970 + 1 == CivilDate(year: 2024, month: 3, day: 1).daysSince1970)
    }

    /// Dates nobody signs still draw: clamped, never a trap.
    @Test func extremeDates_drawWithoutTrapping() {
        let facts = SubscriptionFacts(
            originalTransactionID: "1",
            transactions: [
                TransactionFacts(
                    transactionID: "1", originalTransactionID: "1", productID: "p", type: TransactionFacts.autoRenewableType,
                    purchaseDate: .min, expiresDate: .max, revocationDate: .max, signedDate: .min, payloadJSON: "{}"),
                TransactionFacts(
                    transactionID: "2", originalTransactionID: "1", productID: "p", purchaseDate: .max, expiresDate: .min,
                    signedDate: .max, payloadJSON: "{}"),
            ],
            renewal: RenewalFacts(
                originalTransactionID: "1", isInBillingRetryPeriod: true, gracePeriodExpiresDate: .max, signedDate: 0,
                payloadJSON: "{}"),
            lastNotification: nil, updatedAt: 0)
        for now: Int64 in [.min, 0, .max] {
            let page = LookupPage.page(
                id: "1", found: LookupPage.Found(matchedAs: .originalTransaction, subscriptions: [.init(facts: facts, claims: [:])]),
                now: now)
            #expect(page.contains("<svg class=\"timeline\""))
            #expect(!page.contains("=\"nan") && !page.contains("=\"inf"))
            // Coordinates only: the events table's data-date is before 1970 for such dates.
            #expect(!Self.svg(inPage: page).contains("=\"-"))
        }
    }
}
