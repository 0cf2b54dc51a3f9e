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
/// original transactions the account owns is as the ledger holds it now.
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
        let record = snapshot.record
        let owned = record.links.compactMap { link in snapshot.subscriptions[link.originalTransactionID] }
            .map { $0.asOf(instant) }
        var subscriptions: [(latest: TransactionFacts?, json: JSONValue)] = []
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
            subscriptions.append((facts.latestTransaction, json))
        }
        subscriptions.sort { Self.isNewer($0.latest, than: $1.latest) }
        purchases.sort { Self.isNewer($0, than: $1) }
        let updatedAt = snapshot.subscriptions.values.map(\.updatedAt).reduce(record.updatedAt, max)
        return .object([
            ("account", .string(record.account)),
            ("entitlements", .object(entitlements.map { ($0.name, $0.json) })),
            ("subscriptions", .array(subscriptions.map(\.json))),
            ("purchases", .array(purchases.map { normalized[$0.transactionID] ?? ReceiptRoutes.transactionJSON($0) })),
            ("app_account_tokens", .array(record.appAccountTokens.map(JSONValue.string))),
            ("first_seen", Entitlement.date(record.firstSeen)),
            ("updated_at", Entitlement.date(updatedAt)),
            ("at", Entitlement.date(instant)),
        ])
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
