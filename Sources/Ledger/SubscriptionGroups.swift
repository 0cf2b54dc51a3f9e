internal import JSONText

/// Which subscription group a product belongs to, as Apple's own signed transactions say (issue 26: introductory
/// offer eligibility is decided per group). Receipts carry no group, so only StoreKit 2 transactions answer.
public protocol LedgerSubscriptionGroups: Sendable {
    /// The `subscriptionGroupIdentifier` of any stored StoreKit 2 transaction of `productID` in `bundleID`; nil when
    /// the ledger holds none. A product never moves between groups, so any one of them answers.
    func subscriptionGroup(productID: String, bundleID: String) throws(LedgerError) -> String?
}

extension LedgerRecords {
    func subscriptionGroup(productID: String, bundleID: String) throws(LedgerError) -> String? {
        try database.read { connection throws(LedgerError) in
            // One probe of `transactions_by_product`; no ORDER BY, so the LIMIT stops at the first StoreKit 2 row
            // instead of sorting every transaction of a popular product.
            let rows = try connection.query(
                """
                SELECT payload_json FROM transactions
                WHERE product_id = $1 AND bundle_id = $2 AND payload_json LIKE '%"subscriptionGroupIdentifier"%'
                LIMIT 1
                """,
                [.text(productID), .text(bundleID)]
            )
            guard let text = rows.first?.string(0),
                case .string(let group)? = (try? JSONValue(parsing: Array(text.utf8)))?["subscriptionGroupIdentifier"]
            else { return nil }
            return group
        }
    }
}

extension LedgerStoreInRecords {
    public func subscriptionGroup(productID: String, bundleID: String) throws(LedgerError) -> String? {
        try records.subscriptionGroup(productID: productID, bundleID: bundleID)
    }
}
