#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AppStoreServerAPI
import CryptoFloor
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine

/// `GET /lookup?id=…`: the support page's lookup box. An id is a transaction id (shown with its whole subscription),
/// an original transaction id, or an order id from the customer's emailed Apple receipt; the answer is always a page.
extension ReceiptRoutes {
    func supportLookup(_ request: HTTPRequest, apple: AppleAdmission) -> HTTPResponse {
        if let account = request.queryValue("account"), !account.isEmpty { return supportAccountLookup(account) }
        // People paste ids out of emails with the spaces around them.
        let id = (request.queryValue("id") ?? "").trimmed(of: " \t\r\n")
        func failure(_ problem: RequestProblem) -> HTTPResponse {
            html(status: problem.status, LookupPage.errorPage(id: id, problem: problem))
        }
        guard PathID.isValid(Substring(id)) else {
            return failure(.badRequest(
                .invalidID,
                "?id= must be an order id, transaction id or original transaction id: \(PathID.rule)"))
        }
        let now = ReceiptDate(clock()).millisecondsSince1970
        let found: LookupPage.Found?
        do {
            found = try ledger.withStore { (store) throws(LedgerError) in try lookUpInLedger(id, store: store) }
        } catch {
            return failure(Self.storeProblem(error))
        }
        if let found { return html(status: .ok, LookupPage.page(id: id, found: found, now: now)) }
        // What the ledger never saw, Apple may know: Get Transaction Info for Apple's transaction ids (digits), Look
        // Up Order ID for anything else (`MK5TTTVWJH`). What Apple answers is verified and enters the ledger first.
        let isTransactionID = id.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
        let answer = isTransactionID ? lookUpTransaction(id, apple: apple) : lookUpOrder(id, apple: apple)
        switch answer {
        case .found(let transactions):
            var originals: [String] = []
            for transaction in transactions {
                if case .string(let original)? = transaction["original_transaction_id"], !originals.contains(original) {
                    originals.append(original)
                }
            }
            do {
                let subscriptions = try ledger.withStore { (store) throws(LedgerError) in
                    var subscriptions: [LookupPage.Subscription] = []
                    for original in originals {
                        if let found = try subscriptionWithClaims(
                            originalTransactionID: original, withWebhookEvents: true, store: store)
                        {
                            subscriptions.append(found)
                        }
                    }
                    return subscriptions
                }
                let match: LookupPage.Found.Match =
                    !isTransactionID ? .order : originals == [id] ? .originalTransaction : .transaction
                return html(
                    status: .ok,
                    LookupPage.page(id: id, found: LookupPage.Found(matchedAs: match, subscriptions: subscriptions), now: now))
            } catch {
                return failure(Self.storeProblem(error))
            }
        case .notFound:
            return failure(
                isTransactionID
                    ? .notFound("neither the ledger nor Apple knows transaction or original transaction \(id)")
                    : RequestProblem(status: .notFound, code: .orderNotFound, message: "Apple knows no order \(id)"))
        case .notConfigured:
            return failure(
                isTransactionID
                    ? .notFound("the ledger has never seen transaction or original transaction \(id)")
                    : RequestProblem(
                        status: .serviceUnavailable, code: .serverAPINotConfigured,
                        message: "the ledger knows no transaction \(id); if it is an order id (from the customer's "
                            + "emailed receipt), order lookups need server_api configured (key_id, issuer_id, "
                            + "private_key_file)"))
        case .unavailable, .busy:
            let problem = answer.problem(
                "the ledger knows no \(isTransactionID ? "transaction" : "transaction or order") \(id), and "
                    + "Apple could not be asked: ")
            var response = failure(problem ?? RequestProblem(status: 503, code: .serverAPIUnavailable, message: ""))
            if let seconds = problem?.retryAfterSeconds {
                response.headers.add(name: "Retry-After", value: String(seconds))
            }
            return response
        }
    }

