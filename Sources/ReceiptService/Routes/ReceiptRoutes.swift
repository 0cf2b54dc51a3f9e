#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTP1Server
public import ReceiptEngine
public import StoreKitJWS
import JSONText
import Ledger
internal import CryptoFloor

/// receiptd's HTTP interface as a pure function of a request: no sockets, so every route is tested directly.
///
/// Routes:
/// - `POST /v1/validate`: receiptd's own API for receipts and StoreKit 2 JWS; 200 valid, 422 invalid, 400 bad
///   upload, 415 unknown body type.
/// - `POST /v1/notifications`: App Store Server Notifications V2, acknowledged once durably in the ledger.
/// - `GET /v1/subscriptions/{original_transaction_id}`, `GET /v1/transactions/{transaction_id}`,
///   `POST /v1/transactions/{transaction_id}/claim`: what the ledger knows.
/// - `GET` and `DELETE /v1/accounts/{account}`, `PUT /v1/accounts/{account}/app_account_tokens/{uuid}`,
///   `POST /v1/accounts/{account}/purchases`: the backend's users, what they may use, and how purchases reach them.
/// - `POST /verifyReceipt`, `POST /sandbox/verifyReceipt`: drop-in for Apple's deprecated endpoint.
/// - `GET /healthz`, `GET /readyz`, `GET /metrics`, `GET /` (the support page), `GET /lookup?id=` (its lookup box).
public struct ReceiptRoutes: Sendable {
    /// The routes receiptd knows, named by their path template; `unmatched` labels everything else in metrics.
    enum Route: String, Sendable, CaseIterable {
        case supportPage = "/"
        case lookup = "/lookup"
        case validate = "/v1/validate"
        case notifications = "/v1/notifications"
        case subscription = "/v1/subscriptions/{original_transaction_id}"
        case transaction = "/v1/transactions/{transaction_id}"
        case claim = "/v1/transactions/{transaction_id}/claim"
        case order = "/v1/orders/{order_id}"
        case account = "/v1/accounts/{account}"
        /// The same path as `account`; one label per method, since the two need different scopes.
        case accountDeletion = "DELETE /v1/accounts/{account}"
        case appAccountToken = "/v1/accounts/{account}/app_account_tokens/{app_account_token}"
        case accountPurchases = "/v1/accounts/{account}/purchases"
        case consumption = "/v1/transactions/{transaction_id}/consumption"
        case promotionalOffer = "/v1/offers/promotional"
        case introductoryOfferEligibility = "/v1/offers/introductory-eligibility"
        case renewalExtension = "/v1/subscriptions/{original_transaction_id}/extend"
        case verifyReceipt = "/verifyReceipt"
        case sandboxVerifyReceipt = "/sandbox/verifyReceipt"
        case health = "/healthz"
        case readiness = "/readyz"
        case metrics = "/metrics"
        case unmatched = "unmatched"

        /// Which of receiptd's sockets serve a route.
        enum Listeners: Sendable, Hashable {
            /// The main listener only (`host`, `port`).
            case main
            /// The main listener and the internet-facing `public` one.
            case mainAndPublic
        }

        /// What a route is, in one place: its method, who may call it, whether answering may wait on the ledger's
        /// database or on Apple, and which listeners serve it.
        struct Declaration: Sendable, Hashable {
            var method: HTTPMethod
            var access: RouteAccess
            var usesLedger: Bool
            /// Whether answering may wait on the App Store Server API: such requests run on threads of their own, at
            /// most `server_api.max_concurrent_requests` at once, and nothing else ever waits behind them.
            var waitsOnApple: Bool = false
            var listeners: Listeners
        }

