import JSONText
import Ledger
import Synchronization

/// The compact text of normalized transactions (``ReceiptRoutes/transactionJSON(_:)``), kept across requests: an
/// account answers each of its transactions twice and a subscription each of its own, and writing one from its stored
/// payload (parsing it, reading Apple's members, normalizing, serializing) costs a hundred times more than copying
/// the text (issue 24's benchmark, `receipt-bench accounts`).
///
/// A text depends on the stored payload and `isUpgraded` alone, and each entry keeps both beside it: a lookup finds
/// a text only for the very payload it was written from. A refund, a renewal or an upgrade stored since (a new
/// payload, whichever process wrote it), or a payload `asOf` edited for `?at=`, misses and is written afresh, so the
/// cache can never answer with a stale text, and needs no word from writers.
///
/// Bounded by ``byteLimit`` (16 MiB by default, about 9,000 transactions of Apple's usual size): entries live in two
/// generations, and when the current one holds half the limit the older one is dropped whole. What is read again
/// moves to the current generation, so what requests keep asking for stays.
///
/// Each subscription's transactions are kept written too (``SubscriptionTexts``: their texts, the `transactions`
/// array, the latest transaction's place and `purchases`' order), beside the very transactions they were written
/// from: an account of three subscriptions then copies three arrays rather than looking up every transaction. The
/// same bound applies to them apart.
final class NormalizedTransactionTexts: Sendable {
    private struct Entry: KeptEntry {
        var payloadJSON: String
        var isUpgraded: Bool
        var text: [UInt8]
        /// The transaction's offer, as an entitlement it decides names it.
        var periodType: Entitlement.PeriodType

        /// The payload, the text, the key and the dictionary's slot and headers, estimated high.
        var bytes: Int { payloadJSON.utf8.count + text.count + 192 }
    }

    /// An account's `purchases` array, and the very transactions of each of its subscriptions it was written from.
    private struct PurchasesText: KeptEntry {
        var transactions: [[TransactionFacts]]
        var text: [UInt8]

        /// The text and the payloads (facts read afresh hold their own copies), estimated high.
        var bytes: Int {
            text.count + transactions.reduce(256) { $0 + $1.reduce(0) { $0 + $1.payloadJSON.utf8.count + 256 } }
        }
    }

    private let generations = Mutex(Generations<Entry>())
    private let subscriptions = Mutex(Generations<SubscriptionTexts>())
    private let purchases = Mutex(Generations<PurchasesText>())
    /// The most the texts and payloads kept may take, estimated high; as much again for the subscriptions' texts, and
    /// again for accounts' `purchases`.
    let byteLimit: Int

    static let defaultByteLimit = 16 << 20

    init(byteLimit: Int = defaultByteLimit) {
        self.byteLimit = byteLimit
    }

    /// The compact text `ReceiptRoutes.transactionJSON(facts).serialized()` writes, byte for byte.
    func text(of facts: TransactionFacts) -> [UInt8] { entry(of: facts).text }

    /// `EntitlementRules.periodType(of: facts)`.
    func periodType(of facts: TransactionFacts) -> Entitlement.PeriodType { entry(of: facts).periodType }

    private func entry(of facts: TransactionFacts) -> Entry {
        let isUpgraded = facts.isUpgraded == true
        let kept = generations.withLock {
            $0.entry(for: facts.transactionID, byteLimit: byteLimit) {
                $0.isUpgraded == isUpgraded && $0.payloadJSON == facts.payloadJSON
            }
        }
        if let kept { return kept }
        // Written outside the lock: other requests' lookups do not wait for it. The payload is parsed once for both.
        let payload = LedgerFacts.payload(facts.payloadJSON)
        let entry = Entry(
            payloadJSON: facts.payloadJSON, isUpgraded: isUpgraded,
            text: ReceiptRoutes.transactionJSON(facts, payload: payload).serialized(),
            periodType: EntitlementRules.periodType(of: payload))
        generations.withLock { $0.insert(entry, for: facts.transactionID, byteLimit: byteLimit) }
        return entry
    }

