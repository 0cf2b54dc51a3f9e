public import JSONText
public import Ledger
import ReceiptEngine

/// One account as of one instant: what it may use (``entitlements``), and the body of `GET /v1/accounts/{account}`
/// (``json``).
///
/// Everything is evaluated with the facts as of `instant` (``SubscriptionFacts/asOf(_:)``): purchases made after it
/// are left out of `subscriptions` and `purchases` too, and a refund dated after it shows nowhere yet. Which
/// original transactions the account owns is as its links and transfer records say it was at `instant`
/// (``AccountRecord/ownership(at:)``): before a transfer away, the purchase was still its own.
public struct AccountReport: Sendable {
    public let snapshot: AccountSnapshot
    /// The instant evaluated, Unix milliseconds.
    public let instant: Int64
    /// Every entitlement the account has or once had by `instant`, by name.
    public let entitlements: [Entitlement]

    public init(snapshot: AccountSnapshot, configuration: ServiceConfiguration, at instant: Int64) {
        self.init(snapshot: snapshot, rules: configuration.entitlementRules, at: instant)
    }

    public init(snapshot: AccountSnapshot, rules: EntitlementRules, at instant: Int64) {
        self.snapshot = snapshot
        self.instant = instant
        self.entitlements = rules.entitlements(of: snapshot, at: instant)
    }

    public var account: String { snapshot.record.account }

    /// `{"account", "entitlements": {NAME: {…}}, "subscriptions": [the /v1/subscriptions/{id} objects],
    /// "purchases": [every owned transaction, normalized, newest first], "app_account_tokens", "first_seen",
    /// "updated_at", "at"}`.
    public var json: JSONValue {
        // Every transaction appears twice, in its subscription and among `purchases`: normalized once.
        var normalized: [String: JSONValue] = [:]
        return .building { sink in
            sink.beginObject()
            writeMembers(to: &sink) { transaction, sink in
                let tree = normalized[transaction.transactionID] ?? ReceiptRoutes.transactionJSON(transaction)
                normalized[transaction.transactionID] = tree
                sink.value(tree)
            }
            sink.endObject()
        }
    }

    /// ``json``'s compact text, byte for byte.
    public var jsonText: [UInt8] { jsonText(validation: nil, texts: NormalizedTransactionTexts()) }

    /// ``jsonText``, each transaction's text copied from `texts` (kept across requests by the routes), with
    /// `"validation"` last when `validationText` is given: `POST /v1/accounts/{account}/purchases` embeds
    /// `/v1/validate`'s answer exactly as that route writes it, without parsing it back into a tree.
    func jsonText(validation validationText: [UInt8]?, texts: NormalizedTransactionTexts) -> [UInt8] {
        var writer = JSONWriter(capacity: 64 * 1024)
        writer.beginObject()
        writeMembers(to: &writer) { transaction, writer in writer.compactText(texts.text(of: transaction)) }
        if let validationText {
            writer.key("validation")
            writer.compactText(validationText)
        }
        writer.endObject()
        return writer.bytes
    }

    /// The answer's members, each transaction written by `writeTransaction`. Subscriptions are the owned
    /// auto-renewable ones with a transaction by `instant`, newest latest transaction first; purchases are every owned
    /// transaction, newest first.
    private func writeMembers<Sink: JSONSink>(
        to sink: inout Sink, transaction writeTransaction: (TransactionFacts, inout Sink) -> Void
    ) {
        let owned = snapshot.record.ownership(at: instant).owned.compactMap { snapshot.subscriptions[$0] }
            .map { $0.asOf(instant) }
        var subscriptions = owned.filter { $0.isAutoRenewable && !$0.transactions.isEmpty }
            .map { (latest: $0.latestTransaction, facts: $0) }
        subscriptions.sort { Self.isNewer($0.latest, than: $1.latest) }
        var purchases = owned.flatMap(\.transactions)
        purchases.sort { Self.isNewer($0, than: $1) }
        let record = snapshot.record
        sink.key("account")
        sink.string(record.account)
        sink.key("entitlements")
        sink.value(.object(entitlements.map { ($0.name, $0.json) }))
        sink.key("subscriptions")
        sink.beginArray()
        for subscription in subscriptions {
            sink.beginObject()
            ReceiptRoutes.writeSubscriptionMembers(
                subscription.facts, at: instant, to: &sink, transaction: writeTransaction)
            sink.endObject()
        }
        sink.endArray()
        sink.key("purchases")
        sink.beginArray()
        for purchase in purchases { writeTransaction(purchase, &sink) }
        sink.endArray()
        sink.key("app_account_tokens")
        sink.beginArray()
        for token in record.appAccountTokens { sink.string(token) }
        sink.endArray()
        sink.key("first_seen")
        sink.value(Entitlement.date(record.firstSeen))
        sink.key("updated_at")
        sink.value(Entitlement.date(snapshot.subscriptions.values.map(\.updatedAt).reduce(record.updatedAt, max)))
        sink.key("at")
        sink.value(Entitlement.date(instant))
    }

    /// Newest purchase first; then the greater transaction id, so that the order never depends on the input's.
    private static func isNewer(_ lhs: TransactionFacts?, than rhs: TransactionFacts?) -> Bool {
        let (left, right) = (lhs?.purchaseDate ?? .min, rhs?.purchaseDate ?? .min)
        if left != right { return left > right }
        return (rhs?.transactionID ?? "").utf8.lexicographicallyPrecedes((lhs?.transactionID ?? "").utf8)
    }
}
