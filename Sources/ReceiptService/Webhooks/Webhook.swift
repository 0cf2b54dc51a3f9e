/// One entry of `webhooks` (issue 25): where events go, which ones, and the secret that signs them.
public struct Webhook: Sendable, Hashable {
    /// `name`: unique; names the webhook in the outbox, the metrics and the command line.
    public var name: String
    /// `url`: https, or http to a loopback host when `allow_http` is true.
    public var url: String
    /// `secret_file`, resolved against the configuration file's folder.
    public var secretFile: String
    /// The file's text trimmed of surrounding whitespace, read at start.
    public var secret: WebhookSecret
    /// `events`: the event types sent; nil (`["*"]` or absent) sends all.
    public var events: Set<String>?
    /// `apps`: bundle ids; nil sends every app's events.
    public var apps: Set<String>?
    /// `environments`: `Production`, `Sandbox`…; nil sends all.
    public var environments: Set<String>?
    /// `timeout`: seconds one try may take, connection included.
    public var timeout: Double
    /// `allow_http`: plain http, for a loopback receiver in tests only.
    public var allowHTTP: Bool
    /// `ca_file`: extra trusted certificates (PEM) beside the system store.
    public var caFile: String?

    public init(
        name: String, url: String, secretFile: String, secret: WebhookSecret, events: Set<String>? = nil,
        apps: Set<String>? = nil, environments: Set<String>? = nil, timeout: Double = 10, allowHTTP: Bool = false,
        caFile: String? = nil
    ) {
        self.name = name
        self.url = url
        self.secretFile = secretFile
        self.secret = secret
        self.events = events
        self.apps = apps
        self.environments = environments
        self.timeout = timeout
        self.allowHTTP = allowHTTP
        self.caFile = caFile
    }

    /// Whether this webhook wants an event of `type` about `bundleID` in `environment`. An event whose app or
    /// environment is unknown passes only a webhook that does not filter on it.
    public func wants(type: String, bundleID: String?, environment: String?) -> Bool {
        if let events, !events.contains(type) { return false }
        if let apps, !(bundleID.map(apps.contains) ?? false) { return false }
        if let environments, !(environment.map(environments.contains) ?? false) { return false }
        return true
    }
}

/// A signing secret: its bytes never appear in a description, a log line or an error.
public struct WebhookSecret: Sendable, Hashable, CustomStringConvertible {
    public let bytes: [UInt8]
    public init(_ bytes: [UInt8]) { self.bytes = bytes }
    public var description: String { "<secret>" }
}
