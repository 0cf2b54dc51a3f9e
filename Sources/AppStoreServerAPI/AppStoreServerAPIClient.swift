internal import CryptoFloor
internal import JSONText
internal import Synchronization

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// How hard the client tries before it gives up.
public struct RetryPolicy: Sendable {
    /// Requests per call, the first included.
    public var maximumAttempts: Int = 4
    /// The first back-off after a 5xx or a network failure; doubled each time, with jitter, up to `maximumDelay`.
    public var baseDelaySeconds: Double = 0.5
    public var maximumDelaySeconds: Double = 8
    /// The longest wait a 429's `Retry-After` may impose; a longer one is cut to this.
    public var maximumRetryAfterSeconds: Double = 60

    public init() {}
}

/// A client of Apple's App Store Server API for one app in one environment: signs the bearer token, sends the request
/// over HTTPS, retries what may be retried, and returns Apple's answers with every signed string untouched.
///
/// It trusts nothing it receives: the caller verifies each JWS. Calls block the calling thread: until `deadline` when
/// the client is one `bounded(until:)` made (every retry and wait included), else until the retry policy gives up.
/// The connection to Apple is kept between calls and shared with every bounded client made from this one.
public final class AppStoreServerAPIClient: Sendable {
    /// Told of every request sent: the endpoint (`get_notification_history`) and its outcome (`ok`, `rate_limited`,
    /// `server_error`, `unauthorized`, `not_found`, `client_error`, `network_error`).
    public typealias RequestObserver = @Sendable (_ endpoint: String, _ outcome: String) -> Void

    public let baseURL: String
    public let environment: AppStoreEnvironment
    public let retryPolicy: RetryPolicy
    /// When every call must be over (seconds since 1970, the client's clock), every attempt, back-off and
    /// `Retry-After` wait included; nil for none (background work, which waits out whatever Apple asks).
    public let deadline: Double?
    private let tokens: AppStoreConnectTokenSigner
    private let transport: HTTPSTransport
    private let pacing: RequestPacing
    private let clock: @Sendable () -> Double
    private let sleep: @Sendable (Double) -> Void
    private let observer: RequestObserver?

