import Foundation
import HTTP1Server
import ReceiptEngine
import TestSupport
import Testing

@testable import ReceiptService
@testable import receiptd
import JSONText

/// A scratch folder per test, removed afterwards.
final class ScratchFolder {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "receiptd-config-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    @discardableResult
    func write(_ name: String, _ text: String) throws -> String {
        let file = (path as NSString).appendingPathComponent(name)
        try FileManager.default.createDirectory(
            atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        return file
    }
}

struct ServiceConfigurationTests {
    @Test func fullFile_setsEveryKey() throws {
        let json = """
            {
              "host": "0.0.0.0", "port": 9090,
              "apps": [
                {"bundle_id": "com.example.app", "versions": ["1.0", "1.1"], "shared_secret": "abc"},
                {"bundle_id": "com.example.other", "shared_secret": null}
              ],
              "environments": ["Production"],
              "max_receipt_bytes": 1000, "max_body_bytes": 2000, "max_header_bytes": 3000, "max_connections": 4,
              "header_read_timeout": 1.5, "body_read_timeout": 2, "idle_timeout": 3, "shutdown_grace_period": 4,
              "log_format": "json"
            }
            """
        let configuration = try ServiceConfiguration.parse(Array(json.utf8), path: "x.json", baseDirectory: ".")
        #expect(configuration.host == "0.0.0.0")
        #expect(configuration.port == 9090)
        #expect(configuration.apps == [
            .init(bundleID: "com.example.app", versions: ["1.0", "1.1"], sharedSecret: "abc"),
            .init(bundleID: "com.example.other"),
        ])
        #expect(configuration.environments == [.production])
        #expect(configuration.logFormat == .json)
        let server = configuration.httpServerConfiguration
        #expect(server.host == "0.0.0.0" && server.port == 9090)
        #expect(server.maxBodyBytes == 2000 && server.maxHeaderBytes == 3000 && server.maxConnections == 4)
        #expect(server.headerReadTimeout == 1.5 && server.bodyReadTimeout == 2)
        #expect(server.idleTimeout == 3 && server.shutdownGracePeriod == 4)
        let policy = configuration.makeValidationPolicy()
        #expect(policy.maximumReceiptBytes == 1000)
        #expect(policy.environments == [.production])
        #expect(policy.apps.map(\.bundleID) == ["com.example.app", "com.example.other"])
        #expect(policy.apps.first?.acceptedVersions == ["1.0", "1.1"])
        #expect(!configuration.startupNotes.contains { $0.contains("any bundle id") })
    }

    @Test func emptyObject_givesSafeDefaultsAndNotesAnyBundleID() throws {
        let configuration = try ServiceConfiguration.parse(Array("{}".utf8), path: "x.json", baseDirectory: ".")
        #expect(configuration.host == "127.0.0.1")
        #expect(configuration.port == 8080)
        #expect(configuration.environments == [.production, .sandbox])
        #expect(configuration.maxReceiptBytes == 4_194_304)
        #expect(configuration.maxBodyBytes == 8_388_608)
        #expect(configuration.maxHeaderBytes == 16_384)
        #expect(configuration.maxConnections == 1024)
        #expect(configuration.headerReadTimeout == 10 && configuration.bodyReadTimeout == 30)
        #expect(configuration.idleTimeout == 60 && configuration.shutdownGracePeriod == 10)
        #expect(configuration.logFormat == .text)
        #expect(configuration.startupNotes.contains("no apps configured: accepts any bundle id"))
    }

    @Test(arguments: [
        ("{\"hots\": \"x\"}", "config Config/x.json: hots: unknown key"),
        ("{\"apps\": [{\"bundle_id\": \"a\", \"secret\": \"x\"}]}", "config Config/x.json: apps[0].secret: unknown key"),
    ])
    func unknownKey_isRefusedNamingTheKey(json: String, message: String) {
        #expect {
            try ServiceConfiguration.parse(Array(json.utf8), path: "Config/x.json", baseDirectory: "Config")
        } throws: { error in
            let error = error as? ConfigurationError
            return error?.code == .unknownKey && error?.description == message
        }
    }

    @Test(arguments: [
        ("{\"apps\": [{\"bundle_id\": 5}]}", "config Config/x.json: apps[0].bundle_id: expected a string"),
        ("{\"apps\": [{\"versions\": []}]}", "config Config/x.json: apps[0].bundle_id: required"),
        ("{\"apps\": [{\"bundle_id\": \"a\", \"versions\": [1]}]}", "apps[0].versions[0]:"),
        ("{\"apps\": [{\"bundle_id\": \"a\", \"shared_secret\": 1}]}", "apps[0].shared_secret: expected a string or null"),
        ("{\"apps\": [{\"bundle_id\": \"a\"}, {\"bundle_id\": \"a\"}]}", "apps[1].bundle_id: a is configured twice"),
        ("{\"apps\": {}}", "apps: expected an array"),
        ("{\"port\": \"8080\"}", "port: expected an integer"),
        ("{\"port\": 70000}", "port: expected an integer from 0 to 65535"),
        ("{\"host\": \"\"}", "host: expected a non-empty string"),
        ("{\"environments\": [\"Staging\"]}", "environments[0]: expected \"Production\", \"Sandbox\" or \"Xcode\""),
        ("{\"environments\": []}", "environments: expected at least one environment"),
        ("{\"max_body_bytes\": 0}", "max_body_bytes: expected an integer of at least 1"),
        ("{\"max_connections\": 1.5}", "max_connections: expected an integer"),
        ("{\"idle_timeout\": -1}", "idle_timeout: expected seconds above 0"),
        ("{\"log_format\": \"xml\"}", "log_format: expected \"text\" or \"json\""),
        ("{\"trusted_roots\": \"a.pem\"}", "trusted_roots: expected an array of strings"),
        ("{\"store\": \"ledger.sqlite\"}", "store: expected {\"sqlite\": \"PATH\"} or {\"postgres\": \"CONNINFO\"}"),
        ("{\"store\": {\"sqlite\": \"a\", \"postgres\": \"b\"}}", "store: expected {\"sqlite\""),
        ("{\"store\": {\"sqlite\": \"\"}}", "store.sqlite: expected a non-empty string"),
        ("{\"apps\": [{\"bundle_id\": \"a\", \"app_apple_id\": \"123\"}]}", "apps[0].app_apple_id: expected a positive"),
    ])
    func badValue_isRefusedNamingTheKey(json: String, fragment: String) {
        #expect {
            try ServiceConfiguration.parse(Array(json.utf8), path: "Config/x.json", baseDirectory: "Config")
        } throws: { error in
            let error = error as? ConfigurationError
            return error?.code == .invalidValue && error?.description.contains(fragment) == true
                && error?.description.hasPrefix("config Config/x.json: ") == true
        }
    }

    @Test func store_sqliteResolvesAgainstTheConfigFolder_postgresIsKeptAsWritten() throws {
        let sqlite = try ServiceConfiguration.parse(
            Array(#"{"store": {"sqlite": "ledger/receiptd.sqlite"}, "apps": [{"bundle_id": "a", "app_apple_id": 42}]}"#.utf8),
            path: "Config/x.json", baseDirectory: "Config")
        #expect(sqlite.store == .sqlite(path: "Config/ledger/receiptd.sqlite"))
        #expect(sqlite.apps.first?.appAppleID == 42)
        let postgres = try ServiceConfiguration.parse(
            Array(#"{"store": {"postgres": "host=/tmp dbname=receiptd"}}"#.utf8), path: "x.json", baseDirectory: ".")
        #expect(postgres.store == .postgres(connectionString: "host=/tmp dbname=receiptd"))
        #expect(try ServiceConfiguration.parse(Array("{}".utf8), path: "x.json", baseDirectory: ".").store == nil)
    }

    @Test func storePostgresVariable_winsOverTheFile() throws {
        let folder = try ScratchFolder()
        let file = try folder.write("c.json", #"{"store": {"sqlite": "ledger.sqlite"}}"#)
        let configuration = try ServiceConfiguration.resolve(
            configPath: file, environment: ["RECEIPTD_STORE_POSTGRES": "host=/run/pg user=receiptd"],
            fileExists: { _ in true })
        #expect(configuration.store == .postgres(connectionString: "host=/run/pg user=receiptd"))
        let unset = try ServiceConfiguration.resolve(
            configPath: file, environment: ["RECEIPTD_STORE_POSTGRES": ""], fileExists: { _ in true })
        #expect(unset.store == .sqlite(path: (folder.path as NSString).appendingPathComponent("ledger.sqlite")))
    }

    @Test(arguments: ["", "{", "[]", "{\"a\": tru}"])
    func notAJSONObject_isInvalidJSON(text: String) {
        #expect {
            try ServiceConfiguration.parse(Array(text.utf8), path: "x.json", baseDirectory: ".")
        } throws: { error in
            (error as? ConfigurationError)?.code == .invalidJSON
        }
    }

    @Test func missingFile_namesTheFile() {
        #expect {
            try ServiceConfiguration.load(contentsOfFile: "/nonexistent/receiptd.json")
        } throws: { error in
            (error as? ConfigurationError)?.description == "config /nonexistent/receiptd.json: cannot read the file: No such file or directory"
        }
    }

    @Test func relativeTrustedRoot_resolvesAgainstTheConfigFolderAndNamesMissingFile() throws {
        let folder = try ScratchFolder()
        let file = try folder.write("conf/receiptd.json", "{\"trusted_roots\": [\"roots/missing.pem\"]}")
        #expect {
            try ServiceConfiguration.load(contentsOfFile: file)
        } throws: { error in
            let error = error as? ConfigurationError
            return error?.code == .unreadableTrustedRoot
                && error?.description.contains("\(folder.path)/conf/roots/missing.pem") == true
        }
    }

    @Test(.enabled(if: AppleFixtures.available, "../shared/fixtures/apple is not here"))
    func relativeTrustedRoot_loadsCertificateFromConfigFolder() throws {
        let folder = try ScratchFolder()
        let certificate = try AppleFixtures.bytes(AppleFixtures.storeKitCertificate)
        try FileManager.default.createDirectory(
            atPath: folder.path + "/conf/roots", withIntermediateDirectories: true)
        try Data(certificate).write(to: URL(fileURLWithPath: folder.path + "/conf/roots/storekit.cer"))
        let file = try folder.write("conf/receiptd.json", "{\"trusted_roots\": [\"roots/storekit.cer\"]}")
        let configuration = try ServiceConfiguration.load(contentsOfFile: file)
        #expect(configuration.trustedRootPaths == ["\(folder.path)/conf/roots/storekit.cer"])
        #expect(configuration.trustAnchors.count == 1)
        #expect(configuration.makeValidationPolicy().additionalTrustAnchors == configuration.trustAnchors)
    }

    @Test func trustedRootWithoutCertificate_isRefused() throws {
        let folder = try ScratchFolder()
        try folder.write("empty.pem", "not a certificate\n")
        let file = try folder.write("receiptd.json", "{\"trusted_roots\": [\"empty.pem\"]}")
        #expect {
            try ServiceConfiguration.load(contentsOfFile: file)
        } throws: { error in
            let error = error as? ConfigurationError
            return error?.code == .unreadableTrustedRoot && error?.description.contains("empty.pem") == true
        }
    }

    // MARK: Overrides

    @Test func environmentOverridesFile_andFlagsOverrideEnvironment() throws {
        let folder = try ScratchFolder()
        let file = try folder.write("receiptd.json", "{\"host\": \"10.0.0.1\", \"port\": 7000}")
        let fromEnvironment = try ServiceConfiguration.resolve(
            options: ServeOptions(),
            environment: ["RECEIPTD_CONFIG": file, "RECEIPTD_HOST": "0.0.0.0", "RECEIPTD_PORT": "7001"],
            fileExists: { _ in false })
        #expect(fromEnvironment.host == "0.0.0.0")
        #expect(fromEnvironment.port == 7001)
        #expect(fromEnvironment.sourcePath == file)

        let fromFlags = try ServiceConfiguration.resolve(
            options: parseCommand(Serve.self, ["--host", "::1", "--port=7002", "--log-format", "json"]).get().options,
            environment: ["RECEIPTD_CONFIG": file, "RECEIPTD_HOST": "0.0.0.0", "RECEIPTD_PORT": "7001"],
            fileExists: { _ in false })
        #expect(fromFlags.host == "::1")
        #expect(fromFlags.port == 7002)
        #expect(fromFlags.logFormat == .json)
    }

    @Test func configFlag_winsOverEnvironmentPath() throws {
        let folder = try ScratchFolder()
        let flagFile = try folder.write("flag.json", "{\"port\": 1111}")
        let envFile = try folder.write("env.json", "{\"port\": 2222}")
        let configuration = try ServiceConfiguration.resolve(
            options: parseCommand(Serve.self, ["--config", flagFile]).get().options, environment: ["RECEIPTD_CONFIG": envFile],
            fileExists: { _ in false })
        #expect(configuration.port == 1111)
    }

    @Test func missingDefaultFile_runsOnDefaults() throws {
        let configuration = try ServiceConfiguration.resolve(
            options: ServeOptions(), environment: [:], fileExists: { _ in false })
        #expect(configuration.sourcePath == nil)
        #expect(configuration.port == 8080)
    }

    /// `RECEIPTD_CONFIG=` clears the variable in shells and container specs; serve and verify share this resolver.
    @Test func emptyConfigVariable_isUnset_forEveryCommand() throws {
        let verify = try ServiceConfiguration.resolve(
            configPath: nil, environment: ["RECEIPTD_CONFIG": ""], fileExists: { _ in false })
        #expect(verify.sourcePath == nil)
        let serve = try ServiceConfiguration.resolve(
            options: ServeOptions(), environment: ["RECEIPTD_CONFIG": ""], fileExists: { _ in false })
        #expect(serve.sourcePath == nil)

        let folder = try ScratchFolder()
        let file = try folder.write("receiptd.json", "{\"port\": 3333}")
        let flagWins = try ServiceConfiguration.resolve(
            configPath: file, environment: ["RECEIPTD_CONFIG": ""], fileExists: { _ in false })
        #expect(flagWins.port == 3333)
    }

    @Test func namedConfigFile_mustExist_evenWhenTheDefaultDoes() {
        #expect {
            try ServiceConfiguration.resolve(
                configPath: nil, environment: ["RECEIPTD_CONFIG": "/nonexistent/receiptd.json"],
                fileExists: { _ in true })
        } throws: { error in
            (error as? ConfigurationError)?.code == .unreadableFile
        }
    }

    @Test(arguments: [["--port", "http"], ["--port"], ["--log-format", "xml"], ["--verbose"], ["--port=99999"]])
    func badFlag_isRefused(arguments: [String]) {
        #expect {
            try parseCommand(Serve.self, arguments).get()
        } throws: { error in
            (error as? ParseEnd)?.status == ExitStatus.usage
        }
    }

    @Test func badPortInEnvironment_namesTheVariable() {
        #expect {
            try ServiceConfiguration.resolve(
                options: ServeOptions(), environment: ["RECEIPTD_PORT": "eighty"], fileExists: { _ in false })
        } throws: { error in
            (error as? ConfigurationError)?.description.hasPrefix("RECEIPTD_PORT:") == true
        }
    }
}
