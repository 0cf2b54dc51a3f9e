/// A request method token (RFC 9110 §9). Methods are case-sensitive; a string literal makes one.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }
    public var description: String { rawValue }

    public static let get: HTTPMethod = "GET"
    public static let head: HTTPMethod = "HEAD"
    public static let post: HTTPMethod = "POST"
    public static let put: HTTPMethod = "PUT"
    public static let delete: HTTPMethod = "DELETE"
    public static let options: HTTPMethod = "OPTIONS"
}

/// A response status code with its reason phrase; an integer literal makes one.
public struct HTTPStatus: RawRepresentable, Hashable, Comparable, Sendable, ExpressibleByIntegerLiteral,
    CustomStringConvertible
{
    public let code: Int
    public var rawValue: Int { code }
    public init(rawValue: Int) { code = rawValue }
    public init(integerLiteral value: Int) { code = value }
    public var description: String { String(code) }
    public static func < (lhs: HTTPStatus, rhs: HTTPStatus) -> Bool { lhs.code < rhs.code }

    public static let ok: HTTPStatus = 200
    public static let badRequest: HTTPStatus = 400
    public static let notFound: HTTPStatus = 404
    public static let methodNotAllowed: HTTPStatus = 405
    public static let requestTimeout: HTTPStatus = 408
    public static let conflict: HTTPStatus = 409
    public static let contentTooLarge: HTTPStatus = 413
    public static let unsupportedMediaType: HTTPStatus = 415
    public static let unprocessableContent: HTTPStatus = 422
    public static let headerFieldsTooLarge: HTTPStatus = 431
    public static let internalServerError: HTTPStatus = 500
    public static let notImplemented: HTTPStatus = 501
    public static let serviceUnavailable: HTTPStatus = 503
    public static let httpVersionNotSupported: HTTPStatus = 505

    /// RFC 9110 §15's phrase; clients ignore it, people read it.
    public var reasonPhrase: String {
        switch code {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 411: "Length Required"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 422: "Unprocessable Content"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status"
        }
    }
}

/// A header field name; compares ignoring ASCII case (RFC 9110 §5.1). A string literal makes one.
public struct HTTPHeaderName: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// As written, for sending.
    public let rawName: String
    public init(_ name: String) { rawName = name }
    public init(stringLiteral value: String) { rawName = value }
    public var description: String { rawName }

    public static func == (lhs: HTTPHeaderName, rhs: HTTPHeaderName) -> Bool {
        lhs.rawName.equalsIgnoringASCIICase(rhs.rawName)
    }

    public func hash(into hasher: inout Hasher) {
        for byte in rawName.utf8 { hasher.combine(lowercasedASCII(byte)) }
    }

    public static let allow: HTTPHeaderName = "Allow"
    public static let connection: HTTPHeaderName = "Connection"
    public static let contentLength: HTTPHeaderName = "Content-Length"
    public static let contentType: HTTPHeaderName = "Content-Type"
    public static let expect: HTTPHeaderName = "Expect"
    public static let host: HTTPHeaderName = "Host"
    public static let requestID: HTTPHeaderName = "X-Request-Id"
    public static let retryAfter: HTTPHeaderName = "Retry-After"
    public static let transferEncoding: HTTPHeaderName = "Transfer-Encoding"
}

/// A request the server refused before any handler saw it (malformed, too large, too slow, too many connections):
/// the status to answer and why, for the application to word in its own error shape.
public struct HTTPFailure: Sendable, Hashable {
    public var status: HTTPStatus
    public var message: String
}
