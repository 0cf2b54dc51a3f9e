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
        var purchases = owned.indices.flatMap { original in
            owned[original].transactions.indices.map { (original: original, index: $0) }
        }
        purchases.sort { lhs, rhs in
            SubscriptionTexts.isListed(
                owned[lhs.original].transactions[lhs.index], before: owned[rhs.original].transactions[rhs.index])
        }
        return .building { sink in
            sink.beginObject()
            writeMembers(
                owned, latest: owned.map(\.latestTransactionIndex), purchases: purchases, to: &sink,
                transaction: { original, index, sink in sink.value(normalized[original][index]) },
                transactions: nil)
            sink.endObject()
        }
    }

    /// ``json``'s compact text, byte for byte.
    public var jsonText: [UInt8] { jsonText(validation: nil, texts: NormalizedTransactionTexts()) }

    /// ``jsonText``, each subscription's transactions copied as `texts` keeps them written across requests, with
    /// `"validation"` last when `validationText` is given: `POST /v1/accounts/{account}/purchases` embeds
    /// `/v1/validate`'s answer exactly as that route writes it, without parsing it back into a tree.
    func jsonText(validation validationText: [UInt8]?, texts: NormalizedTransactionTexts) -> [UInt8] {
        let owned = ownedFacts
        let written = owned.map(texts.texts(of:))
        // Each array twice (in its subscription, and its texts among `purchases`), each subscription's latest and
        // members, and the rest: the answer is written without growing (and copying) its buffer.
        let textBytes = written.reduce(0) { $0 + $1.array.count }
        let capacity = 2 * textBytes + 4096 * written.count + 16 * 1024 + (validationText?.count ?? 0)
        var writer = JSONWriter(capacity: capacity)
        writer.beginObject()
        writeMembers(
            owned, latest: written.map(\.latest), purchases: Self.merged(written), to: &writer,
            transaction: { original, index, writer in writer.compactText(written[original].texts[index]) },
            transactions: { original, writer in writer.compactText(written[original].array) })
        if let validationText {
            writer.key("validation")
            writer.compactText(validationText)
        }
        writer.endObject()
        return writer.bytes
    }

    /// Every transaction of `written` by its place (which subscription, which of its transactions), as `purchases`
    /// lists them: each subscription's own order, kept, merged, rather than all of them sorted again.
    private static func merged(_ written: [SubscriptionTexts]) -> [(original: Int, index: Int)] {
        let (orders, dates) = (written.map(\.purchaseOrder), written.map(\.purchaseDates))
        let ids = written.map(\.purchaseIDs)
        var next = [Int](repeating: 0, count: written.count)
        var merged: [(original: Int, index: Int)] = []
        merged.reserveCapacity(orders.reduce(0) { $0 + $1.count })
        while true {
            var first: Int?
            for original in orders.indices where next[original] < orders[original].count {
                // Strictly before, as `SubscriptionTexts.isListed` orders: on a tie the earlier subscription goes
                // first, as a stable sort would put it.
                if let chosen = first {
                    let (date, chosenDate) = (dates[original][next[original]], dates[chosen][next[chosen]])
                    if date < chosenDate { continue }
                    if date == chosenDate,
                        !SubscriptionTexts.utf8Precedes(ids[chosen][next[chosen]], ids[original][next[original]])
                    {
                        continue
                    }
                }
                first = original
            }
            guard let first else { return merged }
            merged.append((first, orders[first][next[first]]))
            next[first] += 1
        }
    }

    /// The facts of the originals the account owned at `instant`, as of `instant`, in ownership order.
    private var ownedFacts: [SubscriptionFacts] {
        snapshot.record.ownership(at: instant).owned.compactMap { snapshot.subscriptions[$0] }.map { $0.asOf(instant) }
    }

    /// The answer's members, each transaction written by `writeTransaction` from its place in `owned` (which original,
    /// which of its transactions), and each subscription's `transactions` array by `writeTransactions` when given.
    /// `latest` is each original's latest transaction's place; `purchases` every owned transaction's place, newest
    /// first. Subscriptions are the owned auto-renewable ones with a transaction by `instant`, newest latest
    /// transaction first.
    private func writeMembers<Sink: JSONSink>(
        _ owned: [SubscriptionFacts], latest: [Int?], purchases: [(original: Int, index: Int)], to sink: inout Sink,
        transaction writeTransaction: (_ original: Int, _ index: Int, inout Sink) -> Void,
        transactions writeTransactions: ((_ original: Int, inout Sink) -> Void)?
    ) {
        // A latest transaction exists for every original that has a transaction by `instant`.
        var subscriptions = owned.indices.compactMap { original in
            owned[original].isAutoRenewable ? latest[original].map { (original: original, latest: $0) } : nil
        }
        // Newest latest transaction first, in `purchases`' order.
        subscriptions.sort { lhs, rhs in
            SubscriptionTexts.isListed(
                owned[lhs.original].transactions[lhs.latest], before: owned[rhs.original].transactions[rhs.latest])
        }
        let record = snapshot.record
        sink.key("account")
        sink.string(record.account)
        sink.key("entitlements")
        sink.value(.object(entitlements.map { ($0.name, $0.json) }))
        sink.key("subscriptions")
        sink.beginArray()
        for (original, latest) in subscriptions {
            sink.beginObject()
            ReceiptRoutes.writeSubscriptionMembers(
                owned[original], latest: latest, at: instant, to: &sink,
                transaction: { index, sink in writeTransaction(original, index, &sink) },
                transactions: writeTransactions.map { write in { sink in write(original, &sink) } })
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
}
