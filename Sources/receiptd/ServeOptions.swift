import ArgumentParser
import ReceiptService

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The flags of `receiptd serve`: `--config PATH`, `--host H`, `--port N`, `--log-format json|text`.
struct ServeOptions: Sendable {
    var configPath: String?
    var host: String?
    var port: Int?
    var logFormat: ServiceConfiguration.LogFormat?

    init() {}

    init(configPath: String?, host: String?, port: Int?, logFormat: ServiceConfiguration.LogFormat?) {
        self.configPath = configPath
        self.host = host
        self.port = port
        self.logFormat = logFormat
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

/// `receiptd serve`.
struct Serve: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serves the HTTP API until SIGTERM or SIGINT, then drains and exits 0.",
        discussion: """
            Environment: RECEIPTD_CONFIG (the config file when --config is not given), RECEIPTD_HOST, RECEIPTD_PORT \
            (flags win over them), RECEIPTD_API_TOKENS (api_tokens entries, replacing the file's), \
            RECEIPTD_STORE_POSTGRES (a PostgreSQL ledger, winning over the file's store); HTTPS_PROXY and NO_PROXY \
            for calls to Apple's App Store Server API.
            Config: --config, else RECEIPTD_CONFIG when not empty, else Config/receiptd.json when present, else \
            defaults. --port 0 picks a free port; the address is in the "listening" log line.
            Exit status: 0 after a clean shutdown; 1 a bad configuration, a start-up check that fails (see \
            receiptd check-config) or a port that cannot be bound; 2 a usage error.
            """)

    @OptionGroup var config: ConfigOption

    @Option(
        help: ArgumentHelp("The address to listen on (default: the config's host).", valueName: "host"),
        transform: { text in try parsed(text, expecting: "a host") { $0.isEmpty ? nil : $0 } })
    var host: String?

    @Option(
        help: ArgumentHelp("The port to listen on, 0 to 65535 (default: the config's port).", valueName: "port"),
        transform: { text in try parsed(text, expecting: "a port from 0 to 65535", ServeOptions.port) })
    var port: Int?

    @Option(
        help: ArgumentHelp("How log lines are written: text or json.", valueName: "format"),
        transform: { text in try parsed(text, expecting: "text or json", ServiceConfiguration.LogFormat.init(rawValue:))
        })
    var logFormat: ServiceConfiguration.LogFormat?

    var options: ServeOptions { ServeOptions(configPath: config.config, host: host, port: port, logFormat: logFormat) }

    func execute() -> Int32 {
        serveWithQueuedLog(options)
    }
}
