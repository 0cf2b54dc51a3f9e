import AppStoreServerAPI
import Dispatch
import Ledger
import ReceiptEngine
import StoreKitJWS
internal import Synchronization

/// Backfill (`server_api.backfill`): the first time this process meets a customer's original transaction in an app
/// with a `server_api` key, it fetches that customer's transaction history, subscription statuses and refund history
/// from Apple in the background, so the ledger knows the whole story after one validation. One serial queue, bounded:
/// a flood of new customers is dropped past `capacity`, never queued without limit; the client spaces requests by
/// `max_requests_per_second`.
public final class ServerAPIBackfill: Sendable {
    /// Customers waiting at most; more are dropped (and met again later, after a restart).
    public static let capacity = 1000

    let isEnabled: Bool
    private let queue = DispatchQueue(label: "receiptd.server-api-backfill")
    private let state = Mutex<(seen: Set<String>, pending: Int)>(([], 0))

    init(configuration: ServiceConfiguration) {
        isEnabled = configuration.serverAPI.backfill && !configuration.serverAPIApps.isEmpty
    }

    /// Queues `work` unless `key` was queued before or the queue is full.
    func enqueue(_ key: String, _ work: @escaping @Sendable () -> Void) {
        let accepted = state.withLock { state -> Bool in
            guard !state.seen.contains(key), state.pending < Self.capacity else { return false }
            if state.seen.count >= 100_000 { state.seen.removeAll(keepingCapacity: true) }
            state.seen.insert(key)
            state.pending += 1
            return true
        }
        guard accepted else { return }
        queue.async { [self] in
            work()
            state.withLock { $0.pending -= 1 }
        }
    }
}

extension LedgerIntake {
    /// Queues a backfill for each original transaction among `transactions` of an app with a key.
    func backfill(_ transactions: [TransactionFacts]) {
        guard serverAPIBackfill.isEnabled else { return }
        for transaction in transactions {
            guard let bundleID = transaction.bundleID, configuration.app(bundleID: bundleID)?.serverAPI != nil,
                let environment = transaction.environment.flatMap(AppStoreEnvironment.init(rawValue:))
            else { continue }
            let originalTransactionID = transaction.originalTransactionID
            serverAPIBackfill.enqueue("\(environment.rawValue) \(bundleID) \(originalTransactionID)") {
                self.fetchCustomer(originalTransactionID, bundleID: bundleID, environment: environment)
            }
        }
    }

    private func fetchCustomer(_ originalTransactionID: String, bundleID: String, environment: AppStoreEnvironment) {
        var signedTransactions: [String] = []
        var signedRenewals: [String] = []
        do {
            let client = try serverAPIClients.client(bundleID: bundleID, environment: environment)
            for page in try client.completeTransactionHistory(transactionID: originalTransactionID, maximumPages: 50) {
                signedTransactions += page.signedTransactions
            }
            let statuses = try client.subscriptionStatuses(transactionID: originalTransactionID)
            signedTransactions += statuses.signedTransactions
            signedRenewals += statuses.signedRenewals
            // Apple's own list of the customer's refunds: one whose notification was lost (or came before this
            // ledger existed) still reaches the ledger, and its outbox emits REFUND.
            for page in try client.completeRefundHistory(transactionID: originalTransactionID) {
                signedTransactions += page.signedTransactions
            }
        } catch {
            var fields = [("app", bundleID), ("environment", environment.rawValue), ("code", error.code.rawValue)]
            if let appleCode = error.appleErrorCode { fields.append(("apple_error_code", String(appleCode))) }
            log?.event("server api backfill failed", fields)
            return
        }
        guard let recorded = recordVerified(signedTransactions, renewals: signedRenewals, failure: "server api backfill not stored")
        else { return }
        log?.event(
            "server api backfill",
            [("app", bundleID), ("environment", environment.rawValue), ("transactions", String(recorded.transactions)),
             ("renewal_infos", String(recorded.renewals)), ("refused", String(signedTransactions.count + signedRenewals.count - recorded.transactions - recorded.renewals))])
    }
}

extension LedgerIntake {
    /// Verifies what Apple signed like anything posted to receiptd, and records what verified with the source
    /// `server_api`; how many of each were recorded, or nil when the ledger did not take them (logged as `failure`).
    func recordVerified(
        _ signedTransactions: [String], renewals signedRenewals: [String], failure: String
    ) -> (transactions: Int, renewals: Int)? {
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
        do {
            try ledger.withStore { (store) throws(LedgerError) in
                try ledger.record(transactions, source: .serverAPI, in: store)
                for renewal in renewals { try ledger.record(renewal: renewal, source: .serverAPI, in: store) }
            }
        } catch {
            log?.event(failure, [("code", ReceiptRoutes.storeProblem(error).code.rawValue)])
            return nil
        }
        return (transactions.count, renewals.count)
    }
}
