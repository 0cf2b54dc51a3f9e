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
final class NormalizedTransactionTexts: Sendable {
    private struct Entry {
        var payloadJSON: String
        var isUpgraded: Bool
        var text: [UInt8]

        /// The payload, the text, the key and the dictionary's slot and headers, estimated high.
        var bytes: Int { payloadJSON.utf8.count + text.count + 192 }
    }

    private struct Generations {
        var current: [String: Entry] = [:]
        var previous: [String: Entry] = [:]
        var currentBytes = 0

        mutating func text(of facts: TransactionFacts, byteLimit: Int) -> [UInt8]? {
            let isUpgraded = facts.isUpgraded == true
            if let entry = current[facts.transactionID] {
                return entry.isUpgraded == isUpgraded && entry.payloadJSON == facts.payloadJSON ? entry.text : nil
            }
            guard let entry = previous[facts.transactionID], entry.isUpgraded == isUpgraded,
                entry.payloadJSON == facts.payloadJSON
            else { return nil }
            previous[facts.transactionID] = nil
            insert(entry, for: facts.transactionID, byteLimit: byteLimit)
            return entry.text
        }

        mutating func insert(_ entry: Entry, for transactionID: String, byteLimit: Int) {
            let bytes = entry.bytes + transactionID.utf8.count
            guard bytes <= byteLimit / 2 else { return }
            if currentBytes + bytes > byteLimit / 2 {
                previous = current
                current = [:]
                currentBytes = 0
            }
            // A replaced entry's bytes stay counted until its generation goes: estimated high, never low.
            current[transactionID] = entry
            currentBytes += bytes
        }
    }

    private let generations = Mutex(Generations())
    /// The most the texts and payloads kept may take, estimated high.
    let byteLimit: Int

    static let defaultByteLimit = 16 << 20

    init(byteLimit: Int = defaultByteLimit) {
        self.byteLimit = byteLimit
    }

    /// The compact text `ReceiptRoutes.transactionJSON(facts).serialized()` writes, byte for byte.
    func text(of facts: TransactionFacts) -> [UInt8] {
        if let kept = generations.withLock({ $0.text(of: facts, byteLimit: byteLimit) }) { return kept }
        // Written outside the lock: other requests' lookups do not wait for it.
        let text = ReceiptRoutes.transactionJSON(facts).serialized()
        let entry = Entry(payloadJSON: facts.payloadJSON, isUpgraded: facts.isUpgraded == true, text: text)
        generations.withLock { $0.insert(entry, for: facts.transactionID, byteLimit: byteLimit) }
        return text
    }

    /// Texts kept now, for tests.
    var count: Int { generations.withLock { $0.current.count + $0.previous.count } }
}

extension JSONWriter {
    /// A value whose compact text is known: `value(_:serializedText:)` copies the text and never reads the tree, so
    /// none is made.
    mutating func compactText(_ text: [UInt8]) { value(.null, serializedText: text) }
}
