public import AppStoreServerAPI
import CryptoFloor
import JSONText
import ReceiptEngine

#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif

/// One app's App Store Server API key (`apps[].server_api`): `key_id`, `issuer_id`, `private_key_file` (the `.p8`,
/// resolved against the configuration file's folder). The key itself is read only when a client is made, and never
/// printed.
public struct AppServerAPIKey: Sendable, Hashable {
    public var keyID: String
    public var issuerID: String
    public var privateKeyFile: String

    public init(keyID: String, issuerID: String, privateKeyFile: String) {
        self.keyID = keyID
        self.issuerID = issuerID
        self.privateKeyFile = privateKeyFile
    }
}

/// The top-level `server_api` settings, shared by every app's client.
public struct ServerAPISettings: Sendable, Hashable {
    /// Apple's recommended hosts; the older `api.storekit.itunes.apple.com` names still work.
    public var productionURL = "https://api.storekit.apple.com"
    public var sandboxURL = "https://api.storekit-sandbox.apple.com"
    /// An extra CA file (PEM) trusted besides the system's, for tests and TLS-inspecting proxies.
    public var caFile: String?
    public var timeout: Double = 10
    public var syncInterval: Double = 3600
    public var backfill = true
    public var maxRequestsPerSecond: Double = 10
    /// How long a request that waits on Apple (an order lookup, `/lookup`) may wait, every retry included.
    public var requestDeadline: Double = 5
    /// How many requests may wait on Apple at once; the rest are answered 503 `server_api_busy` at once.
    public var maxConcurrentRequests = 8

    public init() {}

    public func url(for environment: AppStoreEnvironment) -> String {
        environment == .production ? productionURL : sandboxURL
    }
}

extension ServiceConfiguration {
    /// A client for `bundleID` in `environment`, or why there is none: `server_api_not_configured` without a key in
    /// that app's settings, `server_api_key_invalid` when the `.p8` cannot be read or is not an ES256 key.
    public func makeServerAPIClient(
        bundleID: String, environment: AppStoreEnvironment, observer: AppStoreServerAPIClient.RequestObserver? = nil
    ) throws(AppStoreServerAPIError) -> AppStoreServerAPIClient {
        guard let settings = app(bundleID: bundleID)?.serverAPI else {
            throw AppStoreServerAPIError(
                code: .notConfigured, message: "no server_api key (key_id, issuer_id, private_key_file) configured for \(bundleID)")
        }
        let key = try Self.serverAPIKey(settings, bundleID: bundleID)
        return AppStoreServerAPIClient(
            baseURL: serverAPI.url(for: environment), environment: environment, key: key, caFile: serverAPI.caFile,
            timeoutSeconds: Int(serverAPI.timeout.rounded(.up)), maximumRequestsPerSecond: serverAPI.maxRequestsPerSecond,
            observer: observer)
    }

    static func serverAPIKey(
        _ settings: AppServerAPIKey, bundleID: String
    ) throws(AppStoreServerAPIError) -> AppStoreConnectKey {
        guard let pem = FileManager.default.contents(atPath: settings.privateKeyFile) else {
            throw AppStoreServerAPIError(
                code: .keyInvalid, message: "\(bundleID): server_api.private_key_file: cannot read \(settings.privateKeyFile)")
        }
        do {
            return try AppStoreConnectKey(
                keyID: settings.keyID, issuerID: settings.issuerID, bundleID: bundleID, privateKeyPEM: [UInt8](pem))
        } catch {
            throw AppStoreServerAPIError(
                code: .keyInvalid,
                message: "\(bundleID): server_api.private_key_file: \(settings.privateKeyFile): \(error.message)")
        }
    }

    /// Reads every app's `.p8` as `serve` needs it: a key that is missing, unreadable or not a P-256 private key stops
    /// the server at start with the file named (`server_api_key_invalid`), rather than failing each lookup later.
    public func checkServerAPIKeys() throws(ConfigurationError) {
        for app in serverAPIApps {
            guard let settings = app.serverAPI else { continue }
            do {
                _ = try Self.serverAPIKey(settings, bundleID: app.bundleID)
            } catch {
                throw ConfigurationError(
                    .invalidServerAPIKey, "config \(sourcePath ?? "(none)"): apps \(error.message)")
            }
        }
    }

    /// The apps with a `server_api` key, in configuration order.
    public var serverAPIApps: [App] { apps.filter { $0.serverAPI != nil } }
}

extension ConfigurationReader {
    func serverAPISettings(_ value: JSONValue, baseDirectory: String) throws(ConfigurationError) -> ServerAPISettings {
        guard case .object(let members) = value else { throw invalid("server_api", "expected an object") }
        var settings = ServerAPISettings()
        for (key, member) in members {
            let name = "server_api.\(key)"
            switch key {
            case "production_url": settings.productionURL = try httpsURL(member, name)
            case "sandbox_url": settings.sandboxURL = try httpsURL(member, name)
            case "ca_file":
                if case .null = member {
                    settings.caFile = nil
                } else {
                    let file = try nonEmptyString(member, name)
                    settings.caFile = file.hasPrefix("/") ? file : baseDirectory.appendingPathComponent(file)
                }
            case "timeout": settings.timeout = try seconds(member, name)
            case "sync_interval": settings.syncInterval = try seconds(member, name)
            case "backfill":
                guard case .bool(let flag) = member else { throw invalid(name, "expected true or false") }
                settings.backfill = flag
            case "request_deadline": settings.requestDeadline = try seconds(member, name)
            case "max_concurrent_requests": settings.maxConcurrentRequests = try integer(member, name, in: 1...4096)
            case "max_requests_per_second":
                switch member {
                case .integer(let number) where number > 0: settings.maxRequestsPerSecond = Double(number)
                case .number(let number) where number > 0 && number.isFinite: settings.maxRequestsPerSecond = number
                default: throw invalid(name, "expected a number above 0")
                }
            default:
                throw ConfigurationError(.unknownKey, "config \(path): \(name): unknown key")
            }
        }
        return settings
    }

    func appServerAPIKey(_ value: JSONValue, _ prefix: String, baseDirectory: String) throws(ConfigurationError) -> AppServerAPIKey? {
        if case .null = value { return nil }
        guard case .object(let members) = value else { throw invalid(prefix, "expected an object or null") }
        var keyID: String?
        var issuerID: String?
        var file: String?
        for (key, member) in members {
            switch key {
            case "key_id": keyID = try nonEmptyString(member, "\(prefix).key_id")
            case "issuer_id": issuerID = try nonEmptyString(member, "\(prefix).issuer_id")
            case "private_key_file":
                let path = try nonEmptyString(member, "\(prefix).private_key_file")
                file = path.hasPrefix("/") ? path : baseDirectory.appendingPathComponent(path)
            default:
                throw ConfigurationError(.unknownKey, "config \(path): \(prefix).\(key): unknown key")
            }
        }
        guard let keyID else { throw invalid("\(prefix).key_id", "required") }
        guard let issuerID else { throw invalid("\(prefix).issuer_id", "required") }
        guard let file else { throw invalid("\(prefix).private_key_file", "required") }
        return AppServerAPIKey(keyID: keyID, issuerID: issuerID, privateKeyFile: file)
    }

    private func httpsURL(_ value: JSONValue, _ key: String) throws(ConfigurationError) -> String {
        let text = try nonEmptyString(value, key)
        guard text.lowercased().hasPrefix("https://"), text.count > "https://".count else {
            throw invalid(key, "expected an https:// URL")
        }
        return text
    }
}
