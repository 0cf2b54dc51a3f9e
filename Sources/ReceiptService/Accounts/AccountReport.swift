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

    /// Which originals the account owned at `instant`, and which it had transferred away: the rules and the answer
    /// both ask.
    private let ownership: (owned: [String], transferredAway: [String: Int64])

    public init(snapshot: AccountSnapshot, rules: EntitlementRules, at instant: Int64) {
        self.init(snapshot: snapshot, rules: rules, at: instant, texts: nil)
    }

    /// With `texts`, each winning entitlement's `period_type` is read where the transaction's text is kept, rather than
    /// from its payload parsed again.
    init(snapshot: AccountSnapshot, rules: EntitlementRules, at instant: Int64, texts: NormalizedTransactionTexts?) {
        self.snapshot = snapshot
        self.instant = instant
        let ownership = snapshot.record.ownership(at: instant)
        self.ownership = ownership
        self.entitlements =
            if let texts {
                rules.entitlements(of: snapshot, owning: ownership, at: instant, periodType: texts.periodType(of:))
            } else {
                rules.entitlements(of: snapshot, owning: ownership, at: instant)
            }
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
                owned, latest: owned.map(\.latestTransactionIndex), to: &sink,
                transaction: { original, index, sink in sink.value(normalized[original][index]) },
                transactions: nil,
                purchases: { sink in
                    sink.beginArray()
                    for purchase in purchases { sink.value(normalized[purchase.original][purchase.index]) }
                    sink.endArray()
                })
            sink.key("at")
            sink.value(Entitlement.date(instant))
            sink.endObject()
        }
    }

    /// ``json``'s compact text, byte for byte.
    public var jsonText: [UInt8] { Array(jsonPieces(validation: nil, texts: NormalizedTransactionTexts()).joined()) }

    /// ``jsonText`` in pieces, each subscription's transactions and the `purchases` array taken whole as `texts` keeps
    /// them across requests (not copied: they are most of the answer's hundreds of kilobytes), with `"validation"` last
    /// when `validationText` is given: `POST /v1/accounts/{account}/purchases` embeds `/v1/validate`'s answer exactly
    /// as that route writes it, without parsing it back into a tree.
    func jsonPieces(validation validationText: [UInt8]?, texts: NormalizedTransactionTexts) -> [ArraySlice<UInt8>] {
        memberPieces(texts: texts) + [Self.closing(at: instant, validation: validationText)[...]]
    }

    /// ``jsonPieces(validation:texts:)`` up to its `at`: the same at every instant of ``unchangedSpan(rules:)``.
    func memberPieces(texts: NormalizedTransactionTexts) -> [ArraySlice<UInt8>] {
        let owned = ownedFacts
        let written = owned.map(texts.texts(of:))
        let purchases = texts.purchases(of: written, account: account)
        var writer = JSONWriter(capacity: 4096 * written.count + 16 * 1024)
        writer.beginObject()
        writeMembers(
            owned, latest: written.map(\.latest), to: &writer,
            transaction: { original, index, writer in writer.compactText(written[original].texts[index]) },
            transactions: { original, writer in writer.keptText(written[original].array) },
            purchases: { writer in writer.keptText(purchases) })
        return writer.takePieces()
    }

    /// What follows ``memberPieces(texts:)``: `at`, then `validation` when given, and the closing brace.
    static func closing(at instant: Int64, validation validationText: [UInt8]?) -> [UInt8] {
        // A date's text is digits, `-`, `:`, `.`, `T` and `Z`: nothing to escape.
        var text = Array(#","at":""#.utf8)
        text += ReceiptDate(millisecondsSince1970: instant).rfc3339.utf8
        text.append(UInt8(ascii: "\""))
        if let validationText {
            text += #","validation":"#.utf8
            text += validationText
        }
        text.append(UInt8(ascii: "}"))
        return text
    }

    /// The instants this answer holds for, but its `at`: ``EntitlementRules/unchangedSpan(of:around:)``; nil when an
    /// entitlement ended at `instant` itself (a product moved away from, replaced by nothing, ends "now"), which no
    /// other instant would say.
    func unchangedSpan(rules: EntitlementRules) -> Range<Int64>? {
        guard !entitlements.contains(where: { $0.end?.date == instant }) else { return nil }
        return rules.unchangedSpan(of: snapshot, around: instant)
    }

    /// The facts of the originals the account owned at `instant`, as of `instant`, in ownership order.
    private var ownedFacts: [SubscriptionFacts] {
        ownership.owned.compactMap { snapshot.subscriptions[$0] }.map { $0.asOf(instant) }
    }

    /// The answer's members but `at`, each transaction written by `writeTransaction` from its place in `owned` (which
    /// original, which of its transactions), each subscription's `transactions` array by `writeTransactions` when
    /// given, and the `purchases` array (every owned transaction, newest first) by `writePurchases`. `latest` is each
    /// original's latest transaction's place. Subscriptions are the owned auto-renewable ones with a transaction by
    /// `instant`, newest latest transaction first.
    private func writeMembers<Sink: JSONSink>(
        _ owned: [SubscriptionFacts], latest: [Int?], to sink: inout Sink,
        transaction writeTransaction: (_ original: Int, _ index: Int, inout Sink) -> Void,
        transactions writeTransactions: ((_ original: Int, inout Sink) -> Void)?,
        purchases writePurchases: (inout Sink) -> Void
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
        sink.beginObject()
        for entitlement in entitlements {
            sink.key(utf8: Array(entitlement.name.utf8))
            entitlement.write(to: &sink)
        }
        sink.endObject()
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
        writePurchases(&sink)
        sink.key("app_account_tokens")
        sink.beginArray()
        for token in record.appAccountTokens { sink.string(token) }
        sink.endArray()
        sink.key("first_seen")
        sink.value(Entitlement.date(record.firstSeen))
        sink.key("updated_at")
        sink.value(Entitlement.date(snapshot.subscriptions.values.map(\.updatedAt).reduce(record.updatedAt, max)))
    }
}