    /// `facts`' transactions written, kept for the very same transactions: a renewal, a refund or an upgrade
    /// stored since, whichever process stored it, and facts `asOf` edited for `?at=`, differ and are written afresh.
    func texts(of facts: SubscriptionFacts) -> SubscriptionTexts {
        let transactions = facts.transactions
        // Compared outside the lock: facts from the ledger's memory share their storage with the kept ones, which
        // compares at once, but facts read afresh (PostgreSQL) compare every payload.
        let kept = subscriptions.withLock {
            $0.entry(for: facts.originalTransactionID, byteLimit: byteLimit) { _ in true }
        }
        if let kept, kept.transactions == transactions { return kept }
        let written = SubscriptionTexts(facts, texts: transactions.map(text(of:)))
        subscriptions.withLock { $0.insert(written, for: facts.originalTransactionID, byteLimit: byteLimit) }
        return written
    }

    /// `purchases`' array: every transaction of `written` (an account's subscriptions' texts, in its order), newest
    /// first, kept by account for the very same transactions, as ``texts(of:)`` keeps a subscription's. Merged from
    /// the subscriptions' own orders on a miss; an account's answer then takes it whole.
    func purchases(of written: [SubscriptionTexts], account: String) -> [UInt8] {
        let transactions = written.map(\.transactions)
        let kept = purchases.withLock { $0.entry(for: account, byteLimit: byteLimit) { _ in true } }
        if let kept, kept.transactions == transactions { return kept.text }
        let order = SubscriptionTexts.purchaseOrder(merging: written)
        var text: [UInt8] = []
        text.reserveCapacity(written.reduce(2) { $0 + $1.array.count })
        text.append(UInt8(ascii: "["))
        for (place, purchase) in order.enumerated() {
            if place > 0 { text.append(UInt8(ascii: ",")) }
            text.append(contentsOf: written[purchase.original].texts[purchase.index])
        }
        text.append(UInt8(ascii: "]"))
        let entry = PurchasesText(transactions: transactions, text: text)
        purchases.withLock { $0.insert(entry, for: account, byteLimit: byteLimit) }
        return text
    }

    /// Texts kept now, for tests.
    var count: Int { generations.withLock { $0.current.count + $0.previous.count } }

    /// Subscriptions kept written now, for tests.
    var subscriptionCount: Int { subscriptions.withLock { $0.current.count + $0.previous.count } }

    /// Accounts' `purchases` kept written now, for tests.
    var purchasesCount: Int { purchases.withLock { $0.current.count + $0.previous.count } }
}

/// One subscription's transactions as every answer that holds them writes them: ``NormalizedTransactionTexts``
/// keeps it beside ``transactions``, all it depends on.
struct SubscriptionTexts: Sendable, KeptEntry {
    /// What everything below was made from, in the ledger's order.
    let transactions: [TransactionFacts]
    /// Each transaction's compact text, by its place in ``transactions``.
    let texts: [[UInt8]]
    /// The `transactions` member: every text in order, as one compact JSON array.
    let array: [UInt8]
    /// ``Ledger/SubscriptionFacts/latestTransactionIndex``.
    let latest: Int?
    /// The places of ``transactions`` as `purchases` lists them: ``isListed(_:before:)``.
    let purchaseOrder: [Int]
    /// Each purchase date in ``purchaseOrder``, `.min` for none: what merging orders compares first.
    let purchaseDates: [Int64]
    /// Each transaction id in ``purchaseOrder``: what merging compares on a tie, without copying a transaction's
    /// facts to reach it (subscriptions bought the same day tie on every renewal).
    let purchaseIDs: [String]

    init(_ facts: SubscriptionFacts, texts: [[UInt8]]) {
        let transactions = facts.transactions
        self.transactions = transactions
        self.texts = texts
        var array: [UInt8] = []
        array.reserveCapacity(texts.reduce(2 + texts.count) { $0 + $1.count })
        array.append(UInt8(ascii: "["))
        for (index, text) in texts.enumerated() {
            if index > 0 { array.append(UInt8(ascii: ",")) }
            array.append(contentsOf: text)
        }
        array.append(UInt8(ascii: "]"))
        self.array = array
        latest = facts.latestTransactionIndex
        let purchaseOrder = transactions.indices.sorted { Self.isListed(transactions[$0], before: transactions[$1]) }
        self.purchaseOrder = purchaseOrder
        purchaseDates = purchaseOrder.map { transactions[$0].purchaseDate ?? .min }
        purchaseIDs = purchaseOrder.map { transactions[$0].transactionID }
    }

