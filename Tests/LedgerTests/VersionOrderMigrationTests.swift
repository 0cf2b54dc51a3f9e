@testable import Ledger
import TestSupport
import Testing

/// Rows written before schema version 3 keep their place in the order of versions: a row that StoreKit 2 data had
/// reached still never gives way to a receipt.
struct VersionOrderMigrationTests {
    typealias E = AppleEvents

    /// Writes `facts` and its sources the way schema version 2 did (no source, uuid or upgrade columns).
    static func insertAsVersion2(
        _ facts: TransactionFacts, sources: [TransactionSource], _ connection: any SQLConnection
    ) throws {
        try connection.execute(
            """
            INSERT INTO transactions (transaction_id, original_transaction_id, product_id, bundle_id, type,
                purchase_date, original_purchase_date, expires_date, revocation_date, revocation_reason,
                in_app_ownership_type, web_order_line_item_id, environment, signed_date, payload_json,
                first_seen, updated_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, 1, 1)
            """,
            [
                .text(facts.transactionID), .text(facts.originalTransactionID), .text(facts.productID),
                SQLValue(facts.bundleID), SQLValue(facts.type), SQLValue(facts.purchaseDate),
                SQLValue(facts.originalPurchaseDate), SQLValue(facts.expiresDate), SQLValue(facts.revocationDate),
                SQLValue(facts.revocationReason), SQLValue(facts.inAppOwnershipType),
                SQLValue(facts.webOrderLineItemID), SQLValue(facts.environment), .integer(facts.signedDate),
                .text(facts.payloadJSON),
            ]
        )
        for source in sources {
            try connection.execute(
                "INSERT INTO transaction_sources (transaction_id, source, first_seen) VALUES ($1, $2, 1)",
                [.text(facts.transactionID), .text(source.rawValue)]
            )
        }
    }

    @Test(arguments: Backend.tested)
    func version2Rows_keepStoreKit2OverReceipts_afterMigrating(_ backend: Backend) throws {
        let location = try DatabaseLocation.fresh(backend)
        _ = try location.open(schemaVersion: 2)
        let storeKit2 = E.transaction("1000", purchase: E.t0, expires: E.t0 + 30 * E.day, signed: E.t0)
        let receiptOnly = E.transaction("2000", purchase: E.t0, expires: nil, signed: E.t0, original: "2000")
        do {
            let raw = try location.rawConnection()
            try Self.insertAsVersion2(storeKit2, sources: [.receipt, .notification], raw)
            try Self.insertAsVersion2(receiptOnly, sources: [.receipt], raw)
        }
        let ledger = try location.open()
        #expect(try ledger.transaction(id: "1000")?.facts == storeKit2)

        let laterReceipt = E.with(storeKit2, signed: E.t0 + E.day)
        let laterReceiptOnly = E.with(receiptOnly, signed: E.t0 + E.day)
        try ledger.record(transactions: [laterReceipt, laterReceiptOnly], source: .receipt)
        #expect(try ledger.transaction(id: "1000")?.facts == storeKit2)
        #expect(try ledger.transaction(id: "2000")?.facts == laterReceiptOnly)
    }
}
