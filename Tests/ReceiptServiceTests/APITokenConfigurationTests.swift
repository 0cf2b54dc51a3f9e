import CryptoFloor
import Foundation
import HTTP1Server
import JSONText
import Testing

@testable import ReceiptService
@testable import receiptd

/// `api_tokens`, `public`, `RECEIPTD_API_TOKENS` and `receiptd token new`.
struct APITokenConfigurationTests {
    static let digest = String(repeating: "ab", count: 32)

    func parse(_ text: String) throws(ConfigurationError) -> ServiceConfiguration {
        try ServiceConfiguration.parse(Array(text.utf8), path: "test.json", baseDirectory: ".")
    }

    @Test func tokensAndPublicListener_areRead() throws {
        let configuration = try parse(
            """
            {"api_tokens": [{"name": "backend", "sha256": "\(Self.digest.uppercased())", "scopes": ["validate", "ledger:read", "claim", "metrics", "support", "accounts:write", "offers:sign"]}],
             "public": {"host": "0.0.0.0", "port": 8443}}
            """)
        #expect(configuration.apiTokens.map(\.name) == ["backend"])
        #expect(configuration.apiTokens.first?.sha256 == [UInt8](repeating: 0xAB, count: 32))
        #expect(configuration.apiTokens.first?.scopes == Set(APIScope.allCases))
        #expect(configuration.publicListener == ServiceConfiguration.PublicListener(host: "0.0.0.0", port: 8443))
    }