        /// The route table. Exhaustive with no `default`, so a new route cannot exist without deciding each column.
        var declaration: Declaration {
            switch self {
            case .supportPage:
                Declaration(method: .get, access: .scope(.support), usesLedger: false, listeners: .main)
            // The support page's lookup box: an HTML view of the ledger, for support staff.
            case .lookup:
                Declaration(method: .get, access: .scope(.support), usesLedger: true, waitsOnApple: true, listeners: .main)
            // The support page posts its form here, so `support` alone is enough to use it.
            case .validate:
                Declaration(method: .post, access: .scope(.validate, orAlso: [.support]), usesLedger: true, listeners: .main)
            // Apple's signature is the proof; Apple cannot present a token.
            case .notifications:
                Declaration(method: .post, access: .anyone, usesLedger: true, listeners: .mainAndPublic)
            case .subscription:
                Declaration(method: .get, access: .scope(.ledgerRead), usesLedger: true, listeners: .main)
            case .transaction:
                Declaration(method: .get, access: .scope(.ledgerRead), usesLedger: true, listeners: .main)
            case .claim:
                Declaration(method: .post, access: .scope(.claim), usesLedger: true, listeners: .main)
            // Waits on Apple (Look Up Order ID), and stores what it verified.
            case .order:
                Declaration(method: .get, access: .scope(.ledgerRead), usesLedger: true, waitsOnApple: true, listeners: .main)
            case .account:
                Declaration(method: .get, access: .scope(.ledgerRead), usesLedger: true, listeners: .main)
            case .accountDeletion:
                Declaration(method: .delete, access: .scope(.accountsWrite), usesLedger: true, listeners: .main)
            case .appAccountToken:
                Declaration(method: .put, access: .scope(.accountsWrite), usesLedger: true, listeners: .main)
            // Validates as `/v1/validate` does, which never waits on Apple either.
            case .accountPurchases:
                Declaration(method: .post, access: .scope(.accountsWrite), usesLedger: true, listeners: .main)
            // The backend's answer to Apple's refund question; sent to Apple in the background, never while it waits.
            case .consumption:
                Declaration(method: .put, access: .scope(.accountsWrite), usesLedger: true, listeners: .main)
            // Signed with the app's key, never asking Apple nor the ledger.
            case .promotionalOffer:
                Declaration(method: .post, access: .scope(.offersSign), usesLedger: false, listeners: .main)
            // Decided from the customer's history in the ledger when the caller leaves it to receiptd.
            case .introductoryOfferEligibility:
                Declaration(method: .post, access: .scope(.offersSign), usesLedger: true, listeners: .main)
            // Asks Apple (Extend a Subscription Renewal Date) and records its answer.
            case .renewalExtension:
                Declaration(method: .post, access: .scope(.support), usesLedger: true, waitsOnApple: true, listeners: .main)
            // Apple's protocol, with `shared_secret` as its own check.
            case .verifyReceipt, .sandboxVerifyReceipt:
                Declaration(method: .post, access: .anyone, usesLedger: true, listeners: .main)
            case .health:
                Declaration(method: .get, access: .anyone, usesLedger: false, listeners: .mainAndPublic)
            // Answered from the ledger's health as last seen by its background task: never waits on the database.
            case .readiness:
                Declaration(method: .get, access: .anyone, usesLedger: false, listeners: .main)
            case .metrics:
                Declaration(method: .get, access: .scope(.metrics), usesLedger: false, listeners: .main)
            // Answered 404 before anything else is looked at.
            case .unmatched:
                Declaration(method: .get, access: .anyone, usesLedger: false, listeners: .mainAndPublic)
            }
        }

        var allowedMethod: HTTPMethod { declaration.method }
        /// The path template, without the method that tells apart routes sharing one path.
        var pathTemplate: Substring {
            let name = rawValue
            guard let space = name.utf8.firstIndex(of: UInt8(ascii: " ")) else { return name[...] }
            return name[name.utf8.index(after: space)...]
        }
        /// Every method some route serves at this route's path, for `Allow`.
        var methodsAtPath: [HTTPMethod] {
            Route.allCases.filter { $0.pathTemplate == pathTemplate }.map(\.allowedMethod)
        }
        var isAccountRoute: Bool { pathTemplate.hasPrefix("/v1/accounts/") }
        var waitsOnApple: Bool { declaration.waitsOnApple }
        /// Whether answering may wait on the database; such requests never run on an event loop.
        var usesLedger: Bool { declaration.usesLedger }

        /// Every route by its name but `unmatched`: the server matches each request up to three times (inline or not,
        /// Apple's lane or not, the answer), and `init(rawValue:)` compares the path with each name in turn.
        private static let byName = Dictionary(
            uniqueKeysWithValues: allCases.filter { $0 != .unmatched }.map { ($0.rawValue, $0) })

