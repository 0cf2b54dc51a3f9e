import AppStoreServerAPI
import Testing

@testable import ReceiptService

struct ServerAPIConfigurationTests {
    @Test func serverAPI_defaultsToApplesHosts() throws {
        let configuration = try ServiceConfiguration.parse(Array("{}".utf8), path: "t.json", baseDirectory: "/etc/receiptd")
        #expect(configuration.serverAPI.productionURL == "https://api.storekit.apple.com")
        #expect(configuration.serverAPI.sandboxURL == "https://api.storekit-sandbox.apple.com")
        #expect(configuration.serverAPI.caFile == nil)
        #expect(configuration.serverAPI.timeout == 10)
        #expect(configuration.serverAPI.syncInterval == 3600)
        #expect(configuration.serverAPI.backfill)
        #expect(configuration.serverAPI.maxRequestsPerSecond == 10)
    }

    @Test func serverAPI_readsEveryKey_andResolvesFilesAgainstTheConfigFolder() throws {
        let json = """
            {"server_api": {"production_url": "https://localhost:8443", "sandbox_url": "https://localhost:8444",
              "ca_file": "ca.pem", "timeout": 3, "sync_interval": 60, "backfill": false, "max_requests_per_second": 2},
             "apps": [{"bundle_id": "com.example.app",
                       "server_api": {"key_id": "ABC123DEFG", "issuer_id": "57246542-96fe-1a63-e053-0824d011072a",
                                      "private_key_file": "keys/AuthKey.p8"}}]}
            """
        let configuration = try ServiceConfiguration.parse(Array(json.utf8), path: "t.json", baseDirectory: "/etc/receiptd")
        #expect(configuration.serverAPI.url(for: .production) == "https://localhost:8443")
        #expect(configuration.serverAPI.url(for: .sandbox) == "https://localhost:8444")
        #expect(configuration.serverAPI.caFile == "/etc/receiptd/ca.pem")
        #expect(configuration.serverAPI.timeout == 3)
        #expect(configuration.serverAPI.syncInterval == 60)
        #expect(!configuration.serverAPI.backfill)
        #expect(configuration.serverAPI.maxRequestsPerSecond == 2)
        let key = try #require(configuration.apps.first?.serverAPI)
        #expect(key == AppServerAPIKey(keyID: "ABC123DEFG", issuerID: "57246542-96fe-1a63-e053-0824d011072a", privateKeyFile: "/etc/receiptd/keys/AuthKey.p8"))
    }

    @Test(arguments: [
        (#"{"server_api": {"production_url": "http://api.storekit.apple.com"}}"#, ConfigurationError.Code.invalidValue),
        (#"{"server_api": {"timeout": 0}}"#, .invalidValue),
        (#"{"server_api": {"retries": 3}}"#, .unknownKey),
        (#"{"apps": [{"bundle_id": "a", "server_api": {"key_id": "K", "issuer_id": "I"}}]}"#, .invalidValue),
        (#"{"apps": [{"bundle_id": "a", "server_api": {"key_id": "K", "issuer_id": "I", "private_key_file": "k", "key": "x"}}]}"#, .unknownKey),
    ])
    func serverAPI_badSettings_areRefusedWithTheirCode(json: String, code: ConfigurationError.Code) {
        #expect {
            try ServiceConfiguration.parse(Array(json.utf8), path: "t.json", baseDirectory: ".")
        } throws: { error in
            (error as? ConfigurationError)?.code == code
        }
    }

    @Test func client_withoutAKey_isNotConfigured() throws {
        let configuration = try ServiceConfiguration.parse(Array(#"{"apps": [{"bundle_id": "a"}]}"#.utf8), path: "t.json", baseDirectory: ".")
        #expect {
            try configuration.makeServerAPIClient(bundleID: "a", environment: .production)
        } throws: { error in
            (error as? AppStoreServerAPIError)?.code == .notConfigured
        }
    }
}
