import Foundation
import HTTP1Server
import TestSupport
import Testing

@testable import ReceiptService
import JSONText

/// Who may call which route: every guarded route against every kind of caller, the routes that never ask, and the
/// public listener.
struct AuthorizationRouteTests {
    struct Guarded: Sendable, CustomTestStringConvertible {
        var method: HTTPMethod
        var target: String
        var scope: APIScope
        var testDescription: String { "\(method) \(target)" }
    }

    static let guarded = [
        Guarded(method: .get, target: "/", scope: .support),
        Guarded(method: .get, target: "/lookup?id=1000000001", scope: .support),
        Guarded(method: .post, target: "/v1/validate", scope: .validate),
        Guarded(method: .get, target: "/v1/subscriptions/1000000001", scope: .ledgerRead),
        Guarded(method: .get, target: "/v1/transactions/1000000001", scope: .ledgerRead),
        Guarded(method: .post, target: "/v1/transactions/1000000001/claim", scope: .claim),
        Guarded(method: .get, target: "/metrics", scope: .metrics),
        Guarded(method: .get, target: "/v1/accounts/alice", scope: .ledgerRead),
        Guarded(method: .delete, target: "/v1/accounts/alice", scope: .accountsWrite),
        Guarded(
            method: .put, target: "/v1/accounts/alice/app_account_tokens/6f2b9c1e-3a4d-4c5e-8f90-1a2b3c4d5e6f",
            scope: .accountsWrite),
        Guarded(method: .post, target: "/v1/accounts/alice/purchases", scope: .accountsWrite),
        Guarded(method: .post, target: "/v1/offers/promotional", scope: .offersSign),
        Guarded(method: .post, target: "/v1/offers/introductory-eligibility", scope: .offersSign),
    ]

    static let open: [(HTTPMethod, String)] = [
        (.post, "/v1/notifications"), (.post, "/verifyReceipt"), (.post, "/sandbox/verifyReceipt"),
        (.get, "/healthz"), (.get, "/readyz"),
    ]

    static let everyScopeToken = "every-scope-token-0123456789abcdefghijklmnopq"

    /// One token with every scope, and one per scope holding only it.
    static func routes(tokens: Bool) -> ReceiptRoutes {
        var configuration = ServiceConfiguration()
        if tokens {
            configuration.apiTokens =
                [APIToken(name: "backend", token: everyScopeToken, scopes: Set(APIScope.allCases))]
                + APIScope.allCases.map { APIToken(name: "only-\($0.rawValue)", token: token(for: $0), scopes: [$0]) }
        }
        return makeRoutes(configuration)
    }

    static func token(for scope: APIScope) -> String { "token-for-\(scope.rawValue)-0123456789abcdefghijkl" }

    /// By default a remote caller of a server bound to every address, where only a token can be trusted.
    static func request(
        _ method: HTTPMethod, _ target: String, authorization: String? = nil,
        headers extra: [(HTTPHeaderName, String)] = [], from peer: HTTPPeer = .remoteClient,
        to listener: HTTPListener = .wildcard
    ) -> HTTPRequest {
        var headers = HTTPHeaders([("Content-Type", "application/json")] + extra)
        if let authorization { headers.add(name: "Authorization", value: authorization) }
        return HTTPRequest(
            method: method, target: target, headers: headers, body: Array("{}".utf8), peer: peer, listener: listener)
    }