    /// `?account=`: the account as `GET /v1/accounts/{account}` reports it now, with a timeline per subscription.
    private func supportAccountLookup(_ account: String) -> HTTPResponse {
        func failure(_ problem: RequestProblem) -> HTTPResponse {
            html(status: problem.status, LookupPage.errorPage(id: "", problem: problem))
        }
        guard Self.isStorableAccount(account) else {
            return failure(.badRequest(
                .invalidAccount,
                "?account= must be 1 to \(Self.maximumAccountBytes) bytes of UTF-8 without control characters"))
        }
        let now = ReceiptDate(clock()).millisecondsSince1970
        let found: (AccountSnapshot, [LookupPage.Subscription], [OutboxEvent]?)?
        do {
            found = try ledger.withStore { (store) throws(LedgerError) in
                guard let snapshot = try store.account(account) else { return nil }
                var subscriptions: [LookupPage.Subscription] = []
                for link in snapshot.record.links.sorted(by: { $0.originalTransactionID < $1.originalTransactionID }) {
                    guard snapshot.subscriptions[link.originalTransactionID]?.isAutoRenewable == true,
                        let subscription = try subscriptionWithClaims(
                            originalTransactionID: link.originalTransactionID, withWebhookEvents: false, store: store)
                    else { continue }
                    subscriptions.append(subscription)
                }
                // The account's own stream, once, rather than again under each of its subscriptions.
                let events = try webhookEvents(OutboxQuery(account: account), store: store)
                return (snapshot, subscriptions, events)
            }
        } catch {
            return failure(Self.storeProblem(error))
        }
        guard let (snapshot, subscriptions, events) = found else { return failure(Self.accountNotFound) }
        let summary = AccountSummary(snapshot: snapshot, configuration: configuration, at: now)
        return html(
            status: .ok,
            LookupPage.accountPage(
                account: account, summary: summary, subscriptions: subscriptions, webhookEvents: events, now: now))
    }

    /// A transaction id first (an original transaction id is also its first transaction's id), then an original
    /// transaction id known only through renewal info.
    private func lookUpInLedger(_ id: String, store: any LedgerStore) throws(LedgerError) -> LookupPage.Found? {
        if let record = try store.transaction(id: id) {
            let original = record.facts.originalTransactionID
            guard
                let subscription = try subscriptionWithClaims(
                    originalTransactionID: original, withWebhookEvents: true, store: store)
            else {
                return nil
            }
            return LookupPage.Found(
                matchedAs: original == id ? .originalTransaction : .transaction, subscriptions: [subscription])
        }
        guard
            let subscription = try subscriptionWithClaims(
                originalTransactionID: id, withWebhookEvents: true, store: store)
        else { return nil }
        return LookupPage.Found(matchedAs: .originalTransaction, subscriptions: [subscription])
    }

    private func subscriptionWithClaims(
        originalTransactionID: String, withWebhookEvents: Bool, store: any LedgerStore
    ) throws(LedgerError) -> LookupPage.Subscription? {
        guard let facts = try ledger.subscription(originalTransactionID: originalTransactionID, in: store) else {
            return nil
        }
        var claims: [String: Claim] = [:]
        var consumptionRequests: [ConsumptionRequest] = []
        for transaction in facts.transactions {
            if let claim = try store.transaction(id: transaction.transactionID)?.claim {
                claims[transaction.transactionID] = claim
            }
            if let request = try store.consumptionRequest(transactionID: transaction.transactionID) {
                consumptionRequests.append(request)
            }
        }
        let events =
            withWebhookEvents
            ? try webhookEvents(OutboxQuery(originalTransactionID: originalTransactionID), store: store) : nil
        return LookupPage.Subscription(
            facts: facts, claims: claims, webhookEvents: events,
            consumptionRequests: consumptionRequests.sorted { $0.requestedAt > $1.requestedAt })
    }

    /// Nil without webhooks: then the outbox stays empty and the page neither asks nor shows it.
    private func webhookEvents(_ query: OutboxQuery, store: any LedgerStore) throws(LedgerError) -> [OutboxEvent]? {
        guard !configuration.webhooks.isEmpty else { return nil }
        var query = query
        query.limit = LookupPage.webhookEventLimit
        return try store.events(query)
    }
}
