#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif
public import HTTP1Server
public import ReceiptEngine
public import StoreKitJWS
public import Ledger
import JSONText
internal import CryptoFloor
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// Why receiptd cannot start with the configuration it was given. `description` is the one line printed to stderr,
/// e.g. `config Config/x.json: apps[0].bundle_id: expected a string`.
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The configuration file cannot be read.
        public static let unreadableFile = Code(rawValue: "unreadable_file")
        /// The file is not JSON, or its top level is not an object.
        public static let invalidJSON = Code(rawValue: "invalid_json")
        /// A key receiptd does not know; usually a typo that would otherwise silently keep a default.
        public static let unknownKey = Code(rawValue: "unknown_key")
        /// A value of the wrong type or out of range, or a required key missing.
        public static let invalidValue = Code(rawValue: "invalid_value")
        /// A `trusted_roots` file is missing, unreadable, or holds no certificate.
        public static let unreadableTrustedRoot = Code(rawValue: "unreadable_trusted_root")
        /// An app's `server_api.private_key_file` is missing, unreadable, or not a P-256 private key.
        public static let invalidServerAPIKey = Code(rawValue: "server_api_key_invalid")
        /// A bad command-line flag or environment override.
        public static let invalidOverride = Code(rawValue: "invalid_override")
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    public static func == (lhs: ConfigurationError, rhs: ConfigurationError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

/// Everything `receiptd serve` needs, read from a JSON file (`Config/receiptd.json` by default) and overridden by
/// `RECEIPTD_HOST` / `RECEIPTD_PORT` and then by command-line flags.
///
/// The keys are a contract: `host`, `port`, `trusted_roots`, `apps` (`bundle_id`, `versions`, `shared_secret`),
/// `environments`, `max_receipt_bytes`, `max_body_bytes`, `max_header_bytes`, `max_connections`,
/// `header_read_timeout`, `body_read_timeout`, `idle_timeout`, `shutdown_grace_period`, `log_format`, `store`
/// (`sqlite` or `postgres`), `store_timeout`, `apps[].app_apple_id`, `api_tokens` (`name`, `sha256`, `scopes`),
/// `public` (`host`, `port`), and per app the accounts' rules (issue 24): `apps[].entitlements` (names to product
/// ids), `apps[].non_renewing_durations` (product ids to ISO 8601 periods), `apps[].restore_behavior`, and the webhooks
/// (issue 25): `webhooks` (`name`, `url`, `secret_file`, `events`, `apps`, `environments`, `timeout`, `allow_http`,
/// `ca_file`) and `webhook_retention_days`. Unknown keys
/// are refused so that a typo never silently leaves a default in force.
public struct ServiceConfiguration: Sendable {
    /// An app whose receipts are accepted.
    public struct App: Sendable, Hashable {
        public var bundleID: String
        /// Accepted application versions; empty accepts any.
        public var versions: [String]
        /// When set, `/verifyReceipt` answers 21004 unless the request's `password` equals it.
        public var sharedSecret: String?
        /// The App Store's numeric id of the app: Production StoreKit 2 data must carry it when set.
        public var appAppleID: Int64?
        /// The App Store Server API key of this app (`server_api`); nil when receiptd does not talk to Apple for it.
        public var serverAPI: AppServerAPIKey?
        /// `entitlements`: what each entitlement name is granted by, as product ids. A product may grant several.
        public var entitlements: [String: [String]]
        /// `non_renewing_durations`: how long a non-renewing subscription grants from its purchase date, by product
        /// id; a non-renewing product without one grants until it is revoked.
        public var nonRenewingDurations: [String: ISO8601Period]
        /// `restore_behavior`: what linking an original transaction another account owns does.
        public var restoreBehavior: RestoreBehavior
        /// `consumption.delivery_status_from_claims`: with no answer from the backend, a claimed consumable's refund
        /// question is answered `DELIVERED` (consent is never invented: the backend still has to give it).
        public var consumptionDeliveryStatusFromClaims = false
        /// `write_app_account_tokens`: a claim of a purchase made without an app account token sets one at Apple
        /// (Set App Account Token), so Apple's later notifications name the account.
        public var writeAppAccountTokens = false
        /// `finish_on_claim`: a granted claim finishes the transaction with Apple (Finish Transaction) in the
        /// background.
        public var finishOnClaim = false

        public init(
            bundleID: String, versions: [String] = [], sharedSecret: String? = nil, appAppleID: Int64? = nil,
            entitlements: [String: [String]] = [:], nonRenewingDurations: [String: ISO8601Period] = [:],
            restoreBehavior: RestoreBehavior = .transfer
        ) {
            self.bundleID = bundleID
            self.versions = versions
            self.sharedSecret = sharedSecret
            self.appAppleID = appAppleID
            self.entitlements = entitlements
            self.nonRenewingDurations = nonRenewingDurations
            self.restoreBehavior = restoreBehavior
        }
    }

    /// Where the ledger lives (`store`); nil keeps receiptd stateless.
    public enum Store: Sendable, Hashable {
        /// A SQLite file, resolved against the configuration file's folder: one replica only.
        case sqlite(path: String)
        /// A libpq connection string: shared by every replica.
        case postgres(connectionString: String)
    }

    public enum LogFormat: String, Sendable, Hashable, CaseIterable {
        case text, json
    }

    public static let defaultPath = "Config/receiptd.json"

    public var host = "127.0.0.1"
    public var port = 8080
    /// The `trusted_roots` files, resolved against the configuration file's folder.
    public var trustedRootPaths: [String] = []
    /// The certificates read from `trustedRootPaths`.
    public var trustAnchors: [TrustAnchor] = []
    public var apps: [App] = []
    public var environments: [ReceiptEnvironment] = [.production, .sandbox]
    public var maxReceiptBytes = 4_194_304
    public var maxBodyBytes = 8_388_608
    public var maxHeaderBytes = 16_384
    public var maxConnections = 1024
    public var headerReadTimeout: Double = 10
    public var bodyReadTimeout: Double = 30
    public var idleTimeout: Double = 60
    public var shutdownGracePeriod: Double = 10
    public var logFormat = LogFormat.text
    public var store: Store?
    /// The longest a request waits on the ledger's database (a connection, a lock, a statement), in seconds.
    public var storeTimeout = LedgerConfiguration.defaultTimeout
    /// `api_tokens` (Authorization.swift); empty: guarded routes answer loopback peers only.
    public var apiTokens: [APIToken] = []
    /// `public`: the second, internet-facing listener; nil opens none.
    public var publicListener: PublicListener?
    /// The top-level `server_api` settings (ServerAPIConfiguration.swift).
    public var serverAPI = ServerAPISettings()
    /// `webhooks`: where events go (issue 25); empty sends none and stores no events.
    public var webhooks: [Webhook] = []
    /// `webhook_retention_days`: delivered events are pruned after this many days; pending and failed never are.
    public var webhookRetentionDays = 30
    /// The file this was read from, as given; nil when running on defaults.
    public var sourcePath: String?

    /// The defaults, as if the file were `{}`.
    public init() {}

    /// The app configured for a bundle id.
    public func app(bundleID: String) -> App? { apps.first { $0.bundleID == bundleID } }

    /// Lines worth printing at startup, such as a warning that any bundle id is accepted.
    public var startupNotes: [String] {
        var notes: [String] = []
        if sourcePath == nil { notes.append("no configuration file; running on defaults") }
        if apps.isEmpty { notes.append("no apps configured: accepts any bundle id") }
        return notes
    }

    public func makeValidationPolicy() -> ValidationPolicy {
        ValidationPolicy(
            additionalTrustAnchors: trustAnchors,
            apps: apps.map { AppPolicy(bundleID: $0.bundleID, acceptedVersions: $0.versions, appAppleID: $0.appAppleID) },
            environments: Set(environments),
            maximumReceiptBytes: maxReceiptBytes)
    }

    public func makeValidator() -> ReceiptValidator { ReceiptValidator(policy: makeValidationPolicy()) }

    /// The ledger `store` names (opened on first use), linking purchases to accounts under the apps'
    /// `restore_behavior` and entitlement rules; a stateless one without `store`.
    public func makeLedger() -> PurchaseLedger {
        let (timeout, linkRules, outbox, appleCalls) = (storeTimeout, accountLinkRules, outboxRules, appleCallRules)
        switch store {
        case nil: return .none
        case .sqlite(let path)?:
            return PurchaseLedger(opening: { () throws(LedgerError) in
                // The folder is part of the default config (git-ignored): make it rather than fail the first run.
                let folder = path.deletingLastPathComponent
                if !folder.isEmpty { try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
                return try openLedger(
                    .sqlite(path: path), timeout: timeout, linkRules: linkRules, outbox: outbox, appleCalls: appleCalls)
            }, isExclusiveWriter: true, storeTimeout: timeout)
        case .postgres(let connectionString)?:
            return PurchaseLedger(opening: { () throws(LedgerError) in
                try openLedger(
                    .postgres(connectionString: connectionString), timeout: timeout, linkRules: linkRules, outbox: outbox,
                    appleCalls: appleCalls)
            }, storeTimeout: timeout)
        }
    }

    /// What `store` is, for logs: the SQLite path, or only "postgres" (the connection string may hold a password).
    public var storeDescription: String {
        switch store {
        case nil: "none"
        case .sqlite(let path)?: "sqlite:\(path)"
        case .postgres?: "postgres"
        }
    }

    /// StoreKit 2 signed data is checked against the same policy as receipts: one trust model, one vocabulary.
    public func makeJWSVerifier() -> JWSVerifier { JWSVerifier(policy: makeValidationPolicy()) }

    public var httpServerConfiguration: HTTPServerConfiguration {
        var configuration = HTTPServerConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.maxBodyBytes = maxBodyBytes
        configuration.maxHeaderBytes = maxHeaderBytes
        configuration.maxConnections = maxConnections
        configuration.headerReadTimeout = headerReadTimeout
        configuration.bodyReadTimeout = bodyReadTimeout
        configuration.idleTimeout = idleTimeout
        configuration.shutdownGracePeriod = shutdownGracePeriod
        // Routes are CPU-bound and never wait on anything; a typical receipt (4-10 KB, base64 in JSON up to ~14 KB)
        // validates in about 0.1 ms, so handling it where it was read costs other connections less than the two
        // thread hand-offs it saves. Larger receipts (up to tens of milliseconds) go to the handler queue.
        configuration.inlineHandlingMaxBodyBytes = 16 * 1024
        return configuration
    }
}

// MARK: - Loading

extension ServiceConfiguration {
    /// The configuration every command runs with: the file named by `configPath` (`--config`), else by
    /// `RECEIPTD_CONFIG` when it is not empty, else `Config/receiptd.json` when present, else the defaults.
    ///
    /// An empty variable counts as unset, since `RECEIPTD_CONFIG=` is how shells and container specs clear one. A
    /// missing default file means defaults, so that `receiptd serve` works out of the box; a file named by flag or
    /// variable must exist.
    public static func resolve(
        configPath: String?, environment: [String: String], fileExists: (String) -> Bool
    ) throws(ConfigurationError) -> ServiceConfiguration {
        var configuration: ServiceConfiguration
        if let path = configPath ?? environment["RECEIPTD_CONFIG"].flatMap({ $0.isEmpty ? nil : $0 }) {
            configuration = try load(contentsOfFile: path)
        } else if fileExists(defaultPath) {
            configuration = try load(contentsOfFile: defaultPath)
        } else {
            configuration = ServiceConfiguration()
        }
        // The connection string carries a password: an environment variable (a Kubernetes Secret) keeps it out of
        // the file, and wins over it.
        if let connectionString = environment["RECEIPTD_STORE_POSTGRES"], !connectionString.isEmpty {
            configuration.store = .postgres(connectionString: connectionString)
        }
        // Same reason: the image and Kubernetes keep the token entries in a Secret.
        if let tokens = environment["RECEIPTD_API_TOKENS"], !tokens.isEmpty {
            let value: JSONValue
            do {
                value = try JSONValue(parsing: Array(tokens.utf8))
            } catch {
                throw ConfigurationError(.invalidOverride, "RECEIPTD_API_TOKENS: \(error)")
            }
            configuration.apiTokens = try parseAPITokens(value, source: "RECEIPTD_API_TOKENS")
        }
        return configuration
    }

    /// Reads a configuration file; relative `trusted_roots` resolve against the file's folder.
    public static func load(contentsOfFile path: String) throws(ConfigurationError) -> ServiceConfiguration {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(.unreadableFile, "config \(path): cannot read the file: \(unreadableReason(path))")
        }
        let folder = path.deletingLastPathComponent
        return try parse([UInt8](data), path: path, baseDirectory: folder.isEmpty ? "." : folder)
    }

    /// Reads configuration JSON; `path` only names the source in messages.
    public static func parse(
        _ bytes: [UInt8], path: String, baseDirectory: String
    ) throws(ConfigurationError) -> ServiceConfiguration {
        let reader = ConfigurationReader(path: path)
        let root: JSONValue
        do {
            root = try JSONValue(parsing: bytes)
        } catch {
            throw ConfigurationError(.invalidJSON, "config \(path): \(error)")
        }
        guard case .object(let members) = root else {
            throw ConfigurationError(.invalidJSON, "config \(path): expected a JSON object at the top level")
        }

        var configuration = ServiceConfiguration()
        configuration.sourcePath = path
        for (key, value) in members {
            switch key {
            case "host": configuration.host = try reader.nonEmptyString(value, key)
            case "port": configuration.port = try reader.integer(value, key, in: 0...65_535)
            case "trusted_roots":
                configuration.trustedRootPaths = try reader.strings(value, key).map { file in
                    file.hasPrefix("/") ? file : baseDirectory.appendingPathComponent(file)
                }
            case "apps": configuration.apps = try reader.apps(value, baseDirectory: baseDirectory)
            case "environments": configuration.environments = try reader.environments(value)
            case "max_receipt_bytes": configuration.maxReceiptBytes = try reader.integer(value, key, in: 1...Int.max)
            case "max_body_bytes": configuration.maxBodyBytes = try reader.integer(value, key, in: 1...Int.max)
            case "max_header_bytes": configuration.maxHeaderBytes = try reader.integer(value, key, in: 1...Int.max)
            case "max_connections": configuration.maxConnections = try reader.integer(value, key, in: 1...Int.max)
            case "header_read_timeout": configuration.headerReadTimeout = try reader.seconds(value, key)
            case "body_read_timeout": configuration.bodyReadTimeout = try reader.seconds(value, key)
            case "idle_timeout": configuration.idleTimeout = try reader.seconds(value, key)
            case "shutdown_grace_period": configuration.shutdownGracePeriod = try reader.seconds(value, key)
            case "log_format":
                guard case .string(let text) = value, let format = LogFormat(rawValue: text) else {
                    throw reader.invalid(key, "expected \"text\" or \"json\"")
                }
                configuration.logFormat = format
            case "store": configuration.store = try reader.store(value, baseDirectory: baseDirectory)
            case "store_timeout": configuration.storeTimeout = try reader.seconds(value, key)
            case "api_tokens": configuration.apiTokens = try parseAPITokens(value, source: "config \(path)")
            case "public": configuration.publicListener = try parsePublicListener(value, source: "config \(path)")
            case "server_api":
                configuration.serverAPI = try reader.serverAPISettings(value, baseDirectory: baseDirectory)
            case "webhooks": configuration.webhooks = try reader.webhooks(value, baseDirectory: baseDirectory)
            case "webhook_retention_days":
                configuration.webhookRetentionDays = try reader.integer(value, key, in: 1...36_500)
            default:
                throw ConfigurationError(.unknownKey, "config \(path): \(key): unknown key")
            }
        }
        configuration.trustAnchors = try loadTrustAnchors(configuration.trustedRootPaths, configPath: path)
        return configuration
    }

    private static func loadTrustAnchors(
        _ paths: [String], configPath: String
    ) throws(ConfigurationError) -> [TrustAnchor] {
        var anchors: [TrustAnchor] = []
        for file in paths {
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw ConfigurationError(
                    .unreadableTrustedRoot, "config \(configPath): trusted_roots: cannot read \(file)")
            }
            do {
                let loaded = try TrustAnchor.load(contentsOfFile: file)
                guard !loaded.isEmpty else {
                    throw ConfigurationError(
                        .unreadableTrustedRoot, "config \(configPath): trusted_roots: \(file): no certificate found")
                }
                anchors.append(contentsOf: loaded)
            } catch let error as ConfigurationError {
                throw error
            } catch {
                throw ConfigurationError(
                    .unreadableTrustedRoot, "config \(configPath): trusted_roots: \(file): \(error)")
            }
        }
        return anchors
    }
}

