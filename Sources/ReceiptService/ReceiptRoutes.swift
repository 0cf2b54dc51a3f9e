public import Foundation
public import HTTP1Server
public import ReceiptEngine

/// receiptd's HTTP interface as a pure function of a request: no sockets, so every route is tested directly.
///
/// Routes:
/// - `POST /v1/validate`: receiptd's own API; 200 valid, 422 invalid, 400 bad upload, 415 unknown body type.
/// - `POST /verifyReceipt`, `POST /sandbox/verifyReceipt`: drop-in for Apple's deprecated endpoint (always 200).
/// - `GET /healthz`, `GET /readyz`, `GET /metrics`, `GET /` (the support page).
public struct ReceiptRoutes: Sendable {
    /// receiptd's release, reported by `/healthz` so that whoever checks a port learns which server answered.
    public static let version = "0.3.0"

    /// The routes receiptd knows, named by their path; `unmatched` labels everything else in metrics.
    enum Route: String, Sendable, CaseIterable {
        case supportPage = "/"
        case validate = "/v1/validate"
        case verifyReceipt = "/verifyReceipt"
        case sandboxVerifyReceipt = "/sandbox/verifyReceipt"
        case health = "/healthz"
        case readiness = "/readyz"
        case metrics = "/metrics"
        case unmatched = "unmatched"

        var allowedMethod: String {
            switch self {
            case .validate, .verifyReceipt, .sandboxVerifyReceipt: return "POST"
            default: return "GET"
            }
        }
    }

    public let configuration: ServiceConfiguration
    public let validator: ReceiptValidator
    /// `/sandbox/verifyReceipt` mirrors Apple's sandbox host: it takes Sandbox receipts whatever `environments`
    /// says, so a client that retries there after 21007 is served, as it was by Apple.
    private let sandboxValidator: ReceiptValidator
    public let metrics: ServiceMetrics
    public let readiness: ServiceReadiness
    private let clock: @Sendable () -> Date
    /// When these routes were made, which is when the server starts: `/healthz`'s `started_at`.
    private let startedAt: ReceiptDate

    /// - Parameter clock: "now" for subscription activity and Apple's `request_date`; injected so tests are exact.
    public init(
        configuration: ServiceConfiguration, validator: ReceiptValidator, metrics: ServiceMetrics,
        readiness: ServiceReadiness = ServiceReadiness(), clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.configuration = configuration
        self.validator = validator
        var sandboxPolicy = validator.policy
        sandboxPolicy.environments = [.sandbox]
        self.sandboxValidator = ReceiptValidator(policy: sandboxPolicy)
        self.metrics = metrics
        self.readiness = readiness
        self.clock = clock
        self.startedAt = ReceiptDate(clock())
    }

