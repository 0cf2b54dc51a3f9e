import Foundation
import HTTP1Server
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
    ]

    static let open: [(HTTPMethod, String)] = [
        (.post, "/v1/notifications"), (.post, "/verifyReceipt"), (.post, "/sandbox/verifyReceipt"),
        (.get, "/healthz"), (.get, "/readyz"),
    ]

    static let everyScopeToken = "every-scope-token-0123456789abcdefghijklmnopq"
    static let remote = HTTPPeer(address: "203.0.113.7:40000", isLoopback: false)

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

    static func request(
        _ method: HTTPMethod, _ target: String, authorization: String? = nil, peer: HTTPPeer = remote
    ) -> HTTPRequest {
        var headers = HTTPHeaders([("Content-Type", "application/json")])
        if let authorization { headers.add(name: "Authorization", value: authorization) }
        return HTTPRequest(method: method, target: target, headers: headers, body: Array("{}".utf8), peer: peer)
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
        for peer in [Self.remote, .local] {
            let response = Self.routes(tokens: true).handle(Self.request(route.method, route.target, peer: peer))
            #expect(response.status == 401)
            #expect(response.errorCode == "unauthorized")
            #expect(response.headers["WWW-Authenticate"] == #"Bearer realm="receiptd", Basic realm="receiptd""#)
            #expect(response.authenticatedUser == nil)
        }
    }

    @Test(arguments: guarded)
    func unknownOrMalformedToken_isUnauthorized(route: Guarded) {
        let routes = Self.routes(tokens: true)
        for authorization in [
            "Bearer not-a-known-token", "Bearer", "Bearer ", "Token \(Self.everyScopeToken)", Self.everyScopeToken,
            Self.basic(user: Self.everyScopeToken, password: ""), "Basic !!!", "Bearer \(Self.everyScopeToken)x",
        ] {
            let response = routes.handle(Self.request(route.method, route.target, authorization: authorization))
            #expect(response.status == 401, "\(authorization)")
            #expect(response.errorCode == "unauthorized")
        }
    }

    @Test(arguments: guarded)
    func tokenWithoutTheScope_isForbidden_namingIt(route: Guarded) {
        let routes = Self.routes(tokens: true)
        let lacking = APIScope.allCases.filter { $0 != route.scope && !(route.scope == .validate && $0 == .support) }
        for scope in lacking {
            let response = routes.handle(
                Self.request(route.method, route.target, authorization: "Bearer \(Self.token(for: scope))"))
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
            let response = routes.handle(Self.request(route.method, route.target, authorization: authorization))
            #expect(!Self.isRefusedByAuthorization(response), "\(authorization): \(response.status)")
            #expect(response.authenticatedUser == "only-\(route.scope.rawValue)")
        }
        let everything = routes.handle(
            Self.request(route.method, route.target, authorization: "Bearer \(Self.everyScopeToken)"))
        #expect(!Self.isRefusedByAuthorization(everything))
        #expect(everything.authenticatedUser == "backend")
    }

    /// The support page posts to `/v1/validate` with the token the browser was prompted for.
    @Test func supportScope_mayValidate() {
        let response = Self.routes(tokens: true).handle(
            Self.request(.post, "/v1/validate", authorization: Self.basic(user: "", password: Self.token(for: .support))))
        #expect(!Self.isRefusedByAuthorization(response))
    }

    // MARK: - No tokens configured

    @Test(arguments: guarded)
    func withoutTokens_loopbackIsServed_andOthersAreTold(route: Guarded) {
        let routes = Self.routes(tokens: false)
        let loopback = routes.handle(
            Self.request(route.method, route.target, peer: HTTPPeer(address: "127.0.0.1:1", isLoopback: true)))
        #expect(!Self.isRefusedByAuthorization(loopback))
        let local = routes.handle(Self.request(route.method, route.target))
        #expect(local.status == 403)
        #expect(local.errorCode == "auth_not_configured")
        let withToken = routes.handle(
            Self.request(route.method, route.target, authorization: "Bearer \(Self.everyScopeToken)"))
        #expect(withToken.errorCode == "auth_not_configured")
    }

    // MARK: - Never a token

    @Test func openRoutes_neverAskForAToken() {
        for tokens in [true, false] {
            let routes = Self.routes(tokens: tokens)
            for (method, target) in Self.open {
                for authorization in [nil, "Bearer wrong"] {
                    let response = routes.handle(Self.request(method, target, authorization: authorization))
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
                .order, .lookup,
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

    @Test(arguments: ["/v1/subscriptions/", "/v1/transactions/"])
    func pathIDs_areShortPlainWords(prefix: String) {
        let routes = Self.routes(tokens: false)
        let longest = String(repeating: "a", count: 64)
        for id in [longest, "2000000123456789", "A.b_c-9"] {
            let response = routes.handle(get(prefix + id))
            #expect(response.errorCode != "bad_request", "\(id)")
        }
        for id in [longest + "a", "caf%C3%A9", "a%00b", "a+b", "a:b", "café", "a'b"] {
            let response = routes.handle(get(prefix + id))
            #expect(response.status == 400, "\(id)")
            #expect(response.errorCode == "bad_request")
        }
        let claim = routes.handle(
            post(prefix == "/v1/transactions/" ? "/v1/transactions/\(longest)b/claim" : "/v1/transactions/%20/claim",
                contentType: "application/json", text: #"{"account": "a"}"#))
        #expect(claim.errorCode == "bad_request")
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

    @Test func accessLine_keepsAtMost64BytesOfThePath() throws {
        for path in ["/v1/transactions/" + String(repeating: "x", count: 10_000), "/" + String(repeating: "é", count: 100)] {
            let record = HTTPAccessRecord(
                method: "GET", path: path, status: 400, responseBytes: 10, microseconds: 5, requestID: "r",
                remoteAddress: "10.0.0.1:1")
            let json = try JSONValue(parsing: Array(ServiceLog(format: .json, sink: { _ in }).accessLine(record).utf8))
            let logged = try #require(json["path"]?.stringValue)
            #expect(logged.utf8.count <= 64)
            #expect(logged.utf8.count >= 63)
            #expect(path.hasPrefix(logged))
        }
    }
}