    static func basic(user: String, password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    static func isRefusedByAuthorization(_ response: HTTPResponse) -> Bool {
        [401, 403].contains(response.status.code)
    }

    // MARK: - Tokens configured

    @Test(arguments: guarded)
    func noToken_isUnauthorized_withBothChallenges(route: Guarded) {
        for (peer, listener) in [(HTTPPeer.remoteClient, HTTPListener.wildcard), (.loopbackClient, .loopback)] {
            let response = Self.routes(tokens: true).handle(
                Self.request(route.method, route.target, from: peer, to: listener), on: .main)
            #expect(response.status == 401)
            #expect(response.errorCode == "unauthorized")
            #expect(response.errorDetail == "missing_token")
            #expect(response.headers["WWW-Authenticate"] == #"Bearer realm="receiptd", Basic realm="receiptd""#)
            #expect(response.authenticatedUser == nil)
        }
    }

    @Test(arguments: guarded)
    func unknownToken_isUnauthorized_asUnknown(route: Guarded) {
        let routes = Self.routes(tokens: true)
        for authorization in [
            "Bearer not-a-known-token", "Bearer \(Self.everyScopeToken)x", Self.basic(user: "", password: "wrong"),
            Self.basic(user: Self.everyScopeToken, password: "x"),
        ] {
            let response = routes.handle(Self.request(route.method, route.target, authorization: authorization), on: .main)
            #expect(response.status == 401, "\(authorization)")
            #expect(response.errorCode == "unauthorized")
            #expect(response.errorDetail == "unknown_token", "\(authorization)")
        }
    }

    /// A header that holds no credential is as good as none: nothing was presented to compare.
    @Test(arguments: guarded)
    func unreadableCredential_isUnauthorized_asMissing(route: Guarded) {
        let routes = Self.routes(tokens: true)
        for authorization in [
            "Bearer", "Bearer ", "Token \(Self.everyScopeToken)", Self.everyScopeToken,
            Self.basic(user: Self.everyScopeToken, password: ""), "Basic !!!",
        ] {
            let response = routes.handle(Self.request(route.method, route.target, authorization: authorization), on: .main)
            #expect(response.status == 401, "\(authorization)")
            #expect(response.errorCode == "unauthorized")
            #expect(response.errorDetail == "missing_token", "\(authorization)")
        }
    }

    @Test func missingAndUnknownTokens_getDifferentMessages() {
        let routes = Self.routes(tokens: true)
        let missing = routes.handle(Self.request(.get, "/metrics"), on: .main)
        let unknown = routes.handle(Self.request(.get, "/metrics", authorization: "Bearer wrong"), on: .main)
        #expect(missing.errorDetail != unknown.errorDetail)
        #expect(missing.json?["error"]?["message"] != unknown.json?["error"]?["message"])
    }

    @Test(arguments: guarded)
    func tokenWithoutTheScope_isForbidden_namingIt(route: Guarded) {
        let routes = Self.routes(tokens: true)
        let lacking = APIScope.allCases.filter { $0 != route.scope && !(route.scope == .validate && $0 == .support) }
        for scope in lacking {
            let response = routes.handle(
                Self.request(route.method, route.target, authorization: "Bearer \(Self.token(for: scope))"), on: .main)
            #expect(response.status == 403, "\(scope)")
            #expect(response.errorCode == "forbidden")
            #expect(response.json?["error"]?["scope"]?.stringValue == route.scope.rawValue)
            #expect(response.authenticatedUser == "only-\(scope.rawValue)")
        }
    }

    @Test(arguments: guarded)
    func tokenWithTheScope_isServed_asBearerOrBasic(route: Guarded) {
        let routes = Self.routes(tokens: true)
        let token = Self.token(for: route.scope)
        for authorization in [
            "Bearer \(token)", "bearer \(token)", "Bearer  \(token)", Self.basic(user: "", password: token),
            Self.basic(user: "anyone", password: token),
        ] {
            let response = routes.handle(Self.request(route.method, route.target, authorization: authorization), on: .main)
            #expect(!Self.isRefusedByAuthorization(response), "\(authorization): \(response.status)")
            #expect(response.authenticatedUser == "only-\(route.scope.rawValue)")
        }
        let everything = routes.handle(
            Self.request(route.method, route.target, authorization: "Bearer \(Self.everyScopeToken)"), on: .main)
        #expect(!Self.isRefusedByAuthorization(everything))
        #expect(everything.authenticatedUser == "backend")
    }

    /// The support page posts to `/v1/validate` with the token the browser was prompted for.
    @Test func supportScope_mayValidate() {
        let response = Self.routes(tokens: true).handle(
            Self.request(.post, "/v1/validate", authorization: Self.basic(user: "", password: Self.token(for: .support))), on: .main)
        #expect(!Self.isRefusedByAuthorization(response))
    }

    // MARK: - No tokens configured

    @Test(arguments: guarded)
    func withoutTokens_aLoopbackListenerServesItsDirectCallers(route: Guarded) {
        let response = Self.routes(tokens: false).handle(
            Self.request(route.method, route.target, from: .loopbackClient, to: .loopback), on: .main)
        #expect(!Self.isRefusedByAuthorization(response), "\(response.status)")
    }

    /// Bound to a wildcard, a loopback peer may be a proxy on this host speaking for anyone: nobody is served.
    @Test(arguments: guarded)
    func withoutTokens_aWildcardListenerRefusesEveryCaller_loopbackIncluded(route: Guarded) {
        let routes = Self.routes(tokens: false)
        let listeners = [
            HTTPListener.wildcard, HTTPListener(address: "[::]:8080", isLoopback: false),
            HTTPListener(address: "192.0.2.10:8080", isLoopback: false),
        ]
        for listener in listeners {
            for peer in [HTTPPeer.loopbackClient, .remoteClient] {
                for authorization in [nil, "Bearer \(Self.everyScopeToken)"] {
                    let response = routes.handle(
                        Self.request(route.method, route.target, authorization: authorization, from: peer, to: listener),
                        on: .main)
                    #expect(response.status == 403, "\(listener.address) \(peer.address)")
                    #expect(response.errorCode == "auth_not_configured")
                    #expect(response.errorDetail == "listener_not_loopback")
                }
            }
        }
    }

    @Test(arguments: guarded)
    func withoutTokens_aForwardedRequestIsRefused_evenOnLoopback(route: Guarded) {
        let routes = Self.routes(tokens: false)
        for header in [
            ("Forwarded", "for=198.51.100.17"), ("X-Forwarded-For", "198.51.100.17"), ("x-real-ip", "198.51.100.17"),
            ("VIA", "1.1 nginx"), ("X-Forwarded-For", ""),
        ] as [(HTTPHeaderName, String)] {
            let response = routes.handle(
                Self.request(route.method, route.target, headers: [header], from: .loopbackClient, to: .loopback),
                on: .main)
            #expect(response.status == 403, "\(header.0)")
            #expect(response.errorCode == "auth_not_configured")
            #expect(response.errorDetail == "forwarded_by_proxy")
            #expect(response.json?["error"]?["message"]?.stringValue?.contains(header.0.rawName) == true)
        }
    }

    /// With tokens a proxy's headers change nothing: the token is the proof.
    @Test func withTokens_aForwardedRequestIsJudgedByItsToken() {
        let response = Self.routes(tokens: true).handle(
            Self.request(
                .get, "/metrics", authorization: "Bearer \(Self.everyScopeToken)",
                headers: [("X-Forwarded-For", "198.51.100.17")]), on: .main)
        #expect(response.status == 200)
    }

    // MARK: - Never a token

    @Test func openRoutes_neverAskForAToken() {
        for tokens in [true, false] {
            let routes = Self.routes(tokens: tokens)
            for (method, target) in Self.open {
                for authorization in [nil, "Bearer wrong"] {
                    let response = routes.handle(
                        Self.request(
                            method, target, authorization: authorization, headers: [("Via", "1.1 ingress")]),
                        on: .main)
                    #expect(!Self.isRefusedByAuthorization(response), "\(method) \(target): \(response.status)")
                }
            }
        }
    }

    /// Exactly these routes are open, whatever else changes in the table.
    @Test func routeTable_guardsEverythingButTheOpenRoutes() {
        let open = ReceiptRoutes.Route.allCases.filter { $0.declaration.access == .anyone }
        #expect(
            Set(open) == [.notifications, .verifyReceipt, .sandboxVerifyReceipt, .health, .readiness, .unmatched])
        let publicRoutes = ReceiptRoutes.Route.allCases.filter { $0.declaration.listeners == .mainAndPublic }
        #expect(Set(publicRoutes) == [.notifications, .health, .unmatched])
        let waiting = ReceiptRoutes.Route.allCases.filter(\.usesLedger)
        #expect(
            Set(waiting) == [
                .validate, .notifications, .subscription, .transaction, .claim, .verifyReceipt, .sandboxVerifyReceipt,
                .order, .lookup, .account, .accountDeletion, .appAccountToken, .accountPurchases, .consumption,
                .introductoryOfferEligibility, .renewalExtension,
            ])
    }

    // MARK: - The public listener

    @Test func publicListener_servesNotificationsAndHealth() {
        let routes = Self.routes(tokens: false)
        #expect(routes.handle(Self.request(.get, "/healthz"), on: .public).status == 200)
        #expect(routes.handle(Self.request(.head, "/healthz"), on: .public).status == 200)
        let notification = routes.handle(Self.request(.post, "/v1/notifications"), on: .public)
        #expect(notification.status != 404)
        #expect(!Self.isRefusedByAuthorization(notification))
    }

    @Test func publicListener_answersNotFound_toEverythingElse_withoutAllow() {
        for tokens in [true, false] {
            let routes = Self.routes(tokens: tokens)
            var requests = Self.guarded.map { ($0.method, $0.target) }
            requests += [
                (.get, "/v1/notifications"), (.post, "/healthz"), (.delete, "/healthz"), (.get, "/readyz"),
                (.post, "/verifyReceipt"), (.post, "/sandbox/verifyReceipt"), (.get, "/nothing/here"),
                (.options, "/v1/notifications"),
            ]
            for (method, target) in requests {
                let response = routes.handle(
                    Self.request(method, target, authorization: "Bearer \(Self.everyScopeToken)"), on: .public)
                #expect(response.status == 404, "\(method) \(target)")
                #expect(response.errorCode == "not_found")
                #expect(response.headers[.allow] == nil)
                #expect(response.headers["WWW-Authenticate"] == nil)
            }
        }
    }

    // MARK: - Path ids

    @Test(arguments: ["/v1/subscriptions/", "/v1/transactions/", "/v1/orders/"])
    func pathIDs_areShortPlainWords(prefix: String) {
        let routes = Self.routes(tokens: false)
        let longest = String(repeating: "a", count: 64)
        for id in [longest, "2000000123456789", "A.b_c-9"] {
            let response = routes.handle(get(prefix + id), on: .main)
            #expect(response.errorCode != "bad_request", "\(id)")
        }
        // libcurl would turn `/inApps/v1/lookup/..` into another of Apple's paths.
        for id in [longest + "a", "caf%C3%A9", "a%00b", "a+b", "a:b", "café", "a'b", ".", "..", "%2E%2E"] {
            let response = routes.handle(get(prefix + id), on: .main)
            #expect(response.status == 400, "\(id)")
            #expect(response.errorCode == "bad_request")
        }
        for id in ["\(longest)b", "%20", ".", ".."] {
            let claim = routes.handle(
                post("/v1/transactions/\(id)/claim", contentType: "application/json", text: #"{"account": "a"}"#),
                on: .main)
            #expect(claim.status == 400, "\(id)")
            #expect(claim.errorDetail == "invalid_id", "\(id)")
        }
    }

    @Test func lookupIDs_refuseDotSegmentsAndControlCharacters() {
        let routes = Self.routes(tokens: false)
        for id in [".", "..", "%2E%2E", "a%00b", "a%01b", "a%7Fb", "a%0Ab"] {
            let response = routes.handle(get("/lookup?id=\(id)"), on: .main)
            #expect(response.status == 400, "\(id)")
        }
    }

    // MARK: - Constant-time comparison

    @Test func digestComparison_needsEveryByte() {
        let digest = [UInt8](repeating: 7, count: 32)
        #expect(Authorization.constantTimeEquals(digest, digest))
        for index in digest.indices {
            var other = digest
            other[index] ^= 1
            #expect(!Authorization.constantTimeEquals(digest, other))
        }
        #expect(!Authorization.constantTimeEquals(digest, Array(digest.prefix(31))))
    }
}

