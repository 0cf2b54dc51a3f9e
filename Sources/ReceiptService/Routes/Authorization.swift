import CryptoFloor
public import HTTP1Server
import JSONText

/// What an API token may do; each guarded route needs one of these (`ReceiptRoutes.Route.declaration`).
public enum APIScope: String, Sendable, Hashable, CaseIterable {
    /// `POST /v1/validate`.
    case validate
    /// `GET /v1/subscriptions/…`, `GET /v1/transactions/…` and `GET /v1/accounts/…`.
    case ledgerRead = "ledger:read"
    /// `POST /v1/transactions/…/claim`.
    case claim
    /// `GET /metrics`.
    case metrics
    /// The support page `GET /`, the validation it posts to `POST /v1/validate`, and its lookup box `GET /lookup`.
    case support
    /// `PUT /v1/accounts/{account}/app_account_tokens/{uuid}`, `POST /v1/accounts/{account}/purchases` and
    /// `DELETE /v1/accounts/{account}`: what links purchases to the backend's users, and forgets them.
    case accountsWrite = "accounts:write"
    /// `POST /v1/offers/promotional` and `POST /v1/offers/introductory-eligibility`: signatures StoreKit asks the
    /// app's server for, made with the app's in-app purchase key.
    case offersSign = "offers:sign"
}

/// One entry of the config's `api_tokens`: `{"name": "backend", "sha256": "<hex>", "scopes": ["validate"]}`.
///
/// Only the token's SHA-256 is kept, so a file or ConfigMap holding the configuration reveals no token. A token is
/// 32 random bytes or more (`receiptd token new`): a single unsalted SHA-256 suffices, as nothing short of the
/// whole keyspace finds one.
public struct APIToken: Sendable, Hashable {
    /// Names the caller in the access log (`token=backend`).
    public var name: String
    public var sha256: [UInt8]
    public var scopes: Set<APIScope>

    public init(name: String, sha256: [UInt8], scopes: Set<APIScope>) {
        self.name = name
        self.sha256 = sha256
        self.scopes = scopes
    }

    /// The entry for a token: what `receiptd token new` prints for the config.
    public init(name: String, token: String, scopes: Set<APIScope>) {
        self.init(name: name, sha256: Digest.sha256.hash(Array(token.utf8)), scopes: scopes)
    }

    /// The entry as JSON, scopes in `APIScope.allCases` order.
    public var configurationJSON: String {
        let scopeValues = APIScope.allCases.filter(scopes.contains).map { JSONValue.string($0.rawValue) }
        let value = JSONValue.object([
            ("name", .string(name)), ("sha256", .string(sha256.hexEncoded())), ("scopes", .array(scopeValues)),
        ])
        return String(decoding: value.serialized(), as: UTF8.self)
    }

    /// A name goes into log lines, so it stays a short plain word.
    public static func isValidName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count) && name.utf8.allSatisfy(PathID.isAllowed)
    }
}

/// What a route asks of its caller, declared beside the route.
enum RouteAccess: Sendable, Hashable {
    /// No credential, ever: Apple's signature, Apple's protocol or a probe is the proof.
    case anyone
    /// A token holding any one of these scopes; the first is the one a refusal names.
    case scope(APIScope, orAlso: [APIScope] = [])
}

/// The credential in a request's `Authorization` header, parsed once: `Bearer TOKEN`, or `Basic` with any user and
/// the token as password (what a browser prompt and `curl -u :TOKEN` send).
struct PresentedToken {
    /// SHA-256 of the token; the token itself goes no further than this initializer.
    let digest: [UInt8]

    init?(authorization: String?) {
        guard var header = authorization else { return nil }
        // Scanned in place, with no copy or split: this runs on every guarded request.
        guard let digest = header.withUTF8({ Self.digest(ofCredentialIn: $0) }) else { return nil }
        self.digest = digest
    }

    private static func digest(ofCredentialIn header: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard let space = header.firstIndex(of: UInt8(ascii: " ")) else { return nil }
        let scheme = header[..<space]
        guard let start = header[space...].firstIndex(where: { $0 != UInt8(ascii: " ") }) else { return nil }
        let credentials = header[start...]
        // RFC 9110 §11.1: the scheme is case-insensitive.
        if isScheme(scheme, "bearer") { return Digest.sha256.hash(credentials) }
        guard isScheme(scheme, "basic") else { return nil }
        // RFC 7617: base64 of `user:password`; the user is whatever the client typed, the password the token.
        guard let decoded = Base64.decodeText(credentials), let colon = decoded.firstIndex(of: UInt8(ascii: ":")),
            colon + 1 < decoded.count
        else { return nil }
        return Digest.sha256.hash(decoded[(colon + 1)...])
    }