    /// - Parameters:
    ///   - baseURL: `https://api.storekit.apple.com`, the sandbox host, or a test server's; no trailing slash needed.
    ///   - caFile: a PEM file of CAs trusted besides the system's (for tests and TLS-inspecting proxies).
    ///   - maximumRequestsPerSecond: spacing between requests of this client; 0 or less for none.
    ///   - clock: seconds since 1970; `sleep` waits that many seconds. Both injectable so tests need not wait.
    public init(
        baseURL: String, environment: AppStoreEnvironment, key: AppStoreConnectKey, caFile: String? = nil,
        timeoutSeconds: Int = 10, maximumRequestsPerSecond: Double = 10, retryPolicy: RetryPolicy = RetryPolicy(),
        clock: @escaping @Sendable () -> Double = wallClockSeconds,
        sleep: @escaping @Sendable (Double) -> Void = sleepSeconds, observer: RequestObserver? = nil
    ) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.environment = environment
        self.retryPolicy = retryPolicy
        deadline = nil
        tokens = AppStoreConnectTokenSigner(key: key)
        transport = HTTPSTransport(caFile: caFile, timeoutSeconds: timeoutSeconds)
        pacing = RequestPacing(minimumIntervalSeconds: maximumRequestsPerSecond > 0 ? 1 / maximumRequestsPerSecond : 0)
        self.clock = clock
        self.sleep = sleep
        self.observer = observer
    }

    private init(_ client: AppStoreServerAPIClient, deadline: Double) {
        baseURL = client.baseURL
        environment = client.environment
        retryPolicy = client.retryPolicy
        self.deadline = min(deadline, client.deadline ?? deadline)
        tokens = client.tokens
        transport = client.transport
        pacing = client.pacing
        clock = client.clock
        sleep = client.sleep
        observer = client.observer
    }

    /// This client for a caller who waits: each of its calls ends by `deadline` (seconds since 1970). Past it a call
    /// fails `server_api_unavailable`; a `Retry-After` or a turn under `maximumRequestsPerSecond` that would pass it
    /// fails `server_api_busy` at once. Shares this client's connections, token and request spacing.
    public func bounded(until deadline: Double) -> AppStoreServerAPIClient {
        AppStoreServerAPIClient(self, deadline: deadline)
    }

    public var key: AppStoreConnectKey { tokens.key }

    /// Connections this client has opened (each one a TLS handshake); the rest of its requests reused one.
    public var connectionsOpened: Int { transport.connectionsOpened }

    // MARK: Endpoints

    /// Get Transaction History v2, one page: pass the previous page's `revision` to get the next.
    public func transactionHistory(
        transactionID: String, revision: String? = nil, query: TransactionHistoryQuery = TransactionHistoryQuery()
    ) throws(AppStoreServerAPIError) -> TransactionHistoryPage {
        var parameters: [(String, String)] = []
        if let revision { parameters.append(("revision", revision)) }
        if let startDate = query.startDate { parameters.append(("startDate", String(startDate))) }
        if let endDate = query.endDate { parameters.append(("endDate", String(endDate))) }
        parameters += query.productIDs.map { ("productId", $0) }
        parameters += query.productTypes.map { ("productType", $0) }
        if let sort = query.sort { parameters.append(("sort", sort)) }
        parameters += query.subscriptionGroupIdentifiers.map { ("subscriptionGroupIdentifier", $0) }
        if let ownership = query.inAppOwnershipType { parameters.append(("inAppOwnershipType", ownership)) }
        if let revoked = query.revoked { parameters.append(("revoked", String(revoked))) }
        let reader = try call(
            "Get Transaction History", method: "GET", path: "/inApps/v2/history/\(Self.pathSegment(transactionID))",
            query: parameters)
        return TransactionHistoryPage(
            revision: try reader.string("revision"), hasMore: try reader.bool("hasMore"),
            bundleID: reader.optionalString("bundleId"), environment: reader.optionalString("environment"),
            signedTransactions: try reader.strings("signedTransactions"))
    }

    /// Every page of Get Transaction History v2, in order; `maximumPages` bounds a history that never ends.
    public func completeTransactionHistory(
        transactionID: String, query: TransactionHistoryQuery = TransactionHistoryQuery(), maximumPages: Int = 500
    ) throws(AppStoreServerAPIError) -> [TransactionHistoryPage] {
        var pages: [TransactionHistoryPage] = []
        var revision: String?
        repeat {
            let page = try transactionHistory(transactionID: transactionID, revision: revision, query: query)
            pages.append(page)
            revision = page.revision
        } while pages.last!.hasMore && pages.count < maximumPages
        return pages
    }

    /// Get All Subscription Statuses for the subscription groups of the customer who made `transactionID`.
    public func subscriptionStatuses(
        transactionID: String, statuses: [Int] = []
    ) throws(AppStoreServerAPIError) -> SubscriptionStatuses {
        let reader = try call(
            "Get All Subscription Statuses", method: "GET", path: "/inApps/v1/subscriptions/\(Self.pathSegment(transactionID))",
            query: statuses.map { ("status", String($0)) })
        var groups: [SubscriptionGroupStatus] = []
        for group in try reader.objects("data") {
            var last: [LastTransactionStatus] = []
            for item in try group.objects("lastTransactions") {
                last.append(
                    LastTransactionStatus(
                        status: try item.integer("status"), originalTransactionID: try item.string("originalTransactionId"),
                        signedTransactionInfo: try item.string("signedTransactionInfo"),
                        signedRenewalInfo: try item.string("signedRenewalInfo")))
            }
            groups.append(
                SubscriptionGroupStatus(
                    subscriptionGroupIdentifier: try group.string("subscriptionGroupIdentifier"), lastTransactions: last))
        }
        return SubscriptionStatuses(
            environment: reader.optionalString("environment"), bundleID: reader.optionalString("bundleId"), groups: groups)
    }

    /// Get Transaction Info: the signed transaction.
    public func transactionInfo(transactionID: String) throws(AppStoreServerAPIError) -> String {
        try call("Get Transaction Info", method: "GET", path: "/inApps/v1/transactions/\(Self.pathSegment(transactionID))")
            .string("signedTransactionInfo")
    }

    /// Look Up Order ID: the order id is the one on the customer's emailed receipt.
    public func lookUpOrder(orderID: String) throws(AppStoreServerAPIError) -> OrderLookup {
        let reader = try call("Look Up Order ID", method: "GET", path: "/inApps/v1/lookup/\(Self.pathSegment(orderID))")
        return OrderLookup(status: try reader.integer("status"), signedTransactions: try reader.strings("signedTransactions"))
    }

    /// Get Notification History, one page: pass the previous page's `paginationToken` to get the next.
    public func notificationHistory(
        _ query: NotificationHistoryQuery, paginationToken: String? = nil
    ) throws(AppStoreServerAPIError) -> NotificationHistoryPage {
        let reader = try call(
            "Get Notification History", method: "POST", path: "/inApps/v1/notifications/history",
            query: paginationToken.map { [("paginationToken", $0)] } ?? [], body: query.json)
        var items: [NotificationHistoryItem] = []
        for item in try reader.objects("notificationHistory") {
            items.append(NotificationHistoryItem(signedPayload: try item.string("signedPayload"), sendAttempts: try item.sendAttempts()))
        }
        return NotificationHistoryPage(
            notifications: items, hasMore: try reader.bool("hasMore"), paginationToken: reader.optionalString("paginationToken"))
    }

    /// Request a Test Notification: Apple sends a `TEST` notification to the URL configured for this environment.
    public func requestTestNotification() throws(AppStoreServerAPIError) -> String {
        try call("Request a Test Notification", method: "POST", path: "/inApps/v1/notifications/test", body: nil, emptyPost: true)
            .string("testNotificationToken")
    }

    /// Get Test Notification Status.
    public func testNotificationStatus(token: String) throws(AppStoreServerAPIError) -> TestNotificationStatus {
        let reader = try call(
            "Get Test Notification Status", method: "GET", path: "/inApps/v1/notifications/test/\(Self.pathSegment(token))")
        return TestNotificationStatus(signedPayload: try reader.string("signedPayload"), sendAttempts: try reader.sendAttempts())
    }

    // MARK: Requests, retries and errors

    func call(
        _ endpoint: String, method: String, path: String, query: [(String, String)] = [], body: JSONValue? = nil,
        emptyPost: Bool = false
    ) throws(AppStoreServerAPIError) -> ResponseReader {
        var url = baseURL + path
        if !query.isEmpty {
            url += "?" + query.map { "\(Self.queryComponent($0.0))=\(Self.queryComponent($0.1))" }.joined(separator: "&")
        }
        var headers: [(name: String, value: String)] = [
            ("User-Agent", "receiptd"), ("Accept", "application/json"),
        ]
        var bodyBytes: [UInt8]?
        if let body {
            bodyBytes = body.serialized()
            headers.append(("Content-Type", "application/json"))
        } else if emptyPost {
            bodyBytes = []
            headers.append(("Content-Type", ""))
        }
        var attempt = 0
        while true {
            attempt += 1
            if let deadline, clock() >= deadline { throw deadlinePassed(endpoint, attempts: attempt - 1) }
            try pace(endpoint, until: deadline)
            let token = try tokens.token(now: Int64(clock()))
            let request = OutboundRequest(
                method: method, url: url, headers: headers + [("Authorization", "Bearer \(token)")], body: bodyBytes)
            let remaining = deadline.map { Int((($0 - clock()) * 1000).rounded(.up)) }
            if let remaining, remaining <= 0 { throw deadlinePassed(endpoint, attempts: attempt - 1) }
            let outcome = transport.send(request, timeoutMilliseconds: remaining)
            observer?(Self.metricLabel(endpoint), Self.outcomeLabel(outcome))
            let canRetry = attempt < retryPolicy.maximumAttempts
            switch outcome {
            case .failure(let failure):
                var error = AppStoreServerAPIError(
                    code: .unavailable, message: "\(endpoint): no answer from \(baseURL): \(failure.message)")
                error.attempts = attempt
                guard canRetry, failure.mayHeal else { throw error }
                try wait(backoff(attempt: attempt), until: deadline, orThrow: error)
            case .success(let response) where (200..<300).contains(response.status):
                return try ResponseReader(body: response.body, status: response.status, endpoint: endpoint)
            case .success(let response):
                var error = apiError(endpoint, response)
                error.attempts = attempt
                switch response.status {
                case 429:
                    let asked = retryAfter(response.retryAfter) ?? backoff(attempt: attempt)
                    if let deadline, clock() + asked > deadline {
                        // Waiting would outlast the caller: say when to come back instead of holding it.
                        error.code = .busy
                        error.retryAfterSeconds = Int(asked.rounded(.up))
                        throw error
                    }
                    guard canRetry else { throw error }
                    sleep(min(asked, retryPolicy.maximumRetryAfterSeconds))
                case 500..<600 where canRetry:
                    try wait(backoff(attempt: attempt), until: deadline, orThrow: error)
                default:
                    throw error
                }
            }
        }
    }

    /// Sleeps before a retry, unless the retry could not start before the deadline: then the last failure is final.
    private func wait(_ seconds: Double, until deadline: Double?, orThrow error: AppStoreServerAPIError) throws(AppStoreServerAPIError) {
        if let deadline, clock() + seconds >= deadline { throw error }
        sleep(seconds)
    }

    private func deadlinePassed(_ endpoint: String, attempts: Int) -> AppStoreServerAPIError {
        var error = AppStoreServerAPIError(
            code: .unavailable,
            message: "\(endpoint): no answer from \(baseURL) before the request's deadline (server_api.request_deadline)")
        error.attempts = attempts
        return error
    }

    private func apiError(_ endpoint: String, _ response: InboundResponse) -> AppStoreServerAPIError {
        var appleCode: Int64?
        var appleMessage: String?
        // Apple's error bodies are JSON only when it says so; anything else (a proxy's page) is ignored.
        if response.contentType?.lowercased().hasPrefix("application/json") == true,
            let json = try? JSONValue(parsing: response.body)
        {
            if case .integer(let code)? = json["errorCode"] { appleCode = code }
            if case .string(let message)? = json["errorMessage"] { appleMessage = String(message.prefix(500)) }
        }
        let status = response.status
        let (code, message): (AppStoreServerAPIError.Code, String) =
            switch status {
            case 401:
                (
                    .unauthorized,
                    "\(endpoint): Apple refused the token (401): check key_id, issuer_id and private_key_file in the server_api settings of \(key.bundleID), that the key is an App Store Server API (In-App Purchase) key, and that the bundle id is the app's"
                )
            case 404: (.notFound, "\(endpoint): Apple found nothing (404)")
            case 429: (.rateLimited, "\(endpoint): rate limited by Apple (429)")
            case 500..<600: (.unavailable, "\(endpoint): Apple answered \(status)")
            default: (.rejected, "\(endpoint): Apple rejected the request (\(status))")
            }
        return AppStoreServerAPIError(
            code: code, message: message, httpStatus: status, appleErrorCode: appleCode, appleErrorMessage: appleMessage)
    }

    /// Exponential back-off with jitter: half the delay fixed, half random, so clients that failed together do not
    /// retry together.
    private func backoff(attempt: Int) -> Double {
        let delay = min(retryPolicy.baseDelaySeconds * Double(1 << min(attempt - 1, 20)), retryPolicy.maximumDelaySeconds)
        return delay / 2 + Double.random(in: 0...(delay / 2))
    }

    /// `Retry-After` in seconds (RFC 9110 §10.2.3); an HTTP-date or garbage falls back to the back-off.
    private func retryAfter(_ value: String?) -> Double? {
        guard let value, let seconds = Double(value), seconds >= 0, seconds.isFinite else { return nil }
        return seconds
    }

    /// Spaces requests by `1 / maximumRequestsPerSecond`, across every thread using this client. A turn that would
    /// come after the deadline is not taken: the caller hears `server_api_busy` at once.
    private func pace(_ endpoint: String, until deadline: Double?) throws(AppStoreServerAPIError) {
        guard pacing.minimumIntervalSeconds > 0 else { return }
        let now = clock()
        let wait = pacing.nextRequestTime.withLock { next -> Double? in
            let start = max(next, now)
            if let deadline, start >= deadline { return nil }
            next = start + pacing.minimumIntervalSeconds
            return start - now
        }
        guard let wait else {
            var error = AppStoreServerAPIError(
                code: .busy, message: "\(endpoint): server_api.max_requests_per_second leaves no turn before the deadline")
            error.retryAfterSeconds = 1
            error.attempts = 0
            throw error
        }
        if wait > 0 { sleep(wait) }
    }

    private static func metricLabel(_ endpoint: String) -> String {
        endpoint.lowercased().split(separator: " ").joined(separator: "_")
    }

    private static func outcomeLabel(_ outcome: Result<InboundResponse, TransportFailure>) -> String {
        guard case .success(let response) = outcome else { return "network_error" }
        switch response.status {
        case 200..<300: return "ok"
        case 401: return "unauthorized"
        case 404: return "not_found"
        case 429: return "rate_limited"
        case 500..<600: return "server_error"
        default: return "client_error"
        }
    }

    /// A segment of dots is encoded too: libcurl resolves `.` and `..` (RFC 3986 §5.2.4), which would send the call
    /// to another of Apple's paths. Callers refuse such ids first; this keeps any that slips through in its segment.
    static func pathSegment(_ value: String) -> String {
        guard value == "." || value == ".." else { return percentEncoded(value) }
        return String(repeating: "%2E", count: value.utf8.count)
    }
    private static func queryComponent(_ value: String) -> String { percentEncoded(value) }

    /// RFC 3986 unreserved characters stay, everything else is %XX: an id can never add a path segment or a parameter.
    private static func percentEncoded(_ value: String) -> String {
        var out: [UInt8] = []
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%")] + [byte].hexEncoded(uppercase: true).utf8
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// When the next request of a client (and of the bounded clients made from it) may go.
private final class RequestPacing: Sendable {
    let minimumIntervalSeconds: Double
    let nextRequestTime = Mutex<Double>(0)
    init(minimumIntervalSeconds: Double) { self.minimumIntervalSeconds = minimumIntervalSeconds }
}

/// Seconds since 1970 from the system clock.
@Sendable public func wallClockSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// Blocks the calling thread.
@Sendable public func sleepSeconds(_ seconds: Double) {
    guard seconds > 0 else { return }
    var remaining = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
    while true {
        let request = remaining
        guard nanosleep([request], &remaining) == -1, errno == EINTR else { return }
    }
}
