import Foundation
import TestSupport
import Testing

@testable import ReceiptService

/// `webhooks` and `webhook_retention_days` (issue 25): every key read, every mistake refused with its key named.
struct WebhookConfigurationTests {
    let folder: String

    init() throws {
        folder = Scratch.newPath("webhook-config")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data("  whsec_abc \n".utf8).write(to: URL(fileURLWithPath: "\(folder)/secret"))
        try Data(" \n\t".utf8).write(to: URL(fileURLWithPath: "\(folder)/blank"))
        try Data("-----BEGIN CERTIFICATE-----\n".utf8).write(to: URL(fileURLWithPath: "\(folder)/ca.pem"))
    }

    func parse(_ json: String) throws(ConfigurationError) -> ServiceConfiguration {
        try ServiceConfiguration.parse(Array(json.utf8), path: "t.json", baseDirectory: folder)
    }

    /// The error a one-webhook config with `members` added to a valid entry gets.
    func error(webhook members: String) -> ConfigurationError? {
        let base = #""name": "backend", "url": "https://hooks.example.com/receiptd", "secret_file": "secret""#
        let json = #"{"webhooks": [{"# + base + (members.isEmpty ? "" : ", " + members) + "}]}"
        do {
            _ = try parse(json)
            return nil
        } catch {
            return error
        }
    }

    @Test func defaults_noWebhooks_thirtyDaysOfRetention() throws {
        let configuration = try parse("{}")
        #expect(configuration.webhooks.isEmpty)
        #expect(configuration.webhookRetentionDays == 30)
    }

    @Test func everyKey_isRead_andTheSecretTrimmed() throws {
        let configuration = try parse(
            """
            {"webhooks": [{"name": "backend", "url": "http://127.0.0.1:9000/hook", "secret_file": "secret",
                           "events": ["RENEWAL", "REFUND"], "apps": ["com.example.app"], "environments": ["Sandbox"],
                           "timeout": 2.5, "allow_http": true, "ca_file": "ca.pem"},
                          {"name": "audit.log-2", "url": "https://audit.example.com/", "secret_file": "\(folder)/secret",
                           "events": ["*"]}],
             "webhook_retention_days": 7}
            """)
        #expect(configuration.webhookRetentionDays == 7)
        #expect(configuration.webhooks.count == 2)
        let first = try #require(configuration.webhooks.first)
        #expect(first.name == "backend")
        #expect(first.url == "http://127.0.0.1:9000/hook")
        #expect(first.secretFile == "\(folder)/secret")
        #expect(first.secret.bytes == Array("whsec_abc".utf8))
        #expect(first.events == ["RENEWAL", "REFUND"])
        #expect(first.apps == ["com.example.app"])
        #expect(first.environments == ["Sandbox"])
        #expect(first.timeout == 2.5)
        #expect(first.allowHTTP)
        #expect(first.caFile == "\(folder)/ca.pem")
        let second = configuration.webhooks[1]
        #expect(second.events == nil)
        #expect(second.apps == nil)
        #expect(second.environments == nil)
        #expect(second.timeout == 10)
        #expect(!second.allowHTTP)
        #expect(second.caFile == nil)
        #expect(second.wants(type: "RENEWAL", bundleID: nil, environment: nil))
        #expect(!first.wants(type: "RENEWAL", bundleID: "com.example.app", environment: "Production"))
    }