    private static func isScheme(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, _ lowercased: StaticString) -> Bool {
        bytes.count == lowercased.utf8CodeUnitCount
            && zip(bytes, UnsafeBufferPointer(start: lowercased.utf8Start, count: lowercased.utf8CodeUnitCount))
                .allSatisfy { $0 | 0x20 == $1 }
    }
}

/// Decides whether a request may reach a route: the tokens of `api_tokens`, or, with none configured, nothing but a
/// direct caller of a server bound to loopback.
struct Authorization: Sendable {
    enum Decision: Sendable, Hashable {
        /// `tokenName` is nil when no token was needed (an open route, or loopback without `api_tokens`).
        case allowed(tokenName: String?)
        /// 401 `unauthorized`.
        case unauthenticated(Unauthenticated)
        /// 403 `forbidden`: a known token without the scope named.
        case forbidden(tokenName: String, missing: APIScope)
        /// 403 `auth_not_configured`: a guarded route, no `api_tokens`, and no way to know the caller is this machine.
        case notConfigured(NotConfigured)
    }

    enum Unauthenticated: Sendable, Hashable {
        /// No `Authorization` header, or one holding no Bearer or Basic credential.
        case missingToken(headerPresent: Bool)
        /// A credential no entry of `api_tokens` knows.
        case unknownToken
    }

    enum NotConfigured: Sendable, Hashable {
        /// The server listens on a wildcard or an outside address: anyone may connect, and a proxy on this host (a
        /// sidecar, an ingress, nginx) makes every remote caller's peer loopback.
        case listenerNotLoopback
        /// A proxy forwarded the request (it says so in this header, named as sent): its loopback peer is the proxy,
        /// not the caller.
        case forwarded(header: String)
    }

    /// The headers a forwarding proxy adds (RFC 7239, the de facto `X-Forwarded-For` and `X-Real-IP`, RFC 9110's
    /// `Via`); a direct caller has no reason to send any.
    static let proxyHeaders: [HTTPHeaderName] = ["Forwarded", "X-Forwarded-For", "X-Real-IP", "Via"]

    let tokens: [APIToken]

    func decide(_ request: HTTPRequest, access: RouteAccess) -> Decision {
        guard case .scope(let required, let alternatives) = access else { return .allowed(tokenName: nil) }
        guard !tokens.isEmpty else { return Self.decideWithoutTokens(request) }
        guard let presented = PresentedToken(authorization: request.headers["Authorization"]) else {
            return .unauthenticated(.missingToken(headerPresent: request.headers["Authorization"] != nil))
        }
        guard let token = token(matching: presented.digest) else { return .unauthenticated(.unknownToken) }
        guard token.scopes.contains(required) || alternatives.contains(where: token.scopes.contains) else {
            return .forbidden(tokenName: token.name, missing: required)
        }
        return .allowed(tokenName: token.name)
    }

    /// Without tokens the only proof of who calls is the socket: a loopback listener reached directly. It runs on
    /// every guarded request, so the proxy check is one pass over the header names, copying nothing.
    private static func decideWithoutTokens(_ request: HTTPRequest) -> Decision {
        guard request.listener.isLoopback, request.peer.isLoopback else { return .notConfigured(.listenerNotLoopback) }
        guard request.headers.containsAny(of: proxyHeaders) else { return .allowed(tokenName: nil) }
        let header = request.headers.first { field in proxyHeaders.contains(HTTPHeaderName(field.name)) }
        return .notConfigured(.forwarded(header: header?.name ?? proxyHeaders[0].rawName))
    }

    /// Every entry is compared, each in constant time: the time taken says nothing about how much of a digest
    /// matched, so it cannot be used to find a hash (or a token) byte by byte.
    private func token(matching digest: [UInt8]) -> APIToken? {
        var match: APIToken?
        for token in tokens where Self.constantTimeEquals(token.sha256, digest) { match = token }
        return match
    }

    static func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in lhs.indices { difference |= lhs[index] ^ rhs[index] }
        return difference == 0
    }
}

// MARK: - Configuration

extension ServiceConfiguration {
    /// `public`: a second listener that serves only `POST /v1/notifications` and `GET /healthz`, for the internet.
    public struct PublicListener: Sendable, Hashable {
        public var host: String
        public var port: Int
    }