        /// The route a path names, and the id in it for the ledger's routes (the account, still percent-encoded, for
        /// the account routes). Ids are one non-empty segment; whether an id is acceptable is `PathID`'s (or
        /// `AccountPath`'s) to say, after the caller is known. The method only tells apart the routes of one path.
        static func match(_ path: String, method: HTTPMethod) -> (route: Route, id: Substring?) {
            if let route = byName[path] { return (route, nil) }
            var segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
            guard segments.first == "v1", segments.count >= 3, segments.allSatisfy({ !$0.isEmpty }) else {
                return (.unmatched, nil)
            }
            segments = segments.dropFirst()
            let id = segments[segments.startIndex + 1]
            switch (segments.first, segments.count, segments.last) {
            case ("subscriptions", 2, _): return (.subscription, id)
            case ("transactions", 2, _): return (.transaction, id)
            case ("transactions", 3, "claim"): return (.claim, id)
            case ("transactions", 3, "consumption"): return (.consumption, id)
            case ("subscriptions", 3, "extend"): return (.renewalExtension, id)
            case ("orders", 2, _): return (.order, id)
            case ("accounts", 2, _): return (method == .delete ? .accountDeletion : .account, id)
            case ("accounts", 3, "purchases"): return (.accountPurchases, id)
            case ("accounts", 4, _) where segments[segments.startIndex + 2] == "app_account_tokens":
                return (.appAccountToken, id)
            default: return (.unmatched, nil)
            }
        }
    }

    /// Which socket a request came in on.
    public enum Listener: Sendable, Hashable {
        /// `host`/`port`: every route.
        case main
        /// `public`: only `POST /v1/notifications` and `GET /healthz`.
        case `public`
    }

    public let configuration: ServiceConfiguration
    /// The configuration's entitlement rules, built once: every account request applies them.
    let entitlementRules: EntitlementRules
    public let validator: ReceiptValidator
    public let jwsVerifier: JWSVerifier
    public var ledger: PurchaseLedger { intake.ledger }
    /// `/sandbox/verifyReceipt` mirrors Apple's sandbox host: Sandbox receipts only, and only while `environments`
    /// accepts them (an operator who removes Sandbox wants none accepted anywhere).
    private let sandboxValidator: ReceiptValidator
    public let metrics: ServiceMetrics
    public let readiness: ServiceReadiness
    /// Where every fact these routes verify goes into the ledger.
    public let intake: LedgerIntake
    /// Wakes the Apple call worker when a granted claim queued calls (`finish_on_claim`, `write_app_account_tokens`).
    public let appleCallNudge = WorkerNudge()
    /// Normalized transactions' texts, kept across the subscription and account answers that copy them.
    let transactionTexts = NormalizedTransactionTexts()
    /// `GET /v1/accounts/{account}`'s answers, given again while nothing they depend on changed.
    let accountAnswers = AccountAnswers()
    /// App Store Server API clients, kept across requests (their tokens are reused).
    public var serverAPIClients: ServerAPIClients { intake.serverAPIClients }
    /// The apps' offer signature creators, their keys read when the routes are made.
    let offerSigners: OfferSigners
    /// Where the App Store Server API's failures are written (the intake writes each fact's fate); nil logs none.
    let log: ServiceLog?
    let clock: @Sendable () -> Date
    /// When these routes were made, which is when the server starts: `/healthz`'s `started_at`.
    private let startedAt: ReceiptDate
    let authorization: Authorization
    /// The threads of the routes that wait on Apple: `server_api.max_concurrent_requests` of them.
    private let appleThreads: BoundedThreads
    /// The threads of the routes that wait on the ledger's database (a commit, a read).
    let ledgerThreads = BoundedThreads(limit: ReceiptRoutes.ledgerLaneThreads)
    /// Enough that every sender of a busy app reaches the writer together and shares its commits (16 senders made
    /// groups of about 3 on Dispatch's pool, which lets about as many handlers wait as there are cores); few enough
    /// that a stalled disk holds a bounded number of threads, each until `store_timeout`.
    static let ledgerLaneThreads = 64

