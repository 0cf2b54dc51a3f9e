import JSONText
import Ledger

/// The bodies of one change's events (docs/events.md, "What is sent"). What several events of a change share (the
/// subscription's object, normalized transactions, entitlement names) is rendered once, by the renderers of
/// `/v1/subscriptions/{id}` and `/v1/transactions/{id}`, each transaction's text copied from the rules'
/// ``NormalizedTransactionTexts`` as the subscription route copies it.
struct EventBody {
    let change: LedgerChange
    let rules: EventRules
    /// The transaction the change's events show unless a kind names its own: the newest one the change added or
    /// changed, else the latest.
    let changed: TransactionFacts?
    private var subscription: [UInt8]?
    private var transactions: [String: [UInt8]] = [:]
    private var entitlements: [String: [String]] = [:]

    init(change: LedgerChange, rules: EventRules) {
        self.change = change
        self.rules = rules
        var known: [String: TransactionFacts] = [:]
        for transaction in change.before?.transactions ?? [] { known[transaction.transactionID] = transaction }
        let after = change.after
        // `transactions` is newest first.
        changed = after?.transactions.first { known[$0.transactionID] != $0 } ?? after?.latestTransaction
    }

    /// `kind`'s draft on `account`'s stream (the original's while nil).
    mutating func draft(
        _ kind: EventRules.Kind, account: String?, entitlementsBefore: [String]? = nil
    ) -> EventDraft {
        let transaction =
            kind.transactionID.flatMap { id in change.after?.transactions.first { $0.transactionID == id } } ?? changed
        let environment = transaction?.environment ?? change.after?.renewal?.environment
        let bundleID = transaction?.bundleID ?? change.after?.transactions.lazy.compactMap(\.bundleID).first
        var writer = JSONWriter(capacity: 4096)
        writer.key("environment")
        writer.string(environment)
        writer.key("app")
        writer.beginObject()
        writer.key("bundle_id")
        writer.string(bundleID)
        writer.key("app_apple_id")
        writer.integer(bundleID.flatMap { rules.appAppleIDs[$0] })
        writer.endObject()
        writer.key("account")
        writer.string(account)
        writer.key("entitlements")
        let active = entitlementNames(of: account)
        Self.names(active, into: &writer)
        writer.key("product_id")
        writer.string(transaction?.productID ?? change.after?.renewal?.productID)
        writer.key("original_transaction_id")
        writer.string(change.originalTransactionID.isEmpty ? nil : change.originalTransactionID)
        writer.key("transaction")
        if let transaction {
            let text = transactionText(transaction)
            writer.value(.null, serializedText: text)
        } else {
            writer.null()
        }
        writer.key("subscription")
        if let text = subscriptionText() {
            writer.value(.null, serializedText: text)
        } else {
            writer.null()
        }
        writer.key("notification")
        if case .notification(let notification) = change.cause {
            writer.beginObject()
            writer.key("uuid")
            writer.string(notification.uuid)
            writer.key("type")
            writer.string(notification.type)
            writer.key("subtype")
            writer.string(notification.subtype)
            writer.endObject()
        } else {
            writer.null()
        }
        if kind.type == .transfer {
            writer.key("previous_account")
            writer.string(change.accountBefore)
        }
        if let entitlementsBefore {
            writer.key("entitlements_before")
            Self.names(entitlementsBefore, into: &writer)
        }
        return EventDraft(
            type: kind.type.rawValue, dedupeKey: kind.dedupeKey, account: account,
            originalTransactionID: change.originalTransactionID, bundleID: bundleID, environment: environment,
            bodyMembers: String(decoding: writer.bytes, as: UTF8.self))
    }

    private static func names(_ names: [String], into writer: inout JSONWriter) {
        writer.beginArray()
        for name in names { writer.string(name) }
        writer.endArray()
    }

    /// Active after the event: the account's, or this original's alone while nobody owns it.
    private mutating func entitlementNames(of account: String?) -> [String] {
        let key = account ?? ""
        if let names = entitlements[key] { return names }
        let originals =
            account.flatMap { change.accountsAfter[$0] } ?? (account == nil ? change.after.map { [$0] } ?? [] : [])
        let names = rules.activeNames(originals, at: change.time)
        entitlements[key] = names
        return names
    }

    private mutating func transactionText(_ transaction: TransactionFacts) -> [UInt8] {
        if let text = transactions[transaction.transactionID] { return text }
        let text = rules.transactionTexts.text(of: transaction)
        transactions[transaction.transactionID] = text
        return text
    }

    /// The status object, for auto-renewable subscriptions only.
    private mutating func subscriptionText() -> [UInt8]? {
        if let subscription { return subscription }
        guard let after = change.after, after.isAutoRenewable, !after.transactions.isEmpty else { return nil }
        // `subscriptionJSON(after, at: change.time)`'s text, byte for byte, as the subscription route writes it.
        var texts: [[UInt8]] = []
        texts.reserveCapacity(after.transactions.count)
        for transaction in after.transactions { texts.append(transactionText(transaction)) }
        var writer = JSONWriter(capacity: texts.reduce(1024) { $0 + $1.count } + (texts.first?.count ?? 0))
        writer.beginObject()
        ReceiptRoutes.writeSubscriptionMembers(
            after, latest: after.latestTransactionIndex, at: change.time, to: &writer,
            transaction: { index, writer in writer.compactText(texts[index]) }, transactions: nil)
        writer.endObject()
        subscription = writer.bytes
        return writer.bytes
    }
}
