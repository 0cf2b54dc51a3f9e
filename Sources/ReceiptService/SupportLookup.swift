#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTP1Server
import Ledger
import ReceiptEngine

/// `GET /lookup?id=…`: the support page's lookup box. An id is a transaction id (shown with its whole subscription),
/// an original transaction id, or an order id from the customer's emailed Apple receipt; the answer is always a page.
extension ReceiptRoutes {
    func supportLookup(_ request: HTTPRequest) -> HTTPResponse {
        // People paste ids out of emails with the spaces around them.
        let id = (request.queryValue("id") ?? "").trimmed(of: " \t\r\n")
        func failure(_ problem: RequestProblem) -> HTTPResponse {
            html(status: problem.status, LookupPage.errorPage(id: id, problem: problem))
        }
        guard PathID.isValid(Substring(id)) else {
            return failure(.badRequest(
                "?id= must be an order id, transaction id or original transaction id: 1 to \(PathID.maximumLength) "
                    + "characters of 0-9 A-Z a-z . _ -"))
        }
        let now = Int64((clock().timeIntervalSince1970 * 1000).rounded(.down))
        let found: LookupPage.Found?
        do {
            found = try ledger.withStore { (store) throws(LedgerError) in try lookUpInLedger(id, store: store) }
        } catch {
            return failure(Self.storeProblem(error))
        }
        if let found { return html(status: .ok, LookupPage.page(id: id, found: found, now: now)) }
        // Apple's transaction ids are digits; order ids (`MK5TTTVWJH`) are not.
        guard !id.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return failure(RequestProblem(
                status: .notFound, code: "not_found",
                message: "the ledger has never seen transaction or original transaction \(id)"))
        }
        switch resolveOrder(id) {
        case .found(let originalTransactionIDs):
            do {
                let subscriptions = try ledger.withStore { (store) throws(LedgerError) in
                    var subscriptions: [LookupPage.Subscription] = []
                    for original in originalTransactionIDs {
                        if let found = try subscriptionWithClaims(originalTransactionID: original, store: store) {
                            subscriptions.append(found)
                        }
                    }
                    return subscriptions
                }
                return html(
                    status: .ok,
                    LookupPage.page(id: id, found: LookupPage.Found(matchedAs: .order, subscriptions: subscriptions), now: now))
            } catch {
                return failure(Self.storeProblem(error))
            }
        case .failed(let problem):
            return failure(problem)
        }
    }

    /// A transaction id first (an original transaction id is also its first transaction's id), then an original
    /// transaction id known only through renewal info.
    private func lookUpInLedger(_ id: String, store: any LedgerStore) throws(LedgerError) -> LookupPage.Found? {
        if let record = try store.transaction(id: id) {
            let original = record.facts.originalTransactionID
            guard let subscription = try subscriptionWithClaims(originalTransactionID: original, store: store) else {
                return nil
            }
            return LookupPage.Found(
                matchedAs: original == id ? .originalTransaction : .transaction, subscriptions: [subscription])
        }
        guard let subscription = try subscriptionWithClaims(originalTransactionID: id, store: store) else { return nil }
        return LookupPage.Found(matchedAs: .originalTransaction, subscriptions: [subscription])
    }

    private func subscriptionWithClaims(
        originalTransactionID: String, store: any LedgerStore
    ) throws(LedgerError) -> LookupPage.Subscription? {
        guard let facts = try ledger.subscription(originalTransactionID: originalTransactionID, in: store) else {
            return nil
        }
        var claims: [String: Claim] = [:]
        for transaction in facts.transactions {
            if let claim = try store.transaction(id: transaction.transactionID)?.claim {
                claims[transaction.transactionID] = claim
            }
        }
        return LookupPage.Subscription(facts: facts, claims: claims)
    }

    /// What an order id resolves to: the original transaction ids of its purchases, already in the ledger.
    enum OrderResolution {
        case found(originalTransactionIDs: [String])
        case failed(RequestProblem)
    }

    /// Apple's Look Up Order ID is the only way from an order id to its transactions; this receiptd has no App Store
    /// Server API client, so every order lookup says what it would need.
    func resolveOrder(_ orderID: String) -> OrderResolution {
        .failed(RequestProblem(
            status: .serviceUnavailable, code: "server_api_not_configured",
            message: "the ledger knows no transaction \(orderID); if it is an order id (from the customer's emailed "
                + "receipt), order lookups need server_api configured (key_id, issuer_id, private_key_file)"))
    }
}