    /// - Parameters:
    ///   - jwsVerifier: StoreKit 2 verification; by default made from the validator's policy.
    ///   - ledger: where verified data is remembered; stateless by default.
    ///   - log: receives one event per notification Apple delivers, and each fact the ledger could not take.
    ///   - clock: "now" for subscription activity and Apple's `request_date`; injected so tests are exact.
    public init(
        configuration: ServiceConfiguration, validator: ReceiptValidator, jwsVerifier: JWSVerifier? = nil,
        ledger: PurchaseLedger = .none, metrics: ServiceMetrics, readiness: ServiceReadiness = ServiceReadiness(),
        log: ServiceLog? = nil, clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.configuration = configuration
        self.entitlementRules = configuration.entitlementRules
        self.validator = validator
        self.jwsVerifier = jwsVerifier ?? JWSVerifier(policy: validator.policy)
        var sandboxPolicy = validator.policy
        sandboxPolicy.environments = validator.policy.environments.intersection([.sandbox])
        self.sandboxValidator = ReceiptValidator(policy: sandboxPolicy)
        self.metrics = metrics
        self.readiness = readiness
        self.intake = LedgerIntake(
            configuration: configuration, ledger: ledger, jwsVerifier: self.jwsVerifier, metrics: metrics, log: log,
            clock: clock)
        self.log = log
        self.clock = clock
        self.startedAt = ReceiptDate(clock())
        self.authorization = Authorization(tokens: configuration.apiTokens)
        self.offerSigners = OfferSigners(configuration: configuration)
        let appleThreads = BoundedThreads(limit: configuration.serverAPI.maxConcurrentRequests)
        self.appleThreads = appleThreads
        metrics.serverAPI.observeWaitingRequests { appleThreads.count }
    }

    /// How a server runs the routes that wait on Apple (`waitsOnApple` in the route table): on their own threads, at
    /// most `server_api.max_concurrent_requests` at once, and answered 503 `server_api_busy` at once beyond that. One
    /// set of threads for every listener the routes serve, so the bound holds for the process.
    public func appleLane(on listener: Listener) -> HandlerLane {
        HandlerLane(
            threads: appleThreads,
            accepts: { request in Route.match(request.path, method: request.method).route.waitsOnApple },
            busyHandler: { request in handle(request, on: listener, apple: .busy) })
    }

    /// How a server runs the routes that wait on the ledger's database, when there is one: on their own threads, at
    /// most `ledgerLaneThreads` at once; beyond that on the server's handler queue, as every other request.
    public func ledgerLane(on listener: Listener) -> HandlerLane {
        let isConfigured = ledger.isConfigured
        return HandlerLane(
            threads: ledgerThreads,
            accepts: { request in
                let route = Route.match(request.path, method: request.method).route
                return isConfigured && route.usesLedger && !route.waitsOnApple
            },
            busyHandler: { request in handle(request, on: listener) })
    }

    /// Answers one request and records it in the metrics.
    /// - Parameters:
    ///   - listener: the socket it came in on; the public one serves two routes and hides the rest. No default: the
    ///     server that read the request knows, and nothing else may guess.
    ///   - apple: whether the request may ask Apple; `busy` answers what would ask Apple 503 `server_api_busy`.
    public func handle(_ request: HTTPRequest, on listener: Listener, apple: AppleAdmission = .admitted) -> HTTPResponse {
        let started = ContinuousClock.now
        let (matched, id) = Route.match(request.path, method: request.method)
        let isHidden = listener == .public && !Self.isServedPublicly(request.method, matched)
        let route = isHidden ? .unmatched : matched
        let response = respond(to: request, route: route, id: id, apple: apple)
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        metrics.recordRequest(route: route.rawValue, status: response.status.code, seconds: seconds)
        return response
    }

    /// The public listener answers only its routes' own methods (and HEAD of GET): anything else is 404 like a path
    /// that does not exist, so a scan learns nothing of the rest, not even from a 405's `Allow`.
    private static func isServedPublicly(_ method: HTTPMethod, _ route: Route) -> Bool {
        guard route != .unmatched, route.declaration.listeners == .mainAndPublic else { return false }
        return method == route.allowedMethod || (method == .head && route.allowedMethod == .get)
    }

