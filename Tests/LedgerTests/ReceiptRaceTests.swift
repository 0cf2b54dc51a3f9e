@testable import Ledger
import TestSupport
import Testing

/// A receipt write never replaces StoreKit 2 facts, even when the two race in two processes sharing one database.
struct ReceiptRaceTests {
    typealias E = AppleEvents

    @Test(arguments: Backend.tested)
    func receiptRacingStoreKit2_neverReplacesItsFacts(_ backend: Backend) throws {
        let location = try DatabaseLocation.fresh(backend)
        // PostgreSQL: two ledgers (two connection pools) stand in for two receiptd processes.
        let ledgers = backend == .postgres ? [try location.open(), try location.open()] : [try location.open()]
        let rounds = 150
        for round in 0..<rounds {
            let id = "r\(round)"
            let storeKit2 = E.transaction(
                id, purchase: E.t0, expires: E.t0 + 30 * E.day, signed: E.t0, ownership: "FAMILY_SHARED", original: id)
            // Made a day later, so newer by signed date, but a receipt cannot say FAMILY_SHARED.
            var fromReceipt = E.with(storeKit2, signed: E.t0 + E.day)
            fromReceipt.inAppOwnershipType = nil
            if round.isMultiple(of: 2) {
                // Both writers then update an existing row rather than insert a new one.
                var older = E.with(fromReceipt, signed: E.t0 - E.day)
                older.payloadJSON = "{}"
                try ledgers[0].record(transactions: [older], source: .receipt)
            }
            let receiptVersion = fromReceipt
            onThreads(2) { index in
                let ledger = ledgers[index % ledgers.count]
                if index == 0 {
                    try? ledger.record(transactions: [receiptVersion], source: .receipt)
                } else {
                    try? ledger.record(transactions: [storeKit2], source: .jws)
                }
            }
            let record = try #require(try ledgers[0].transaction(id: id))
            #expect(record.facts == storeKit2, "round \(round)")
            #expect(Set(record.sources.keys) == [.receipt, .jws], "round \(round)")
        }
    }
}