    /// Every transaction of `written` by its place (which subscription, which of its transactions), as `purchases`
    /// lists them: each subscription's own order, kept, merged, rather than all of them sorted again.
    static func purchaseOrder(merging written: [SubscriptionTexts]) -> [(original: Int, index: Int)] {
        let (orders, dates) = (written.map(\.purchaseOrder), written.map(\.purchaseDates))
        let ids = written.map(\.purchaseIDs)
        var next = [Int](repeating: 0, count: written.count)
        var merged: [(original: Int, index: Int)] = []
        merged.reserveCapacity(orders.reduce(0) { $0 + $1.count })
        while true {
            var first: Int?
            for original in orders.indices where next[original] < orders[original].count {
                // Strictly before, as `isListed` orders: on a tie the earlier subscription goes first, as a stable sort
                // would put it.
                if let chosen = first {
                    let (date, chosenDate) = (dates[original][next[original]], dates[chosen][next[chosen]])
                    if date < chosenDate { continue }
                    if date == chosenDate, !utf8Precedes(ids[chosen][next[chosen]], ids[original][next[original]]) {
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

    /// `purchases`' order: newest purchase first, then the greater transaction id (UTF-8), so that the order never
    /// depends on the input's.
    static func isListed(_ lhs: TransactionFacts, before rhs: TransactionFacts) -> Bool {
        let (left, right) = (lhs.purchaseDate ?? .min, rhs.purchaseDate ?? .min)
        if left != right { return left > right }
        return utf8Precedes(rhs.transactionID, lhs.transactionID)
    }

    /// `lhs.utf8.lexicographicallyPrecedes(rhs.utf8)`, compared through spans: renewals of subscriptions bought the
    /// same day tie on their dates, and the generic comparison of the views cost more than the rest of the sort.
    static func utf8Precedes(_ lhs: String, _ rhs: String) -> Bool {
        let (left, right) = (lhs.utf8.span, rhs.utf8.span)
        for index in 0..<min(left.count, right.count) where left[index] != right[index] {
            return left[index] < right[index]
        }
        return left.count < right.count
    }

    /// The array twice (its texts are the transactions' own, counted again), the payloads (facts read afresh hold
    /// their own copies) and the places, estimated high.
    var bytes: Int {
        2 * array.count + transactions.reduce(0) { $0 + $1.payloadJSON.utf8.count + 256 } + 40 * purchaseOrder.count
            + 256
    }
}

private protocol KeptEntry {
    var bytes: Int { get }
}

/// Entries in two generations: when the current one holds half the limit the older one is dropped whole; what is
/// read again moves to the current one, so that what requests keep asking for stays.
private struct Generations<Entry: KeptEntry> {
    var current: [String: Entry] = [:]
    var previous: [String: Entry] = [:]
    var currentBytes = 0

    mutating func entry(for key: String, byteLimit: Int, where matches: (Entry) -> Bool) -> Entry? {
        if let entry = current[key] { return matches(entry) ? entry : nil }
        guard let entry = previous[key], matches(entry) else { return nil }
        previous[key] = nil
        insert(entry, for: key, byteLimit: byteLimit)
        return entry
    }

    mutating func insert(_ entry: Entry, for key: String, byteLimit: Int) {
        let bytes = entry.bytes + key.utf8.count
        guard bytes <= byteLimit / 2 else { return }
        if currentBytes + bytes > byteLimit / 2 {
            previous = current
            current = [:]
            currentBytes = 0
        }
        // A replaced entry's bytes stay counted until its generation goes: estimated high, never low.
        current[key] = entry
        currentBytes += bytes
    }
}

extension JSONWriter {
    /// A value whose compact text is known: `value(_:serializedText:)` copies the text and never reads the tree, so
    /// none is made.
    mutating func compactText(_ text: [UInt8]) { value(.null, serializedText: text) }
}