/// The access log names a token by its entry's name, and keeps the client's path short.
struct AuthorizationLogTests {
    @Test func accessLine_namesTheToken_inTextAndJSON() throws {
        var record = HTTPAccessRecord(
            method: "GET", path: "/metrics", status: 200, responseBytes: 10, microseconds: 5, requestID: "r",
            remoteAddress: "10.0.0.1:1", user: "backend")
        let text = ServiceLog(format: .text, sink: { _ in }).accessLine(record)
        #expect(text.hasSuffix(" token=backend"))
        let json = try JSONValue(parsing: Array(ServiceLog(format: .json, sink: { _ in }).accessLine(record).utf8))
        #expect(json["token"]?.stringValue == "backend")
        record.user = nil
        #expect(!ServiceLog(format: .text, sink: { _ in }).accessLine(record).contains("token="))
    }

    @Test func accessLine_keepsABoundedSliceOfThePath() throws {
        for path in ["/v1/transactions/" + String(repeating: "x", count: 10_000), "/" + String(repeating: "é", count: 100)] {
            let record = HTTPAccessRecord(
                method: "GET", path: path, status: 400, responseBytes: 10, microseconds: 5, requestID: "r",
                remoteAddress: "10.0.0.1:1")
            let json = try JSONValue(parsing: Array(ServiceLog(format: .json, sink: { _ in }).accessLine(record).utf8))
            let logged = try #require(json["path"]?.stringValue)
            let kept = try #require(logged.split(separator: "[...+").first)
            #expect(kept.utf8.count <= ServiceLog.maximumClientValueBytes)
            #expect(kept.utf8.count >= ServiceLog.maximumClientValueBytes - 1)
            #expect(path.hasPrefix(kept))
            #expect(logged.hasSuffix("B]"))
        }
    }
}
