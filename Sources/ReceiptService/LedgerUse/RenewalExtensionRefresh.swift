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
        var signedTransactions: [String] = []
        var signedRenewals: [String] = []
        do {
            let client = try serverAPIClients.client(bundleID: bundleID, environment: environment)
            for group in try client.subscriptionStatuses(transactionID: originalTransactionID).groups {
                for last in group.lastTransactions {
                    signedTransactions.append(last.signedTransactionInfo)
                    signedRenewals.append(last.signedRenewalInfo)
                }
            }
        } catch {
            var fields = [("app", bundleID), ("environment", environment.rawValue), ("code", error.code.rawValue)]
            if let appleCode = error.appleErrorCode { fields.append(("apple_error_code", String(appleCode))) }
            log?.event("server api status after extension failed", fields)
            return
        }
        let transactions = verifiedTransactionFacts(signedTransactions)
        var renewals: [RenewalFacts] = []
        for text in signedRenewals {
            let result = jwsVerifier.verify(text, requiredKind: .renewalInfo, at: clock())
            metrics.recordVerdict(kind: result.kind, error: result.error)
            guard result.isValid, let payload = result.payload, let renewal = LedgerFacts.renewal(payload) else {
                log?.event("server api renewal info refused", [("code", result.error?.code.rawValue ?? "malformed_jws")])
                continue
            }
            renewals.append(renewal)
        }
        guard ledger.isConfigured else { return }
        do {
            try ledger.withStore { (store) throws(LedgerError) in
                try ledger.record(transactions, source: .serverAPI, in: store)
                for renewal in renewals { try ledger.record(renewal: renewal, source: .serverAPI, in: store) }
            }
        } catch {
            log?.event("server api status after extension not stored", [("code", ReceiptRoutes.storeProblem(error).code.rawValue)])
        }
    }
}
