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
        let owned = ownedFacts
        // Every transaction appears twice, in its subscription and among `purchases`: normalized once.
        let normalized = owned.map { $0.transactions.map(ReceiptRoutes.transactionJSON) }
        return .building { sink in
            sink.beginObject()
            writeMembers(owned, to: &sink) { original, index, sink in sink.value(normalized[original][index]) }
            sink.endObject()
        }
    }

    /// ``json``'s compact text, byte for byte.
    public var jsonText: [UInt8] { jsonText(validation: nil, texts: NormalizedTransactionTexts()) }

    /// ``jsonText``, each transaction's text copied from `texts` (kept across requests by the routes), with
    /// `"validation"` last when `validationText` is given: `POST /v1/accounts/{account}/purchases` embeds
    /// `/v1/validate`'s answer exactly as that route writes it, without parsing it back into a tree.
    func jsonText(validation validationText: [UInt8]?, texts: NormalizedTransactionTexts) -> [UInt8] {
        let owned = ownedFacts
        let written = owned.map { $0.transactions.map(texts.text(of:)) }
        // Each text twice, each subscription's latest and members, and the rest: the answer is written without
        // growing (and copying) its buffer.
        let textBytes = written.reduce(0) { $0 + $1.reduce(0) { $0 + $1.count } }
        let capacity = 2 * textBytes + 4096 * written.count + 16 * 1024 + (validationText?.count ?? 0)
        var writer = JSONWriter(capacity: capacity)
        writer.beginObject()
        writeMembers(owned, to: &writer) { original, index, writer in writer.compactText(written[original][index]) }
        if let validationText {
            writer.key("validation")
            writer.compactText(validationText)
        }
        writer.endObject()
        return writer.bytes
    }

    /// The facts of the originals the account owned at `instant`, as of `instant`, in ownership order.
    private var ownedFacts: [SubscriptionFacts] {
        snapshot.record.ownership(at: instant).owned.compactMap { snapshot.subscriptions[$0] }.map { $0.asOf(instant) }
    }

    /// The answer's members, each transaction written by `writeTransaction` from its place in `owned` (which original,
    /// which of its transactions). Subscriptions are the owned auto-renewable ones with a transaction by `instant`,
    /// newest latest transaction first; purchases are every owned transaction, newest first.
    private func writeMembers<Sink: JSONSink>(
        _ owned: [SubscriptionFacts], to sink: inout Sink,
        transaction writeTransaction: (_ original: Int, _ index: Int, inout Sink) -> Void
    ) {
        var subscriptions = owned.indices.filter { owned[$0].isAutoRenewable && !owned[$0].transactions.isEmpty }
            .map { (latest: owned[$0].latestTransaction, original: $0) }
        subscriptions.sort { Self.isNewer($0.latest, than: $1.latest) }
        // Sorted by their keys alone, not as whole facts: moving facts copies every string they hold.
        var purchases: [(purchased: Int64, transactionID: String, original: Int, index: Int)] = []
        for original in owned.indices {
            let transactions = owned[original].transactions
            for index in transactions.indices {
                purchases.append(
                    (transactions[index].purchaseDate ?? .min, transactions[index].transactionID, original, index))
            }
        }
        purchases.sort { lhs, rhs in
            if lhs.purchased != rhs.purchased { return lhs.purchased > rhs.purchased }
            return Self.utf8Precedes(rhs.transactionID, lhs.transactionID)
        }
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
                owned[subscription.original], latest: subscription.latest, at: instant, to: &sink
            ) { index, sink in writeTransaction(subscription.original, index, &sink) }
            sink.endObject()
        }
        sink.endArray()
        sink.key("purchases")
        sink.beginArray()
        for purchase in purchases { writeTransaction(purchase.original, purchase.index, &sink) }
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

    /// `lhs.utf8.lexicographicallyPrecedes(rhs.utf8)`, compared through spans: renewals of subscriptions bought the
    /// same day tie on their dates, and the generic comparison of the views cost more than the rest of the sort.
    private static func utf8Precedes(_ lhs: String, _ rhs: String) -> Bool {
        let (left, right) = (lhs.utf8.span, rhs.utf8.span)
        for index in 0..<min(left.count, right.count) where left[index] != right[index] {
            return left[index] < right[index]
        }
        return left.count < right.count
    }

    /// Newest purchase first; then the greater transaction id, so that the order never depends on the input's.
    private static func isNewer(_ lhs: TransactionFacts?, than rhs: TransactionFacts?) -> Bool {
        let (left, right) = (lhs?.purchaseDate ?? .min, rhs?.purchaseDate ?? .min)
        if left != right { return left > right }
        return utf8Precedes(rhs?.transactionID ?? "", lhs?.transactionID ?? "")
    }
}
