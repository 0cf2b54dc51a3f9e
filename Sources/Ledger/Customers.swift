/// The customers the ledger knows, for work that asks Apple about each of them (issue 26: refund history).
public protocol LedgerCustomers: Sendable {
    /// Original transactions of `bundleID` in `environment` with a purchase at or after `purchasedSince`
    /// (milliseconds since 1970), the most recently purchased first, at most `limit`.
    func originalTransactionIDs(
        bundleID: String, environment: String, purchasedSince: Int64, limit: Int
    ) throws(LedgerError) -> [String]
}

extension LedgerRecords {
    func originalTransactionIDs(
        bundleID: String, environment: String, purchasedSince: Int64, limit: Int
    ) throws(LedgerError) -> [String] {
        guard limit > 0 else { return [] }
        return try database.read { connection throws(LedgerError) in
            // A transaction Apple sent without a purchase date still has a signed date, no earlier than its purchase.
            let rows = try connection.query(
                """
                SELECT original_transaction_id FROM transactions
                WHERE bundle_id = $1 AND environment = $2
                GROUP BY original_transaction_id
                HAVING max(COALESCE(purchase_date, signed_date)) >= $3
                ORDER BY max(COALESCE(purchase_date, signed_date)) DESC, original_transaction_id
                LIMIT $4
                """,
                [.text(bundleID), .text(environment), .integer(purchasedSince), .integer(Int64(limit))]
            )
            var identifiers: [String] = []
            for row in rows { identifiers.append(try row.requiredString(0)) }
            return identifiers
        }
    }
}

extension LedgerStoreInRecords {
    public func originalTransactionIDs(
        bundleID: String, environment: String, purchasedSince: Int64, limit: Int
    ) throws(LedgerError) -> [String] {
        try records.originalTransactionIDs(
            bundleID: bundleID, environment: environment, purchasedSince: purchasedSince, limit: limit)
    }
}