    @Test func secret_isNeverPrinted() throws {
        let configuration = try parse(#"{"webhooks": [{"name": "a", "url": "https://x.example", "secret_file": "secret"}]}"#)
        let webhook = try #require(configuration.webhooks.first)
        #expect(!"\(webhook)".contains("whsec_abc"))
    }

    @Test(arguments: [
        // (members added to a valid entry, the key named, the code)
        (#""name": "has space""#, "webhooks[0].name", "invalid_value"),
        (#""name": """#, "webhooks[0].name", "invalid_value"),
        (#""name": "\#(String(repeating: "a", count: 65))""#, "webhooks[0].name", "invalid_value"),
        (#""url": "ftp://x.example""#, "webhooks[0].url", "invalid_value"),
        (#""url": "http://hooks.example.com/", "allow_http": true"#, "webhooks[0].url", "invalid_value"),
        (#""url": "http://127.0.0.1:9/""#, "webhooks[0].url", "invalid_value"),
        (#""url": "https://user:pw@x.example/""#, "webhooks[0].url", "invalid_value"),
        (#""url": "https:///path""#, "webhooks[0].url", "invalid_value"),
        (#""url": 7"#, "webhooks[0].url", "invalid_value"),
        (#""secret_file": "missing""#, "webhooks[0].secret_file", "invalid_value"),
        (#""secret_file": "blank""#, "webhooks[0].secret_file", "invalid_value"),
        (#""events": ["RENEWED"]"#, "webhooks[0].events[0]", "invalid_value"),
        (#""events": []"#, "webhooks[0].events", "invalid_value"),
        (#""events": "*""#, "webhooks[0].events", "invalid_value"),
        (#""apps": [""]"#, "webhooks[0].apps[0]", "invalid_value"),
        (#""environments": ["Staging"]"#, "webhooks[0].environments[0]", "invalid_value"),
        (#""timeout": 0"#, "webhooks[0].timeout", "invalid_value"),
        (#""timeout": 56"#, "webhooks[0].timeout", "invalid_value"),
        (#""allow_http": "yes""#, "webhooks[0].allow_http", "invalid_value"),
        (#""ca_file": "no-such.pem""#, "webhooks[0].ca_file", "invalid_value"),
        (#""retries": 3"#, "webhooks[0].retries", "unknown_key"),
    ])
    func eachBadKey_isRefused_namingIt(members: String, key: String, code: String) {
        let error = self.error(webhook: members)
        #expect(error?.code.rawValue == code, "\(members)")
        #expect(error?.message.contains(" \(key): ") == true, "\(members): \(error?.message ?? "accepted")")
    }

    @Test func requiredKeys_areNamedWhenMissing() {
        for (json, key) in [
            (#"{"webhooks": [{"url": "https://x.example", "secret_file": "secret"}]}"#, "webhooks[0].name"),
            (#"{"webhooks": [{"name": "a", "secret_file": "secret"}]}"#, "webhooks[0].url"),
            (#"{"webhooks": [{"name": "a", "url": "https://x.example"}]}"#, "webhooks[0].secret_file"),
        ] {
            #expect(throws: ConfigurationError(.invalidValue, "")) { try parse(json) }
            do {
                _ = try parse(json)
            } catch {
                #expect(error.message.contains(" \(key): "), "\(error.message)")
            }
        }
    }

    @Test func duplicateNames_areRefused() {
        let json = """
            {"webhooks": [{"name": "a", "url": "https://x.example", "secret_file": "secret"},
                          {"name": "a", "url": "https://y.example", "secret_file": "secret"}]}
            """
        do {
            _ = try parse(json)
            Issue.record("a name configured twice was accepted")
        } catch {
            #expect(error.code == .invalidValue)
            #expect(error.message.contains(" webhooks[1].name: "))
        }
    }

    @Test func secretFileErrors_nameTheFile_neverItsContents() {
        let error = self.error(webhook: #""secret_file": "blank""#)
        #expect(error?.message.contains("\(folder)/blank") == true)
        let unreadable = self.error(webhook: #""secret_file": "missing""#)
        #expect(unreadable?.message.contains("\(folder)/missing") == true)
    }

    @Test func loopbackHTTP_withAllowHTTP_isAccepted() throws {
        for url in ["http://127.0.0.1:8/x", "http://localhost/", "http://[::1]:9000/hook"] {
            #expect(self.error(webhook: #""url": "\#(url)", "allow_http": true"#) == nil, "\(url)")
        }
    }

    @Test(arguments: [#""webhooks": {}"#, #""webhooks": [7]"#, #""webhook_retention_days": 0"#,
                      #""webhook_retention_days": "30""#])
    func badShapes_areInvalidValues(member: String) {
        #expect(throws: ConfigurationError(.invalidValue, "")) { try parse("{\(member)}") }
    }

    @Test func configREADMEsWebhooksExample_isAcceptedAsWritten() throws {
        let readme = try String(contentsOfFile: #filePath.replacingOccurrences(
            of: "Tests/ReceiptServiceTests/WebhookConfigurationTests.swift", with: "Config/README.md"), encoding: .utf8)
        let marker = "<!-- webhooks example -->\n```json\n"
        let start = try #require(readme.range(of: marker)).upperBound
        let end = try #require(readme.range(of: "\n```", range: start..<readme.endIndex)).lowerBound
        try FileManager.default.createDirectory(atPath: "\(folder)/secrets", withIntermediateDirectories: true)
        for name in ["backend", "local"] {
            try Data("whsec_\(name)\n".utf8).write(to: URL(fileURLWithPath: "\(folder)/secrets/\(name).secret"))
        }
        let configuration = try parse(String(readme[start..<end]))
        #expect(configuration.webhooks.map(\.name) == ["backend", "local"])
        #expect(configuration.webhooks.last?.allowHTTP == true)
    }
}