/// Type checks that name the offending key, so every message points at one line of the file.
struct ConfigurationReader {
    let path: String

    func invalid(_ key: String, _ expectation: String) -> ConfigurationError {
        ConfigurationError(.invalidValue, "config \(path): \(key): \(expectation)")
    }

    func nonEmptyString(_ value: JSONValue, _ key: String) throws(ConfigurationError) -> String {
        guard case .string(let text) = value, !text.isEmpty else { throw invalid(key, "expected a non-empty string") }
        return text
    }

    func bool(_ value: JSONValue, _ key: String) throws(ConfigurationError) -> Bool {
        guard case .bool(let flag) = value else { throw invalid(key, "expected true or false") }
        return flag
    }

    func integer(_ value: JSONValue, _ key: String, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        guard case .integer(let number) = value else { throw invalid(key, "expected an integer") }
        guard let integer = Int(exactly: number), range.contains(integer) else {
            throw invalid(
                key,
                range.upperBound == Int.max
                    ? "expected an integer of at least \(range.lowerBound)"
                    : "expected an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return integer
    }

    func seconds(_ value: JSONValue, _ key: String) throws(ConfigurationError) -> Double {
        let seconds: Double
        switch value {
        case .integer(let number): seconds = Double(number)
        case .number(let number): seconds = number
        default: throw invalid(key, "expected a number of seconds")
        }
        guard seconds > 0, seconds <= 86_400 else { throw invalid(key, "expected seconds above 0, at most 86400") }
        return seconds
    }

    func strings(_ value: JSONValue, _ key: String) throws(ConfigurationError) -> [String] {
        guard case .array(let values) = value else { throw invalid(key, "expected an array of strings") }
        var strings: [String] = []
        for (index, element) in values.enumerated() {
            guard case .string(let text) = element, !text.isEmpty else {
                throw invalid("\(key)[\(index)]", "expected a non-empty string")
            }
            strings.append(text)
        }
        return strings
    }

    func store(_ value: JSONValue, baseDirectory: String) throws(ConfigurationError) -> ServiceConfiguration.Store {
        let expectation = "expected {\"sqlite\": \"PATH\"} or {\"postgres\": \"CONNINFO\"}"
        guard case .object(let members) = value, members.count == 1 else { throw invalid("store", expectation) }
        let (key, member) = members[0]
        switch key {
        case "sqlite":
            let file = try nonEmptyString(member, "store.sqlite")
            return .sqlite(path: file.hasPrefix("/") ? file : baseDirectory.appendingPathComponent(file))
        case "postgres":
            return .postgres(connectionString: try nonEmptyString(member, "store.postgres"))
        default:
            throw ConfigurationError(.unknownKey, "config \(path): store.\(key): unknown key (\(expectation))")
        }
    }

    func environments(_ value: JSONValue) throws(ConfigurationError) -> [ReceiptEnvironment] {
        let names = try strings(value, "environments")
        var environments: [ReceiptEnvironment] = []
        for (index, name) in names.enumerated() {
            guard let environment = ReceiptEnvironment(rawValue: name) else {
                throw invalid("environments[\(index)]", "expected \"Production\", \"Sandbox\" or \"Xcode\"")
            }
            if !environments.contains(environment) { environments.append(environment) }
        }
        guard !environments.isEmpty else { throw invalid("environments", "expected at least one environment") }
        return environments
    }

    func apps(_ value: JSONValue, baseDirectory: String) throws(ConfigurationError) -> [ServiceConfiguration.App] {
        guard case .array(let values) = value else { throw invalid("apps", "expected an array of objects") }
        var apps: [ServiceConfiguration.App] = []
        for (index, element) in values.enumerated() {
            let prefix = "apps[\(index)]"
            guard case .object(let members) = element else { throw invalid(prefix, "expected an object") }
            var bundleID: String?
            var app = ServiceConfiguration.App(bundleID: "")
            for (key, value) in members {
                switch key {
                case "bundle_id":
                    guard case .string(let text) = value else { throw invalid("\(prefix).bundle_id", "expected a string") }
                    guard !text.isEmpty else { throw invalid("\(prefix).bundle_id", "expected a non-empty string") }
                    bundleID = text
                case "versions":
                    app.versions = try strings(value, "\(prefix).versions")
                case "shared_secret":
                    switch value {
                    case .null: app.sharedSecret = nil
                    case .string(let text): app.sharedSecret = text.isEmpty ? nil : text
                    default: throw invalid("\(prefix).shared_secret", "expected a string or null")
                    }
                case "app_apple_id":
                    switch value {
                    case .null: app.appAppleID = nil
                    case .integer(let number) where number > 0: app.appAppleID = number
                    default: throw invalid("\(prefix).app_apple_id", "expected a positive integer or null")
                    }
                case "server_api":
                    app.serverAPI = try appServerAPIKey(value, "\(prefix).server_api", baseDirectory: baseDirectory)
                case "entitlements":
                    app.entitlements = try entitlements(value, "\(prefix).entitlements")
                case "non_renewing_durations":
                    app.nonRenewingDurations = try durations(value, "\(prefix).non_renewing_durations")
                case "restore_behavior":
                    guard case .string(let text) = value, let behavior = RestoreBehavior(rawValue: text) else {
                        throw invalid(
                            "\(prefix).restore_behavior",
                            "expected " + RestoreBehavior.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", "))
                    }
                    app.restoreBehavior = behavior
                case "consumption":
                    guard case .object(let settings) = value else {
                        throw invalid("\(prefix).consumption", "expected an object")
                    }
                    for (setting, flag) in settings {
                        switch setting {
                        case "delivery_status_from_claims":
                            app.consumptionDeliveryStatusFromClaims = try bool(flag, "\(prefix).consumption.\(setting)")
                        default:
                            throw ConfigurationError(.unknownKey, "config \(path): \(prefix).consumption.\(setting): unknown key")
                        }
                    }
                case "write_app_account_tokens":
                    app.writeAppAccountTokens = try bool(value, "\(prefix).write_app_account_tokens")
                case "finish_on_claim":
                    app.finishOnClaim = try bool(value, "\(prefix).finish_on_claim")
                default:
                    throw ConfigurationError(.unknownKey, "config \(path): \(prefix).\(key): unknown key")
                }
            }
            guard let bundleID else { throw invalid("\(prefix).bundle_id", "required") }
            guard !apps.contains(where: { $0.bundleID == bundleID }) else {
                throw invalid("\(prefix).bundle_id", "\(bundleID) is configured twice")
            }
            app.bundleID = bundleID
            apps.append(app)
        }
        return apps
    }
}

// MARK: - Accounts (issue 24)

extension ConfigurationReader {
    /// `{"pro": ["com.example.pro.monthly", …], …}`: names of 1 to 64 of `[0-9A-Za-z._-]`, each to a non-empty array
    /// of product ids.
    func entitlements(_ value: JSONValue, _ key: String) throws(ConfigurationError) -> [String: [String]] {
        guard case .object(let members) = value else {
            throw invalid(key, "expected an object of entitlement names to arrays of product ids")
        }
        var entitlements: [String: [String]] = [:]
        for (name, products) in members {
            let memberKey = "\(key)[\(Self.quoted(name))]"
            guard Self.isEntitlementName(name) else {
                throw invalid(memberKey, "entitlement names are 1 to 64 of [0-9A-Za-z._-]")
            }
            guard entitlements[name] == nil else { throw invalid(memberKey, "named twice") }
            guard case .array(let elements) = products, !elements.isEmpty else {
                throw invalid(memberKey, "expected a non-empty array of product ids")
            }
            var ids: [String] = []
            for (index, element) in elements.enumerated() {
                guard case .string(let id) = element, !id.isEmpty else {
                    throw invalid("\(memberKey)[\(index)]", "expected a product id (a non-empty string)")
                }
                if !ids.contains(id) { ids.append(id) }
            }
            entitlements[name] = ids
        }
        return entitlements
    }

