import AppStoreServerAPI
import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService

/// A granted claim's calls reach Apple in the background: once Apple is back, as Apple's library sends them.
struct AppleCallWorkerTests {
    static func routes(_ fake: FakeAppStoreServer, duties: String) throws -> ReceiptRoutes {
        let folder = fake.directory + "/receiptd"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data(JWSPKI.standard.rootAnchor.derEncoded).write(to: URL(fileURLWithPath: folder + "/root.cer"))
        let config = """
            {"trusted_roots": ["root.cer"], "store": {"sqlite": "ledger.sqlite"},
             "apps": [{"bundle_id": "\(JWSPKI.bundleID)", "app_apple_id": \(JWSPKI.appAppleID), \(duties)
                       "server_api": {"key_id": "\(FakeAppStoreServer.keyID)", "issuer_id": "\(FakeAppStoreServer.issuerID)",
                                      "private_key_file": "../key.p8"}}],
             "server_api": {"production_url": "\(fake.url)", "sandbox_url": "\(fake.url)", "ca_file": "../ca.pem"}}
            """
        try Data(config.utf8).write(to: URL(fileURLWithPath: folder + "/receiptd.json"))
        let configuration = try ServiceConfiguration.load(contentsOfFile: folder + "/receiptd.json")
        let ledger = configuration.makeLedger()
        if let failure = try ledger.openNow() { throw failure }
        return ReceiptRoutes(
            configuration: configuration, validator: configuration.makeValidator(),
            jwsVerifier: configuration.makeJWSVerifier(), ledger: ledger, metrics: ServiceMetrics())
    }