    /// Whether `host` only accepts connections from this machine; elsewhere, guarded routes need `api_tokens`.
    public var isLoopbackHost: Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// The one warning `serve` logs when guarded routes refuse every caller, and how to fix it.
    public var authorizationWarning: String? {
        guard apiTokens.isEmpty, !isLoopbackHost else { return nil }
        return "no api_tokens configured while listening on \(host): /v1/validate, the ledger lookups and claims, "
            + "/metrics and / answer 403 auth_not_configured to every caller, loopback included; make a token with "
            + "`receiptd token new --name NAME --scopes validate,ledger:read` and add its entry to api_tokens "
            + "(or RECEIPTD_API_TOKENS)"
    }

    static func parseAPITokens(_ value: JSONValue, source: String) throws(ConfigurationError) -> [APIToken] {
        func invalid(_ key: String, _ expectation: String) -> ConfigurationError {
            ConfigurationError(.invalidValue, "\(source): \(key): \(expectation)")
        }
        guard case .array(let entries) = value else { throw invalid("api_tokens", "expected an array of objects") }
        var tokens: [APIToken] = []
        for (index, entry) in entries.enumerated() {
            let prefix = "api_tokens[\(index)]"
            guard case .object(let members) = entry else { throw invalid(prefix, "expected an object") }
            var name: String?
            var digest: [UInt8]?
            var scopes: Set<APIScope>?
            for (key, member) in members {
                switch key {
                case "name":
                    guard case .string(let text) = member, APIToken.isValidName(text) else {
                        throw invalid("\(prefix).name", "expected 1 to 64 characters of 0-9 A-Z a-z . _ -")
                    }
                    name = text
                case "sha256":
                    guard case .string(let text) = member, let bytes = [UInt8](hexDigits: text.utf8), bytes.count == 32 else {
                        throw invalid(
                            "\(prefix).sha256", "expected the token's SHA-256 as 64 hex digits (receiptd token new)")
                    }
                    digest = bytes
                case "scopes":
                    guard case .array(let values) = member, !values.isEmpty else {
                        throw invalid("\(prefix).scopes", "expected a non-empty array of scopes")
                    }
                    var set = Set<APIScope>()
                    for (scopeIndex, value) in values.enumerated() {
                        guard case .string(let text) = value, let scope = APIScope(rawValue: text) else {
                            throw invalid(
                                "\(prefix).scopes[\(scopeIndex)]",
                                "expected one of \(APIScope.allCases.map(\.rawValue).joined(separator: ", "))")
                        }
                        set.insert(scope)
                    }
                    scopes = set
                default:
                    throw ConfigurationError(.unknownKey, "\(source): \(prefix).\(key): unknown key")
                }
            }
            guard let name else { throw invalid("\(prefix).name", "required") }
            guard let digest else { throw invalid("\(prefix).sha256", "required") }
            guard let scopes else { throw invalid("\(prefix).scopes", "required") }
            guard !tokens.contains(where: { $0.name == name }) else {
                throw invalid("\(prefix).name", "\(name) is configured twice")
            }
            guard !tokens.contains(where: { $0.sha256 == digest }) else {
                throw invalid("\(prefix).sha256", "the same token is configured twice")
            }
            tokens.append(APIToken(name: name, sha256: digest, scopes: scopes))
        }
        return tokens
    }

    static func parsePublicListener(_ value: JSONValue, source: String) throws(ConfigurationError) -> PublicListener {
        let expectation = "expected {\"host\": \"0.0.0.0\", \"port\": 8443}"
        guard case .object(let members) = value else {
            throw ConfigurationError(.invalidValue, "\(source): public: \(expectation)")
        }
        var host: String?
        var port: Int?
        for (key, member) in members {
            switch key {
            case "host":
                guard case .string(let text) = member, !text.isEmpty else {
                    throw ConfigurationError(.invalidValue, "\(source): public.host: expected a non-empty string")
                }
                host = text
            case "port":
                guard case .integer(let number) = member, let integer = Int(exactly: number),
                    (0...65_535).contains(integer)
                else {
                    throw ConfigurationError(
                        .invalidValue, "\(source): public.port: expected an integer from 0 to 65535")
                }
                port = integer
            default:
                throw ConfigurationError(.unknownKey, "\(source): public.\(key): unknown key (\(expectation))")
            }
        }
        guard let host, let port else { throw ConfigurationError(.invalidValue, "\(source): public: \(expectation)") }
        return PublicListener(host: host, port: port)
    }

    /// The HTTP server settings of the public listener: the main listener's limits on its own address.
    public func publicServerConfiguration(_ listener: PublicListener) -> HTTPServerConfiguration {
        var configuration = httpServerConfiguration
        configuration.host = listener.host
        configuration.port = listener.port
        return configuration
    }
}