    /// `{"com.example.pass.month": "P1M", …}`: product ids to ISO 8601 periods.
    func durations(_ value: JSONValue, _ key: String) throws(ConfigurationError) -> [String: ISO8601Period] {
        guard case .object(let members) = value else {
            throw invalid(key, "expected an object of product ids to ISO 8601 periods such as \"P1M\"")
        }
        var durations: [String: ISO8601Period] = [:]
        for (product, member) in members {
            let memberKey = "\(key)[\(Self.quoted(product))]"
            guard !product.isEmpty else { throw invalid(memberKey, "product ids are non-empty strings") }
            guard durations[product] == nil else { throw invalid(memberKey, "named twice") }
            guard case .string(let text) = member, let period = ISO8601Period.parse(text) else {
                throw invalid(
                    memberKey,
                    "expected an ISO 8601 period PnYnMnWnDTnHnMnS of whole numbers up to "
                        + "\(ISO8601Period.largestComponent), such as \"P1M\", \"P1Y\" or \"PT72H\"")
            }
            durations[product] = period
        }
        return durations
    }

    static func isEntitlementName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count) && name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default: false
            }
        }
    }

    /// A key as JSON writes it, so that one with quotes or control characters still names itself on one line.
    static func quoted(_ key: String) -> String { String(decoding: JSONValue.string(key).serialized(), as: UTF8.self) }
}

/// Why a file cannot be read, in errno's words ("No such file or directory", "Permission denied", "Is a directory"):
/// Foundation's read only says that it failed.
private func unreadableReason(_ path: String) -> String {
    var status = stat()
    if stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR { return String(cString: strerror(EISDIR)) }
    guard access(path, R_OK) != 0 else { return "it changed while being read" }
    return String(cString: strerror(errno))
}