    @Test(arguments: [
        (#"{"api_tokens": {}}"#, ConfigurationError.Code.invalidValue),
        (#"{"api_tokens": [{"name": "a", "sha256": "abc", "scopes": ["validate"]}]}"#, .invalidValue),
        (#"{"api_tokens": [{"name": "a b", "sha256": "DIGEST", "scopes": ["validate"]}]}"#, .invalidValue),
        (#"{"api_tokens": [{"name": "a", "sha256": "DIGEST", "scopes": []}]}"#, .invalidValue),
        (#"{"api_tokens": [{"name": "a", "sha256": "DIGEST", "scopes": ["admin"]}]}"#, .invalidValue),
        (#"{"api_tokens": [{"name": "a", "sha256": "DIGEST"}]}"#, .invalidValue),
        (#"{"api_tokens": [{"name": "a", "sha256": "DIGEST", "scopes": ["claim"], "token": "x"}]}"#, .unknownKey),
        (#"{"api_tokens": [{"name": "a", "sha256": "DIGEST", "scopes": ["claim"]}, {"name": "a", "sha256": "DIGEST", "scopes": ["claim"]}]}"#, .invalidValue),
        (#"{"public": {"port": 8443}}"#, .invalidValue),
        (#"{"public": {"host": "0.0.0.0", "port": 70000}}"#, .invalidValue),
        (#"{"public": {"host": "0.0.0.0", "port": 8443, "tls": true}}"#, .unknownKey),
    ])
    func mistakes_areRefusedWithTheirCode(text: String, code: ConfigurationError.Code) {
        #expect(throws: ConfigurationError(code, "")) {
            try parse(text.replacingOccurrences(of: "DIGEST", with: Self.digest))
        }
    }

    @Test func environmentTokens_winOverTheFile() throws {
        let entry = #"[{"name": "from-secret", "sha256": "\#(Self.digest)", "scopes": ["metrics"]}]"#
        let configuration = try ServiceConfiguration.resolve(
            configPath: nil, environment: ["RECEIPTD_API_TOKENS": entry], fileExists: { _ in false })
        #expect(configuration.apiTokens.map(\.name) == ["from-secret"])
        #expect(throws: ConfigurationError(.invalidOverride, "")) {
            try ServiceConfiguration.resolve(
                configPath: nil, environment: ["RECEIPTD_API_TOKENS": "[{"], fileExists: { _ in false })
        }
    }

    @Test func warning_onlyWithoutTokensOffLoopback() {
        var configuration = ServiceConfiguration()
        #expect(configuration.authorizationWarning == nil)
        configuration.host = "0.0.0.0"
        #expect(configuration.authorizationWarning?.contains("receiptd token new") == true)
        configuration.apiTokens = [APIToken(name: "a", token: "t", scopes: [.metrics])]
        #expect(configuration.authorizationWarning == nil)
        for host in ["127.0.0.1", "::1", "localhost", "127.0.0.2"] {
            var loopback = ServiceConfiguration()
            loopback.host = host
            #expect(loopback.authorizationWarning == nil)
        }
    }

    // MARK: - receiptd token new

    func newToken(_ arguments: [String]) -> (status: Int32, output: [String], errors: [String]) {
        var output: [String] = []
        var errors: [String] = []
        switch parseCommand(NewToken.self, arguments) {
        case .success(let command):
            let status = command.execute(output: { output.append($0) }, randomBytes: systemRandomBytes)
            return (status, output, errors)
        case .failure(let end):
            if end.status == ExitStatus.success { output.append(end.message) } else { errors.append(end.message) }
            return (end.status, output, errors)
        }
    }

    @Test func tokenNew_printsAFreshTokenAndItsEntry() throws {
        let first = newToken(["--name", "backend", "--scopes", "validate,ledger:read"])
        #expect(first.status == 0)
        #expect(first.output.count == 2)
        let token = try #require(first.output.first?.split(separator: " ").last.map(String.init))
        #expect(first.output[0] == "token: \(token)")
        #expect(token.utf8.count == 43)
        #expect(token.utf8.allSatisfy { PathID.isAllowed($0) && $0 != UInt8(ascii: ".") })
        let entryText = try #require(first.output.last?.split(separator: " ", maxSplits: 2).last.map(String.init))
        #expect(first.output[1] == "api_tokens entry: \(entryText)")
        let configuration = try parse(#"{"api_tokens": [\#(entryText)]}"#)
        let entry = try #require(configuration.apiTokens.first)
        #expect(entry == APIToken(name: "backend", token: token, scopes: [.validate, .ledgerRead]))

        let routes = makeRoutes(configuration)
        var request = HTTPRequestFor.metrics
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        #expect(routes.handle(request, on: .main).json?["error"]?["scope"]?.stringValue == "metrics")

        let second = newToken(["--name", "backend", "--scopes", "validate,ledger:read"])
        #expect(second.output.first != first.output.first)
    }

    @Test func base64URL_matchesRFC4648() {
        #expect(Base64.encode(Array("f".utf8), alphabet: .url) == "Zg")
        #expect(Base64.encode(Array("foob".utf8), alphabet: .url) == "Zm9vYg")
        #expect(Base64.encode(Array("foobar".utf8), alphabet: .url) == "Zm9vYmFy")
        #expect(Base64.encode([0xFB, 0xFF], alphabet: .url) == "-_8")
    }

    @Test(arguments: [
        ["--name", "backend"], ["--scopes", "validate"], ["--name", "a b", "--scopes", "validate"],
        ["--name", "backend", "--scopes", "validate,admin"], ["--name", "backend", "--scopes", ""],
        ["--name", "backend", "--scopes", "validate", "--token", "x"], ["--name", "backend", "--scopes", "claim", "extra"],
    ])
    func tokenNew_usageMistakes_exitTwo(arguments: [String]) {
        let result = newToken(arguments)
        #expect(result.status == 2)
        #expect(result.output.isEmpty)
    }

    @Test func tokenHelp_listsOnlyItsFlags() {
        let result = newToken(["--help"])
        #expect(result.status == 0)
        let help = result.output.joined(separator: "\n")
        let flags = Set(help.split(whereSeparator: { " \n[],".contains($0) }).filter { $0.hasPrefix("--") })
        #expect(flags == ["--name", "--scopes", "--help"])
    }
}

private enum HTTPRequestFor {
    static let metrics = get("/metrics")
}