    static func purchase(_ id: String, token: String? = nil) -> TransactionFacts {
        TransactionFacts(
            transactionID: id, originalTransactionID: id, productID: "coins.100", bundleID: JWSPKI.bundleID,
            type: "Consumable", purchaseDate: 1_700_000_000_000, environment: "Production", appAccountToken: token,
            signedDate: 1_700_000_000_000, payloadJSON: #"{"transactionId":"\#(id)"}"#)
    }

    static func settings() -> AppleCallWorker.Settings {
        var settings = AppleCallWorker.Settings()
        settings.idlePoll = 0.05
        settings.firstRetry = 50
        settings.longestRetry = 100
        settings.countInterval = 0
        return settings
    }

    static func await(seconds: Double = 30, _ condition: () throws -> Bool) rethrows -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if try condition() { return true }
            usleep(20_000)
        }
        return try condition()
    }

    @Test func appleDownThenUp_finishesAndSetsTheToken_andTheTransactionShowsFinishedAt() throws {
        // Down for every try of the client's first call to Finish Transaction (its own retries included).
        let down: JSONValue = .array(Array(repeating: .object([("status", .integer(500))]), count: 4))
        let fake = try FakeAppStoreServer(fixture: [("faults", .object([("/inApps/v1/transactions/7001/finish", down)]))])
        let routes = try Self.routes(fake, duties: #""finish_on_claim": true, "write_app_account_tokens": true,"#)
        try routes.ledger.withStore { (store) throws(LedgerError) in
            try store.record(transactions: [Self.purchase("7001")], source: .jws)
        }
        let claimed = routes.handle(
            post("/v1/transactions/7001/claim", contentType: "application/json", text: #"{"account": "alice"}"#), on: .main)
        #expect(claimed.status == 200)
        #expect(claimed.json?["finished_at"] == .null)
        #expect(claimed.json?["apple_calls"]?.elements?.count == 2)

        let worker = try AppleCallWorker(
            ledger: routes.ledger, clients: routes.serverAPIClients, nudge: routes.appleCallNudge,
            settings: Self.settings(), log: nil)
        defer { worker.stop(within: 5) }
        let finished = Self.await {
            routes.handle(get("/v1/transactions/7001"), on: .main).json?["finished_at"] != .null
        }
        #expect(finished)
        let calls = try #require(routes.handle(get("/v1/transactions/7001"), on: .main).json?["apple_calls"]?.elements)
        #expect(calls.map { $0["kind"] } == [.string("finish_transaction"), .string("set_app_account_token")])
        #expect(calls.map { $0["state"] } == [.string("done"), .string("done")])
        #expect(calls.first?["attempts"] == .integer(2))
        #expect(calls.first?["last_status"] == .integer(500))

        let requests = try fake.requests()
        let finishes = requests.filter { $0["path"] == .string("/inApps/v1/transactions/7001/finish") }
        #expect(finishes.count == 5)
        #expect(finishes.allSatisfy { $0["method"] == .string("POST") })
        let tokenCalls = requests.filter { $0["path"] == .string("/inApps/v1/transactions/7001/appAccountToken") }
        #expect(tokenCalls.count == 1)
        #expect(tokenCalls.first?["method"] == .string("PUT"))
        let body = try JSONValue(parsing: Array((tokenCalls.first?["body"]?.text ?? "").utf8))
        let registered = try routes.ledger.withStore { (store) throws(LedgerError) in
            try store.account("alice")?.record.appAccountTokens
        }
        #expect(registered?.count == 1)
        // Lower case, as Apple's Python library sends it and as the ledger keeps tokens.
        #expect(body["appAccountToken"]?.text == registered?.first?.lowercased())
    }

    @Test func refusedForGood_isFailedWithApplesCode_andAPurchaseCarryingATokenGetsNone() throws {
        let refusal: JSONValue = .array([.object([("status", .integer(400)), ("errorCode", .integer(4000006))])])
        let fake = try FakeAppStoreServer(fixture: [("faults", .object([("/inApps/v1/transactions/7002/finish", refusal)]))])
        let routes = try Self.routes(fake, duties: #""finish_on_claim": true, "write_app_account_tokens": true,"#)
        try routes.ledger.withStore { (store) throws(LedgerError) in
            try store.record(
                transactions: [Self.purchase("7002", token: "0b1c2d3e-4f50-4617-8283-94a5b6c7d8e9")], source: .jws)
        }
        #expect(routes.handle(
            post("/v1/transactions/7002/claim", contentType: "application/json", text: #"{"account": "bob"}"#), on: .main
        ).status == 200)
        let metrics = ServiceMetrics()
        let worker = try AppleCallWorker(
            ledger: routes.ledger, clients: routes.serverAPIClients, nudge: routes.appleCallNudge,
            settings: Self.settings(), log: nil, metrics: metrics.appleCalls)
        defer { worker.stop(within: 5) }
        let settled = Self.await {
            routes.handle(get("/v1/transactions/7002"), on: .main).json?["apple_calls"]?.elements?.first?["state"]
                == .string("failed")
        }
        #expect(settled)
        let calls = try #require(routes.handle(get("/v1/transactions/7002"), on: .main).json?["apple_calls"]?.elements)
        #expect(calls.count == 1)
        #expect(calls.first?["apple_error_code"] == .integer(4000006))
        #expect(calls.first?["attempts"] == .integer(1))
        #expect(routes.handle(get("/v1/transactions/7002"), on: .main).json?["finished_at"] == .null)
        let counted = Self.await {
            metrics.exposition().contains(#"receiptd_apple_calls{kind="finish_transaction",state="failed"} 1"#)
        }
        #expect(counted)
        #expect(metrics.exposition().contains(#"receiptd_apple_calls{kind="finish_transaction",state="pending"} 0"#))
    }

    @Test(arguments: [1, 7, 8])
    func backOff_doublesFromAnHourToADay_andGivesUpAfterTheBound(_ attempts: Int) {
        let error = AppStoreServerAPIErrorFixture.unavailable
        let result = AppleCallWorker.result(of: error, attempts: attempts, now: 0, settings: AppleCallWorker.Settings())
        switch attempts {
        case 1: #expect(result == .retry(at: 3_600_000, status: 503, appleErrorCode: nil, error: "server_api_unavailable: down"))
        case 7: #expect(result == .retry(at: 86_400_000, status: 503, appleErrorCode: nil, error: "server_api_unavailable: down"))
        default: #expect(result == .failed(status: 503, appleErrorCode: nil, error: "server_api_unavailable: down"))
        }
    }
}

enum AppStoreServerAPIErrorFixture {
    static let unavailable = AppStoreServerAPIError(code: .unavailable, message: "down", httpStatus: 503)
}

extension JSONValue {
    fileprivate var elements: [JSONValue]? {
        guard case .array(let elements) = self else { return nil }
        return elements
    }

    fileprivate var text: String? {
        guard case .string(let text) = self else { return nil }
        return text
    }
}
