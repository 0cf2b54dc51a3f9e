import Ledger

extension ObservedStore {
    func originalTransactionIDs(
        bundleID: String, environment: String, purchasedSince: Int64, limit: Int
    ) throws(LedgerError) -> [String] {
        try base.originalTransactionIDs(
            bundleID: bundleID, environment: environment, purchasedSince: purchasedSince, limit: limit)
    }
}
