import AppStoreServerAPI
import Ledger
import ReceiptEngine
import StoreKitJWS

extension LedgerIntake {
    /// After Apple extended a renewal date, its signed truth: Get All Subscription Statuses for the customer, each
    /// signed transaction and renewal info verified like any other and recorded, so the ledger's expiry moves with
    /// Apple's signature rather than with the extension's answer.
    func refreshSubscriptionStatus(
        _ originalTransactionID: String, bundleID: String, environment: AppStoreEnvironment
    ) {
        guard ledger.isConfigured else { return }
        let statuses: SubscriptionStatuses
        do {
            let client = try serverAPIClients.client(bundleID: bundleID, environment: environment)
            statuses = try client.subscriptionStatuses(transactionID: originalTransactionID)
        } catch {
            var fields = [("app", bundleID), ("environment", environment.rawValue), ("code", error.code.rawValue)]
            if let appleCode = error.appleErrorCode { fields.append(("apple_error_code", String(appleCode))) }
            log?.event("server api status after extension failed", fields)
            return
        }
        _ = recordVerified(
            statuses.signedTransactions, renewals: statuses.signedRenewals,
            failure: "server api status after extension not stored")
    }
}