    private func notFound(_ request: HTTPRequest) -> HTTPResponse {
        let shownPath = request.path.utf8.count <= PathID.maximumLength ? request.path : "this path"
        return problem(RequestProblem(status: 404, code: .notFound, message: "no route for \(shownPath)"))
    }

    /// Whether the server may answer `request` on the event loop that read it: not when the answer may wait on the
    /// ledger's database or on Apple, which would stall every other connection on that loop.
    public func mayAnswerInline(_ request: HTTPRequest) -> Bool {
        let route = Route.match(request.path, method: request.method).route
        // Rendering the metrics takes their registry's lock.
        return !route.waitsOnApple && route != .metrics && (!ledger.isConfigured || !route.usesLedger)
    }

    private func respond(to request: HTTPRequest, route: Route, id: Substring?, apple: AppleAdmission) -> HTTPResponse {
        if route == .unmatched { return notFound(request) }
        var tokenName: String?
        switch authorization.decide(request, access: route.declaration.access) {
        case .allowed(let name): tokenName = name
        case .unauthenticated(let reason):
            var response = problem(Self.unauthenticated(reason, route: route))
            response.headers.add(name: "WWW-Authenticate", value: #"Bearer realm="receiptd", Basic realm="receiptd""#)
            return response
        case .forbidden(let name, let missing):
            var response = json(
                status: 403,
                .object([
                    (
                        "error",
                        .object([
                            ("code", .string(RequestProblem.Code.forbidden.rawValue)),
                            ("message", .string("token \(name) lacks the scope \(missing.rawValue)")),
                            ("scope", .string(missing.rawValue)),
                        ])
                    )
                ]))
            response.authenticatedUser = name
            return response
        case .notConfigured(let reason):
            return problem(Self.notConfigured(reason, route: route, listener: request.listener))
        }
        var response = authorizedResponse(to: request, route: route, id: id, apple: apple)
        response.authenticatedUser = tokenName
        return response
    }

    private static let howToMakeAToken =
        "make one with `receiptd token new --name NAME --scopes validate,ledger:read` and add its entry to api_tokens "
        + "(or RECEIPTD_API_TOKENS)"

    private static func unauthenticated(_ reason: Authorization.Unauthenticated, route: Route) -> RequestProblem {
        switch reason {
        case .missingToken(let headerPresent):
            let seen =
                headerPresent ? "the Authorization header holds no Bearer or Basic credential" : "no token was sent"
            return RequestProblem(
                status: 401, code: .unauthorized,
                message: "\(route.rawValue) needs an API token and \(seen): send Authorization: Bearer TOKEN",
                detail: .missingToken)
        case .unknownToken:
            return RequestProblem(
                status: 401, code: .unauthorized,
                message: "\(route.rawValue): the token sent is not one of api_tokens (mistyped, revoked, or from "
                    + "another server's configuration); send a token whose SHA-256 is configured",
                detail: .unknownToken)
        }
    }

    private static func notConfigured(
        _ reason: Authorization.NotConfigured, route: Route, listener: HTTPListener
    ) -> RequestProblem {
        switch reason {
        case .listenerNotLoopback:
            return RequestProblem(
                status: 403, code: .authNotConfigured,
                message: "\(route.rawValue) answers without a token only when receiptd listens on loopback, and it "
                    + "listens on \(listener.address), where a proxy makes every caller look local; configure "
                    + "api_tokens: \(howToMakeAToken)",
                detail: .listenerNotLoopback)
        case .forwarded(let header):
            return RequestProblem(
                status: 403, code: .authNotConfigured,
                message: "\(route.rawValue): a proxy forwarded this request (it carries \(header)), so its "
                    + "loopback peer says nothing of who sent it; to serve callers through a proxy, configure "
                    + "api_tokens: \(howToMakeAToken)",
                detail: .forwardedByProxy)
        }
    }

    private func authorizedResponse(
        to request: HTTPRequest, route: Route, id: Substring?, apple: AppleAdmission
    ) -> HTTPResponse {
        switch route {
        case .verifyReceipt: return verifyReceipt(request, endpoint: .production)
        case .sandboxVerifyReceipt: return verifyReceipt(request, endpoint: .sandbox)
        default: break
        }
        // RFC 9110 §9.3.2: HEAD is GET without the content (the HTTP layer leaves the body out), so load balancers
        // and monitors that check health with HEAD get 200, not 405.
        let isHeadOfGet = request.method == .head && route.allowedMethod == .get
        guard request.method == route.allowedMethod || isHeadOfGet else {
            let allowed = route.methodsAtPath.map(\.rawValue).joined(separator: ", ")
            var response = problem(
                RequestProblem(
                    status: 405, code: .methodNotAllowed,
                    message: "\(route.pathTemplate) accepts \(allowed) only"))
            response.headers.add(name: .allow, value: allowed)
            return response
        }
        if route.isAccountRoute, let id { return accountResponse(to: request, route: route, accountSegment: id) }
        if let id, !PathID.isValid(id) {
            return problem(
                .badRequest(
                    .invalidID,
                    "the id in \(route.rawValue) must be \(PathID.rule)"))
        }
        let id = id.map(String.init) ?? ""
        switch route {
        case .validate: return validate(request)
        case .notifications: return receiveNotification(request)
        case .subscription: return subscription(originalTransactionID: id, request: request)
        case .transaction: return transaction(id: id)
        case .claim: return claim(request, transactionID: id)
        case .order: return order(id: id, apple: apple)
        case .consumption: return putConsumption(request, transactionID: id)
        case .promotionalOffer: return signPromotionalOffer(request)
        case .introductoryOfferEligibility: return signIntroductoryOfferEligibility(request)
        case .renewalExtension: return extendRenewal(request, originalTransactionID: id, apple: apple)
        case .health:
            return json(
                status: 200,
                .object([
                    ("status", .string("ok")), ("version", .string(ReceiptdVersion.current)),
                    ("started_at", .string(startedAt.rfc3339)),
                ]))
        case .readiness:
            guard readiness.isReady else { return json(status: 503, .object([("status", .string("shutting_down"))])) }
            // From the state the ledger's background task keeps: a frozen database never holds this answer.
            if let reason = ledger.health.reason {
                return json(
                    status: 503,
                    .object([
                        ("status", .string("not_ready")), ("store", .string("unavailable")),
                        ("reason", .string(reason.rawValue)),
                    ]))
            }
            return json(status: 200, .object([("status", .string("ready"))]))
        case .metrics:
            return HTTPResponse(
                status: .ok, headers: HTTPHeaders([(.contentType, "text/plain; version=0.0.4; charset=utf-8")]),
                body: Array(metrics.exposition().utf8))
        case .supportPage: return html(status: 200, SupportPage.html)
        case .lookup: return supportLookup(request, apple: apple)
        case .verifyReceipt, .sandboxVerifyReceipt, .unmatched, .account, .accountDeletion, .appAccountToken,
            .accountPurchases:
            preconditionFailure("answered above")
        }
    }

    /// The answer to a request the HTTP layer refused before routing, in the error shape every receiptd answer
    /// shares; counted like any other answer, under the route `unrouted`.
    @Sendable public func failureResponse(_ failure: HTTPFailure) -> HTTPResponse {
        let code: RequestProblem.Code =
            switch failure.status {
            case .requestTimeout: .requestTimeout
            case .contentTooLarge: .payloadTooLarge
            case .headerFieldsTooLarge: .headerTooLarge
            case .notImplemented: .notImplemented
            case .serviceUnavailable: .serviceUnavailable
            case .httpVersionNotSupported: .httpVersionNotSupported
            default: .badRequest
            }
        metrics.recordRequest(route: "unrouted", status: failure.status.code, seconds: 0)
        let message =
            switch failure.status {
            case .contentTooLarge:
                "the request body is larger than \(configuration.maxBodyBytes) bytes, the limit the config's "
                    + "max_body_bytes sets"
            case .headerFieldsTooLarge:
                "the request line and headers are larger than \(configuration.maxHeaderBytes) bytes, the limit the "
                    + "config's max_header_bytes sets"
            default: failure.message
            }
        return problem(RequestProblem(status: failure.status, code: code, message: message))
    }

    // MARK: - POST /v1/validate

    private func validate(_ request: HTTPRequest) -> HTTPResponse {
        let wantsHTML = AcceptHeader(request.headers["Accept"]).prefersHTML
        return validation(of: request, wantsHTML: wantsHTML, collectingOriginals: false).response
    }

    /// `/v1/validate`'s answer to a request, and, when `collectingOriginals`, the distinct original transactions of
    /// what it verified and recorded (with a ledger): `POST /v1/accounts/{account}/purchases` answers the same and
    /// links those. `/v1/validate` itself needs none, so it does not pay for collecting them.
    func validation(
        of request: HTTPRequest, wantsHTML: Bool, collectingOriginals: Bool
    ) -> (response: HTTPResponse, originals: [String]) {
        let submission: ReceiptSubmission
        let deviceIdentifier: DeviceIdentifier?
        let requiredKind: SignedDataKind?
        do {
            submission = try ReceiptSubmission(request: request)
            deviceIdentifier = try Self.deviceIdentifier(submission: submission, request: request)
            requiredKind = try Self.requiredKind(request)
        } catch {
            return (problem(error, html: wantsHTML), [])
        }
        switch submission.signedData {
        case .receipt(let receipt):
            return validateReceipt(
                receipt, deviceIdentifier: deviceIdentifier, requiredKind: requiredKind, wantsHTML: wantsHTML,
                collectingOriginals: collectingOriginals)
        case .jws(let text):
            return validateJWS(
                text, deviceIdentifier: deviceIdentifier, requiredKind: requiredKind, wantsHTML: wantsHTML,
                collectingOriginals: collectingOriginals)
        }
    }

    private func validateReceipt(
        _ receipt: [UInt8], deviceIdentifier: DeviceIdentifier?, requiredKind: SignedDataKind?, wantsHTML: Bool,
        collectingOriginals: Bool
    ) -> (response: HTTPResponse, originals: [String]) {
        let now = clock()
        let result = validator.validate(receipt, deviceIdentifier: deviceIdentifier, requiredKind: requiredKind, at: now)
        metrics.recordValidation(result)
        let status: HTTPStatus = result.isValid ? .ok : .unprocessableContent
        if wantsHTML { return (html(status: status, ResultHTML.page(result)), []) }
        guard ledger.isConfigured else { return (json(status: status, text: ResultJSON.encode(result)), []) }
        let view = intake.take(result, now: now)
        if let member = view.refusedIDMember { return (problem(Self.invalidSignedID(member)), []) }
        let answer = json(status: status, text: ResultJSON.encode(result, ledger: view))
        guard collectingOriginals, result.isValid else { return (answer, []) }
        var seen = Set<String>()
        let purchases = result.receipt?.inAppPurchases ?? []
        let originals = purchases.compactMap { $0.originalTransactionID ?? $0.transactionID }
            .filter { seen.insert($0).inserted }
        return (answer, originals)
    }

    /// A verified input carrying an id that is not one: nothing of it is stored or sent to Apple.
    static func invalidSignedID(_ member: String) -> RequestProblem {
        .badRequest(.invalidID, "verified, but its \(member) is not an id (\(PathID.rule)), so it cannot be recorded")
    }

    /// `?kind=`: the kind of signed data the caller requires (`receipt` or a StoreKit 2 kind).
    static func requiredKind(_ request: HTTPRequest) throws(RequestProblem) -> SignedDataKind? {
        guard let text = request.queryValue("kind"), !text.isEmpty else { return nil }
        guard let kind = SignedDataKind(rawValue: text) else {
            let kinds = SignedDataKind.allCases.map(\.rawValue).joined(separator: ", ")
            throw .badRequest(.invalidKind, "kind must be one of \(kinds), not \(text)")
        }
        return kind
    }

    /// The body's device id, else the `X-Device-Id` header, else `?device_id=`; an empty value means none (an HTML
    /// form sends its empty field).
    static func deviceIdentifier(
        submission: ReceiptSubmission, request: HTTPRequest
    ) throws(RequestProblem) -> DeviceIdentifier? {
        let candidates = [submission.deviceID, request.headers["X-Device-Id"], request.queryValue("device_id")]
        guard let text = candidates.compactMap({ $0?.trimmed(of: " \t\r\n") }).first(where: { !$0.isEmpty }) else {
            return nil
        }
        guard let identifier = DeviceIdentifier(text) else {
            throw .badRequest(
                .invalidDeviceID, "device id must be a UUID (identifierForVendor) or a MAC address like aa:bb:cc:dd:ee:ff")
        }
        return identifier
    }

    // MARK: - POST /verifyReceipt

    private func verifyReceipt(_ request: HTTPRequest, endpoint: AppleVerifyReceipt.Endpoint) -> HTTPResponse {
        let now = clock()
        func answer(
            _ status: AppleReceiptStatus, _ result: ValidationResult?, _ parsed: AppleVerifyRequest?,
            ledger: AppleLedgerState? = nil
        ) -> HTTPResponse {
            let body = AppleVerifyReceipt.response(
                status: status, result: result, endpoint: endpoint, request: parsed, requestDate: ReceiptDate(now),
                ledger: ledger)
            return json(status: 200, body)
        }
        // Apple answers 21000 with HTTP 200 even to a GET; clients only ever look at `status`.
        guard request.method == .post, let parsed = AppleVerifyRequest(body: request.body) else {
            return answer(.badRequest, nil, nil)
        }
        guard let receipt = Base64.decodeText(Array(parsed.receiptData.utf8)), !receipt.isEmpty else {
            return answer(.malformedReceipt, nil, parsed)
        }
        let result = (endpoint == .sandbox ? sandboxValidator : validator).validate(receipt, at: now)
        metrics.recordValidation(result)
        let status = AppleVerifyReceipt.status(
            for: result, endpoint: endpoint, password: parsed.password, configuration: configuration)
        guard status == .valid, ledger.isConfigured, let decoded = result.receipt else {
            return answer(status, result, parsed)
        }
        // Apple's answer promised the latest renewals; without the ledger it would silently show a stale expiry, so
        // an unreachable ledger is Apple's retryable 21005 instead.
        do {
            let state = try intake.takeForApple(decoded)
            return answer(status, result, parsed, ledger: state)
        } catch {
            return answer(.temporarilyUnavailable, result, parsed)
        }
    }

    // MARK: - Answers

    func problem(_ problem: RequestProblem, html wantsHTML: Bool = false) -> HTTPResponse {
        var response = problemWithoutRetryAfter(problem, html: wantsHTML)
        if let seconds = problem.retryAfterSeconds { response.headers.add(name: .retryAfter, value: String(seconds)) }
        return response
    }

    private func problemWithoutRetryAfter(_ problem: RequestProblem, html wantsHTML: Bool) -> HTTPResponse {
        if wantsHTML {
            return html(
                status: problem.status,
                ResultHTML.errorPage(
                    status: problem.status.code, code: problem.code.rawValue, message: problem.message,
                    reason: problem.reason))
        }
        return json(
            status: problem.status,
            .object([
                (
                    "error",
                    ResultJSON.errorObject(
                        code: problem.code.rawValue, message: problem.message, reason: problem.reason,
                        detail: problem.detail?.rawValue, field: problem.field, appleErrorCode: problem.appleErrorCode)
                )
            ]))
    }

    func json(status: HTTPStatus, _ value: JSONValue) -> HTTPResponse { json(status: status, text: value.serialized()) }

    /// An answer whose JSON text is already written.
    func json(status: HTTPStatus, text: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: status, headers: HTTPHeaders([(.contentType, "application/json")]), body: text)
    }

    /// An answer whose JSON text is written in pieces, sent one after the other.
    func json(status: HTTPStatus, pieces: [ArraySlice<UInt8>]) -> HTTPResponse {
        HTTPResponse(status: status, headers: HTTPHeaders([(.contentType, "application/json")]), bodyPieces: pieces)
    }

    func html(status: HTTPStatus, _ page: String) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: HTTPHeaders([(.contentType, "text/html; charset=utf-8")]),
            body: Array(page.utf8))
    }
}