    /// Answers one request and records it in the metrics.
    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        let started = ContinuousClock.now
        let route = Route(rawValue: request.path) ?? .unmatched
        let response = respond(to: request, route: route)
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        metrics.recordRequest(route: route.rawValue, status: response.status, seconds: seconds)
        return response
    }

    private func respond(to request: HTTPRequest, route: Route) -> HTTPResponse {
        switch route {
        case .verifyReceipt: return verifyReceipt(request, endpoint: .production)
        case .sandboxVerifyReceipt: return verifyReceipt(request, endpoint: .sandbox)
        case .unmatched:
            return problem(RequestProblem(status: 404, code: "not_found", message: "no route for \(request.path)"))
        default: break
        }
        // RFC 9110 §9.3.2: HEAD is GET without the content (the HTTP layer leaves the body out), so load balancers
        // and monitors that check health with HEAD get 200, not 405.
        let isHeadOfGet = request.method == "HEAD" && route.allowedMethod == "GET"
        guard request.method == route.allowedMethod || isHeadOfGet else {
            var response = problem(
                RequestProblem(
                    status: 405, code: "method_not_allowed",
                    message: "\(route.rawValue) accepts \(route.allowedMethod) only"))
            response.headers.add(name: "Allow", value: route.allowedMethod)
            return response
        }
        switch route {
        case .validate: return validate(request)
        case .health:
            return json(
                status: 200,
                .object([
                    ("status", .string("ok")), ("version", .string(Self.version)),
                    ("started_at", .string(startedAt.rfc3339)),
                ]))
        case .readiness:
            return readiness.isReady
                ? json(status: 200, .object([("status", .string("ready"))]))
                : json(status: 503, .object([("status", .string("shutting_down"))]))
        case .metrics:
            return HTTPResponse(
                status: 200, headers: HTTPHeaders([("Content-Type", "text/plain; version=0.0.4; charset=utf-8")]),
                body: Array(metrics.exposition().utf8))
        case .supportPage: return html(status: 200, SupportPage.html)
        case .verifyReceipt, .sandboxVerifyReceipt, .unmatched: preconditionFailure("answered above")
        }
    }

    // MARK: - POST /v1/validate

    private func validate(_ request: HTTPRequest) -> HTTPResponse {
        let wantsHTML = AcceptHeader(request.headers["Accept"]).prefersHTML
        let submission: ReceiptSubmission
        let deviceIdentifier: DeviceIdentifier?
        do {
            submission = try ReceiptSubmission(request: request)
            deviceIdentifier = try Self.deviceIdentifier(submission: submission, request: request)
        } catch {
            return problem(error, html: wantsHTML)
        }
        let result = validator.validate(submission.receipt, deviceIdentifier: deviceIdentifier, at: clock())
        metrics.recordValidation(result)
        let status = result.isValid ? 200 : 422
        if wantsHTML { return html(status: status, ResultHTML.page(result)) }
        return HTTPResponse(
            status: status, headers: HTTPHeaders([("Content-Type", "application/json")]),
            body: ResultJSON.encode(result))
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
                "device id must be a UUID (identifierForVendor) or a MAC address like aa:bb:cc:dd:ee:ff")
        }
        return identifier
    }

    // MARK: - POST /verifyReceipt

    private func verifyReceipt(_ request: HTTPRequest, endpoint: AppleVerifyReceipt.Endpoint) -> HTTPResponse {
        let now = clock()
        func answer(_ status: AppleReceiptStatus, _ result: ValidationResult?, _ parsed: AppleVerifyRequest?)
            -> HTTPResponse
        {
            let body = AppleVerifyReceipt.response(
                status: status, result: result, endpoint: endpoint, request: parsed, requestDate: ReceiptDate(now))
            return json(status: 200, body)
        }
        // Apple answers 21000 with HTTP 200 even to a GET; clients only ever look at `status`.
        guard request.method == "POST", let parsed = AppleVerifyRequest(body: request.body) else {
            return answer(.badRequest, nil, nil)
        }
        guard let receipt = Base64Text.decode(Array(parsed.receiptData.utf8)), !receipt.isEmpty else {
            return answer(.malformedReceipt, nil, parsed)
        }
        let result = (endpoint == .sandbox ? sandboxValidator : validator).validate(receipt, at: now)
        metrics.recordValidation(result)
        let status = AppleVerifyReceipt.status(
            for: result, endpoint: endpoint, password: parsed.password, configuration: configuration)
        return answer(status, result, parsed)
    }

    // MARK: - Answers

    private func problem(_ problem: RequestProblem, html wantsHTML: Bool = false) -> HTTPResponse {
        if wantsHTML {
            return html(
                status: problem.status,
                ResultHTML.errorPage(status: problem.status, code: problem.code, message: problem.message))
        }
        return json(status: problem.status, .object([("error", ResultJSON.errorObject(code: problem.code, message: problem.message))]))
    }

    private func json(status: Int, _ value: JSONValue) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: HTTPHeaders([("Content-Type", "application/json")]), body: value.serialized())
    }

    private func html(status: Int, _ page: String) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: HTTPHeaders([("Content-Type", "text/html; charset=utf-8")]),
            body: Array(page.utf8))
    }
}
