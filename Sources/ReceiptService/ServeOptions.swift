/// The flags of `receiptd serve`: `--config PATH`, `--host H`, `--port N`, `--log-format json|text`.
public struct ServeOptions: Sendable, Hashable {
    public var configPath: String?
    public var host: String?
    public var port: Int?
    public var logFormat: ServiceConfiguration.LogFormat?
    public var showHelp = false

    public static let usage = """
        usage: receiptd serve [--config PATH] [--host HOST] [--port PORT] [--log-format text|json]
          environment: RECEIPTD_CONFIG, RECEIPTD_HOST, RECEIPTD_PORT (flags win over them)
        """

    public init() {}

    /// Parses the arguments after `serve`; both `--port 8080` and `--port=8080` are accepted.
    public init(arguments: [String]) throws(ConfigurationError) {
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            var flag = argument
            var inlineValue: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                flag = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            func value() throws(ConfigurationError) -> String {
                if let inlineValue { return inlineValue }
                guard let next = remaining.popFirst() else {
                    throw ConfigurationError(.invalidOverride, "\(flag): missing value")
                }
                return next
            }
            switch flag {
            case "--config": configPath = try value()
            case "--host": host = try Self.host(try value(), source: flag)
            case "--port": port = try Self.port(try value(), source: flag)
            case "--log-format":
                let text = try value()
                guard let format = ServiceConfiguration.LogFormat(rawValue: text) else {
                    throw ConfigurationError(.invalidOverride, "\(flag): expected text or json, not \(text)")
                }
                logFormat = format
            case "-h", "--help": showHelp = true
            default:
                throw ConfigurationError(.invalidOverride, "unknown argument \(argument)")
            }
        }
    }

    static func host(_ text: String, source: String) throws(ConfigurationError) -> String {
        guard !text.isEmpty else { throw ConfigurationError(.invalidOverride, "\(source): expected a host") }
        return text
    }

    static func port(_ text: String, source: String) throws(ConfigurationError) -> Int {
        guard let port = Int(text), (0...65_535).contains(port) else {
            throw ConfigurationError(.invalidOverride, "\(source): expected a port from 0 to 65535, not \(text)")
        }
        return port
    }
}

extension ServiceConfiguration {
    /// The configuration `serve` runs with: the file (`--config`, else `RECEIPTD_CONFIG`, else
    /// `Config/receiptd.json`), then `RECEIPTD_HOST` / `RECEIPTD_PORT`, then flags.
    ///
    /// A missing default file means defaults, so that `receiptd serve` works out of the box; a file named by flag or
    /// environment must exist.
    public static func resolve(
        options: ServeOptions, environment: [String: String], fileExists: (String) -> Bool
    ) throws(ConfigurationError) -> ServiceConfiguration {
        var configuration: ServiceConfiguration
        if let path = options.configPath ?? environment["RECEIPTD_CONFIG"].flatMap({ $0.isEmpty ? nil : $0 }) {
            configuration = try load(contentsOfFile: path)
        } else if fileExists(defaultPath) {
            configuration = try load(contentsOfFile: defaultPath)
        } else {
            configuration = ServiceConfiguration()
        }
        if let host = environment["RECEIPTD_HOST"], !host.isEmpty {
            configuration.host = host
        }
        if let port = environment["RECEIPTD_PORT"], !port.isEmpty {
            configuration.port = try ServeOptions.port(port, source: "RECEIPTD_PORT")
        }
        if let host = options.host { configuration.host = host }
        if let port = options.port { configuration.port = port }
        if let logFormat = options.logFormat { configuration.logFormat = logFormat }
        return configuration
    }
}
