import JSONText
import Ledger

/// Whether a customer may still have a subscription group's introductory offer, decided from what the ledger holds
/// of them (issue 26), as the App Store decides it: not after an introductory offer or a paid period in the group.
///
/// The rules, documented in docs/server-api.md:
/// - The customer is the transaction's original transaction and every original transaction linked to the same
///   account. Only their transactions of the same app and environment (Sandbox history never decides Production),
///   of auto-renewable subscriptions, count; a family member's shared purchase (`FAMILY_SHARED`) is not theirs.
/// - The product's group is StoreKit 2's `subscriptionGroupIdentifier`, taken from the customer's own transactions
///   of the product or else from any stored transaction of it. Receipts carry no group: a receipt entry is placed by
///   its product's group when some StoreKit 2 transaction of that product names one, and otherwise counts only when
///   it is of the product itself.
/// - Revoked transactions count: a refund does not give back an introductory offer already had.
/// - The earliest transaction of the group (by purchase date) decides: an introductory offer (`offerType` 1, a
///   receipt's `is_trial_period` or `is_in_intro_offer_period`) or else a paid period.
struct IntroductoryOfferHistory {
    enum Reason: String, Sendable, Hashable {
        case introductoryOffer = "introductory_offer"
        case paidPeriod = "paid_period"
    }

    /// The transaction that makes the customer ineligible, and why.
    struct Decider: Sendable, Hashable {
        var transaction: TransactionFacts
        var reason: Reason
    }

    /// How many other products' groups one decision may look up: a customer has few, and a pathological history
    /// must not turn one request into thousands of queries.
    static let maximumGroupLookups = 16

    var productID: String
    var bundleID: String
    /// The environment of the transaction asked about; nil when unknown (then every environment counts).
    var environment: String?

    /// The transaction that rules the customer out; nil when they are eligible.
    /// - Parameter groupOfProduct: the subscription group the ledger knows for a product of this app.
    func decider(
        among customerTransactions: [TransactionFacts],
        groupOfProduct: (String) throws(LedgerError) -> String?
    ) throws(LedgerError) -> Decider? {
        let candidates = customerTransactions.filter(isTheCustomers).map { ($0, LedgerFacts.payload($0.payloadJSON)) }
        var groups: [String: String?] = [:]
        for (facts, payload) in candidates {
            if case .string(let group)? = payload["subscriptionGroupIdentifier"] { groups[facts.productID] = group }
        }
        var lookups = 0
        func group(of product: String) throws(LedgerError) -> String? {
            if let known = groups[product] { return known }
            guard lookups < Self.maximumGroupLookups else { return nil }
            lookups += 1
            let found = try groupOfProduct(product)
            groups[product] = .some(found)
            return found
        }
        let target = try group(of: productID)
        var inGroup: [(TransactionFacts, JSONValue)] = []
        for (facts, payload) in candidates {
            let placed: Bool
            if facts.productID == productID {
                placed = true
            } else if let target {
                if case .string(let own)? = payload["subscriptionGroupIdentifier"] {
                    placed = own == target
                } else {
                    placed = try group(of: facts.productID) == target
                }
            } else {
                placed = false
            }
            if placed { inGroup.append((facts, payload)) }
        }
        guard
            let (first, payload) = inGroup.min(by: {
                ($0.0.purchaseDate ?? $0.0.signedDate, $0.0.transactionID) < ($1.0.purchaseDate ?? $1.0.signedDate, $1.0.transactionID)
            })
        else { return nil }
        return Decider(transaction: first, reason: Self.hadIntroductoryOffer(payload) ? .introductoryOffer : .paidPeriod)
    }

    private func isTheCustomers(_ facts: TransactionFacts) -> Bool {
        guard facts.bundleID == nil || facts.bundleID == bundleID, facts.isAutoRenewable,
            facts.inAppOwnershipType != "FAMILY_SHARED"
        else { return false }
        guard let environment, let other = facts.environment else { return true }
        return environment == other
    }

    private static func hadIntroductoryOffer(_ payload: JSONValue) -> Bool {
        if case .integer(1)? = payload["offerType"] { return true }
        for member in [LedgerFacts.ReceiptOffer.trial, LedgerFacts.ReceiptOffer.introductory] {
            if case .bool(true)? = payload[member] { return true }
        }
        return false
    }
}
