#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif
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
        let (subscriptions, purchases) = renderedSubscriptionsAndPurchases()
        return .object([
            ("account", .string(snapshot.record.account)),
            ("entitlements", entitlementsJSON),
            ("subscriptions", .array(subscriptions.map(\.json))),
            ("purchases", .array(purchases.map(\.json))),
        ] + trailingMembers)
    }

    /// ``json``'s compact text, byte for byte. Every transaction appears twice, in its subscription and among
    /// `purchases`, as the same normalized object: its text is written once and copied, where serializing both copies
    /// was nearly half of an account's answer (issue 24's benchmark, `receipt-bench accounts`).
    public var jsonText: [UInt8] { jsonText(validation: nil) }

    /// ``jsonText``, with `"validation"` last when `validationText` is given: `POST /v1/accounts/{account}/purchases`
    /// embeds `/v1/validate`'s answer exactly as that route writes it, without parsing it back into a tree.
    func jsonText(validation validationText: [UInt8]?) -> [UInt8] {
        let (subscriptions, purchases) = renderedSubscriptionsAndPurchases()
        var texts: [String: [UInt8]] = [:]
        var writer = JSONWriter(capacity: 64 * 1024)
        writer.beginObject()
        writer.key("account")
        writer.string(snapshot.record.account)
        writer.key("entitlements")
        writer.value(entitlementsJSON)
        writer.key("subscriptions")
        writer.beginArray()
        for subscription in subscriptions {
            guard case .object(let members) = subscription.json else {
                writer.value(subscription.json)
                continue
            }
            writer.beginObject()
            for (key, value) in members {
                writer.key(utf8: Array(key.utf8))
                guard key == "transactions", case .array(let transactions) = value else {
                    writer.value(value)
                    continue
                }
                writer.beginArray()
                for (transactionID, transaction) in zip(subscription.transactionIDs, transactions) {
                    let text = transaction.serialized()
                    texts[transactionID] = text
                    writer.value(transaction, serializedText: text)
                }
                writer.endArray()
            }
            writer.endObject()
        }
        writer.endArray()
        writer.key("purchases")
        writer.beginArray()
        for purchase in purchases {
            writer.value(purchase.json, serializedText: texts[purchase.transactionID])
        }
        writer.endArray()
        for (key, value) in trailingMembers {
            writer.key(utf8: Array(key.utf8))
            writer.value(value)
        }
        if let validationText {
            writer.key("validation")
            // Already one compact JSON value: its bytes are the member's value.
            writer.bytes += validationText
        }
        writer.endObject()
        return writer.bytes
    }

    private var entitlementsJSON: JSONValue { .object(entitlements.map { ($0.name, $0.json) }) }

    private var trailingMembers: [(key: String, value: JSONValue)] {
        let record = snapshot.record
        let updatedAt = snapshot.subscriptions.values.map(\.updatedAt).reduce(record.updatedAt, max)
        return [
            ("app_account_tokens", .array(record.appAccountTokens.map(JSONValue.string))),
            ("first_seen", Entitlement.date(record.firstSeen)),
            ("updated_at", Entitlement.date(updatedAt)),
            ("at", Entitlement.date(instant)),
        ]
    }

    /// The subscriptions' objects, each with the ids of its `transactions` in their order, and the purchases, each the
    /// very value its subscription holds when it has one.
    private func renderedSubscriptionsAndPurchases() -> (
        subscriptions: [(json: JSONValue, transactionIDs: [String])],
        purchases: [(transactionID: String, json: JSONValue)]
    ) {
        let owned = snapshot.record.ownership(at: instant).owned.compactMap { snapshot.subscriptions[$0] }
            .map { $0.asOf(instant) }
        var subscriptions: [(latest: TransactionFacts?, json: JSONValue, transactionIDs: [String])] = []
        var normalized: [String: JSONValue] = [:]
        var purchases: [TransactionFacts] = []
        for facts in owned {
            purchases += facts.transactions
            guard facts.isAutoRenewable, !facts.transactions.isEmpty else { continue }
            let json = ReceiptRoutes.subscriptionJSON(facts, at: instant)
            // The subscription's object already holds each of its transactions normalized: reused, not redone.
            if case .array(let transactions)? = json["transactions"] {
                for (facts, transaction) in zip(facts.transactions, transactions) {
                    normalized[facts.transactionID] = transaction
                }
            }
            subscriptions.append((facts.latestTransaction, json, facts.transactions.map(\.transactionID)))
        }
        subscriptions.sort { Self.isNewer($0.latest, than: $1.latest) }
        purchases.sort { Self.isNewer($0, than: $1) }
        return (
            subscriptions.map { ($0.json, $0.transactionIDs) },
            purchases.map { ($0.transactionID, normalized[$0.transactionID] ?? ReceiptRoutes.transactionJSON($0)) }
        )
    }

    /// Newest purchase first; then the greater transaction id, so that the order never depends on the input's.
    private static func isNewer(_ lhs: TransactionFacts?, than rhs: TransactionFacts?) -> Bool {
        let (left, right) = (lhs?.purchaseDate ?? .min, rhs?.purchaseDate ?? .min)
        if left != right { return left > right }
        return (rhs?.transactionID ?? "").utf8.lexicographicallyPrecedes((lhs?.transactionID ?? "").utf8)
    }
}

extension ReceiptRoutes {
    /// The `/v1/subscriptions/{id}` object with its status at `milliseconds` exactly (for `?at=` and accounts: pass
    /// facts ``SubscriptionFacts/asOf(_:)`` the same instant).
    static func subscriptionJSON(_ facts: SubscriptionFacts, at milliseconds: Int64) -> JSONValue {
        // `ReceiptDate(_:)` rounds the Date's seconds down, and `milliseconds / 1000` seconds in binary floating point
        // may fall just below the millisecond (from 2038 on): half a millisecond more always reads back as it.
        subscriptionJSON(facts, now: Date(timeIntervalSince1970: (Double(milliseconds) + 0.5) / 1000))
    }
}
