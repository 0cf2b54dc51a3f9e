import ReceiptService

/// The flags of `receiptd serve`: `--config PATH`, `--host H`, `--port N`, `--log-format json|text`.
struct ServeOptions: Sendable {
    var configPath: String?
    var host: String?
    var port: Int?
    var logFormat: ServiceConfiguration.LogFormat?
    var showHelp = false

    static let usage = """
        usage: receiptd serve [--config PATH] [--host HOST] [--port PORT] [--log-format text|json]
          environment: RECEIPTD_CONFIG, RECEIPTD_HOST, RECEIPTD_PORT (flags win over them), RECEIPTD_STORE_POSTGRES
            (replaces the file's "store"), RECEIPTD_API_TOKENS (replaces its "api_tokens"); HTTPS_PROXY and NO_PROXY
            for calls to Apple's App Store Server API
          config: --config, else RECEIPTD_CONFIG when not empty, else Config/receiptd.json when present, else defaults
          --port 0 picks a free port; the address is in the "listening" log line. SIGTERM or SIGINT drains and exits 0.
        """

    init() {}

    /// Parses the arguments after `serve`; both `--port 8080` and `--port=8080` are accepted, and a repeated flag
    /// keeps its last value.
    init(arguments: [String]) throws(ConfigurationError) {
        do throws(UsageError) {
            let reader = try ArgumentReader(arguments, options: ["--config", "--host", "--port", "--log-format"])
            try reader.expectPositional(atMost: 0)
            showHelp = reader.wantsHelp
            configPath = reader.value("--config")
            host = try reader.value("--host", expecting: "a host") { $0.isEmpty ? nil : $0 }
            port = try reader.value("--port", expecting: "a port from 0 to 65535", Self.port)
            logFormat = try reader.value("--log-format", expecting: "text or json") {
                ServiceConfiguration.LogFormat(rawValue: $0)
            }
        } catch {
            throw ConfigurationError(.invalidOverride, error.description)
        }
    }

    static func port(_ text: String) -> Int? {
        guard let port = Int(text), (0...65_535).contains(port) else { return nil }
        return port
    }
}

extension ServiceConfiguration {
    /// The configuration `serve` runs with: the file `resolve(configPath:environment:fileExists:)` picks, then
    /// `RECEIPTD_HOST` / `RECEIPTD_PORT`, then flags.
    static func resolve(
        options: ServeOptions, environment: [String: String], fileExists: (String) -> Bool
    ) throws(ConfigurationError) -> ServiceConfiguration {
        var configuration = try resolve(
            configPath: options.configPath, environment: environment, fileExists: fileExists)
        if let host = environment["RECEIPTD_HOST"], !host.isEmpty {
            configuration.host = host
        }
        if let text = environment["RECEIPTD_PORT"], !text.isEmpty {
            guard let port = ServeOptions.port(text) else {
                throw ConfigurationError(
                    .invalidOverride, "RECEIPTD_PORT: expected a port from 0 to 65535, not \(text)")
            }
            configuration.port = port
        }
        if let host = options.host { configuration.host = host }
        if let port = options.port { configuration.port = port }
        if let logFormat = options.logFormat { configuration.logFormat = logFormat }
        return configuration
    }
}
