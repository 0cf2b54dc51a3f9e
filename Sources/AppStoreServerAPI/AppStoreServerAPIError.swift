/// A failed call to the App Store Server API, as a value: a stable `code` for programs, a `message` for people, and
/// what Apple said (`errorCode`/`errorMessage` of its JSON error body) when it said anything.
public struct AppStoreServerAPIError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The app has no `server_api` key configured.
        public static let notConfigured = Code(rawValue: "server_api_not_configured")
        /// The `.p8` key cannot be read or cannot sign.
        public static let keyInvalid = Code(rawValue: "server_api_key_invalid")
        /// 401: Apple refused the token; the message names the settings to check.
        public static let unauthorized = Code(rawValue: "server_api_unauthorized")
        /// 404: Apple knows no such transaction, order, app or account (`appleErrorCode` says which).
        public static let notFound = Code(rawValue: "server_api_not_found")
        /// Any other 4xx: the request was wrong; retrying cannot help.
        public static let rejected = Code(rawValue: "server_api_rejected")
        /// 429 after the waits Apple asked for ran out.
        public static let rateLimited = Code(rawValue: "server_api_rate_limited")
        /// 429 with a `Retry-After` longer than the caller's deadline, or no turn under the client's request rate
        /// before it: `retryAfterSeconds` says when to come back.
        public static let busy = Code(rawValue: "server_api_busy")
        /// 5xx, or no answer at all (DNS, connect, TLS, timeout), after every retry.
        public static let unavailable = Code(rawValue: "server_api_unavailable")
        /// A 2xx whose body is not the JSON the endpoint promises.
        public static let invalidResponse = Code(rawValue: "server_api_invalid_response")
    }

    public var code: Code
    public var message: String
    /// The HTTP status of the last answer; nil when none came.
    public var httpStatus: Int?
    public var appleErrorCode: Int64?
    public var appleErrorMessage: String?
    /// How many requests were sent before giving up.
    public var attempts: Int = 1
    /// When Apple may be asked again, in seconds: with `busy`.
    public var retryAfterSeconds: Int?

    public init(
        code: Code, message: String, httpStatus: Int? = nil, appleErrorCode: Int64? = nil, appleErrorMessage: String? = nil
    ) {
        self.code = code
        self.message = message
        self.httpStatus = httpStatus
        self.appleErrorCode = appleErrorCode
        self.appleErrorMessage = appleErrorMessage
    }

    public var description: String { "\(code): \(detail)" }

    /// The message and what Apple said, without the code: for callers that put their own code first.
    public var detail: String {
        guard let apple = appleSaid else { return message }
        return message + "; " + apple
    }

    /// Apple's own error as people read it, `Apple: 4040010 transaction id not found`; nil when Apple sent no
    /// `errorCode`.
    public var appleSaid: String? {
        guard let appleErrorCode else { return nil }
        guard var text = appleErrorMessage?.trimmingTrailingPeriod, !text.isEmpty else { return "Apple: \(appleErrorCode)" }
        // "Transaction id not found." reads as part of the sentence; an acronym such as "ID" keeps its case.
        let characters = Array(text)
        if characters.count > 1, characters[0].isUppercase, characters[1].isLowercase {
            text = characters[0].lowercased() + String(characters.dropFirst())
        }
        return "Apple: \(appleErrorCode) \(text)"
    }
}

extension String {
    fileprivate var trimmingTrailingPeriod: String {
        var text = Substring(self)
        while let last = text.last, last == "." || last == " " { text = text.dropLast() }
        return String(text)
    }
}
