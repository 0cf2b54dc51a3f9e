internal import Synchronization
internal import CryptoFloor
internal import JSONText

/// The credentials of one app's App Store Server API key: what App Store Connect shows under Users and Access →
/// Integrations, and the `.p8` private key it lets you download once. Never logged: `description` names the key id.
public struct AppStoreConnectKey: Sendable, CustomStringConvertible {
    public let keyID: String
    public let issuerID: String
    public let bundleID: String
    let signingKey: PrivateKey

    /// Loads the key from its PEM (`BEGIN PRIVATE KEY`, PKCS#8, EC P-256); the error never quotes the key.
    public init(keyID: String, issuerID: String, bundleID: String, privateKeyPEM: [UInt8]) throws(AppStoreServerAPIError) {
        do {
            signingKey = try PrivateKey(es256PEM: privateKeyPEM)
        } catch {
            throw AppStoreServerAPIError(
                code: .keyInvalid,
                message: "the private key is not an unencrypted PKCS#8 EC P-256 key (the .p8 file from App Store Connect)")
        }
        self.keyID = keyID
        self.issuerID = issuerID
        self.bundleID = bundleID
    }

    public var description: String { "App Store Connect key \(keyID) for \(bundleID)" }
}

/// Signs the bearer tokens the App Store Server API wants and reuses one until shortly before it expires: signing
/// costs little, but one token per request would also mean one per retry and per page.
public final class AppStoreConnectTokenSigner: Sendable {
    /// How long a token is valid: Apple allows up to 60 minutes; its own libraries (Swift, Python) sign `exp` 5
    /// minutes ahead, and a held-out check compares with them.
    public static let lifetimeSeconds: Int64 = 300
    /// A token with less than this left is replaced, so one never expires in flight or on a slow retry.
    public static let renewalMarginSeconds: Int64 = 120

    public let key: AppStoreConnectKey
    private let cached = Mutex<(token: String, expiry: Int64)?>(nil)

    public init(key: AppStoreConnectKey) { self.key = key }

    /// A token valid at `now` (seconds since 1970) for at least `renewalMarginSeconds` more.
    public func token(now: Int64) throws(AppStoreServerAPIError) -> String {
        if let reusable = cached.withLock({ current in
            current.flatMap { $0.expiry - Self.renewalMarginSeconds > now && $0.expiry - Self.lifetimeSeconds <= now ? $0.token : nil }
        }) {
            return reusable
        }
        let expiry = now + Self.lifetimeSeconds
        let fresh = try Self.sign(key: key, issuedAt: now, expiry: expiry)
        cached.withLock { $0 = (fresh, expiry) }
        return fresh
    }

    static func sign(key: AppStoreConnectKey, issuedAt: Int64, expiry: Int64) throws(AppStoreServerAPIError) -> String {
        try key.compactJWS(
            claims: [
                ("iss", .string(key.issuerID)), ("iat", .integer(issuedAt)), ("exp", .integer(expiry)),
                ("aud", .string("appstoreconnect-v1")), ("bid", .string(key.bundleID)),
            ],
            purpose: "the App Store Server API token")
    }
}

extension AppStoreConnectKey {
    /// A compact JWS of `claims` signed ES256 with this key, its header `alg`, `kid` (the key id) and `typ` JWT: the
    /// shape of every token Apple wants from an app's server.
    func compactJWS(
        claims: [(key: String, value: JSONValue)], purpose: String
    ) throws(AppStoreServerAPIError) -> String {
        let header: JSONValue = .object([("alg", .string("ES256")), ("kid", .string(keyID)), ("typ", .string("JWT"))])
        // RFC 7515 §2: base64url without padding.
        let signingInput =
            Base64.encode(header.serialized(), alphabet: .url) + "."
            + Base64.encode(JSONValue.object(claims).serialized(), alphabet: .url)
        do {
            let signature = try signingKey.signES256(Array(signingInput.utf8))
            return signingInput + "." + Base64.encode(signature, alphabet: .url)
        } catch {
            throw AppStoreServerAPIError(code: .keyInvalid, message: "signing \(purpose) failed: \(error)")
        }
    }
}
