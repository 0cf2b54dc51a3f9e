import Ledger
import TestSupport
import Testing

struct LedgerCustomersTests {
    static func purchase(
        _ id: String, of original: String, at purchased: Int64?, signed: Int64, bundleID: String = "com.example.app",
        environment: String = "Production"
    ) -> TransactionFacts {
        TransactionFacts(
            transactionID: id, originalTransactionID: original, productID: "pro.monthly", bundleID: bundleID,
            purchaseDate: purchased, environment: environment, signedDate: signed, payloadJSON: "{}")
    }

    @Test(arguments: Backend.tested)
    func customers_ofOneAppAndEnvironment_purchasingSince_mostRecentFirst_upToTheLimit(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        try ledger.record(
            transactions: [
                Self.purchase("101", of: "100", at: 1_000, signed: 1_000),
                // A renewal keeps an old customer recent.
                Self.purchase("102", of: "100", at: 9_000, signed: 9_000),
                Self.purchase("201", of: "200", at: 5_000, signed: 5_000),
                Self.purchase("301", of: "300", at: 2_000, signed: 2_000),
                // No purchase date: its signed date stands in.
                Self.purchase("401", of: "400", at: nil, signed: 7_000),
                Self.purchase("501", of: "500", at: 8_000, signed: 8_000, environment: "Sandbox"),
                Self.purchase("601", of: "600", at: 8_000, signed: 8_000, bundleID: "com.example.other"),
            ], source: .serverAPI)
        func customers(since: Int64, limit: Int = 100) throws -> [String] {
            try ledger.originalTransactionIDs(
                bundleID: "com.example.app", environment: "Production", purchasedSince: since, limit: limit)
        }
        #expect(try customers(since: 0) == ["100", "400", "200", "300"])
        #expect(try customers(since: 3_000) == ["100", "400", "200"])
        #expect(try customers(since: 0, limit: 2) == ["100", "400"])
        #expect(try customers(since: 10_000).isEmpty)
        #expect(try customers(since: 0, limit: 0).isEmpty)
        #expect(
            try ledger.originalTransactionIDs(
                bundleID: "com.example.app", environment: "Sandbox", purchasedSince: 0, limit: 10) == ["500"])
    }
}
