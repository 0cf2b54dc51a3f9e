import JSONText
public import Ledger
import ReceiptEngine

/// Which entitlements purchases grant, from each app's `entitlements`, `non_renewing_durations` and the accepted
/// `environments`; evaluated at an instant over what the ledger holds (``SubscriptionFacts/asOf(_:)``).
///
/// Per original transaction, as of the instant:
/// - An app not in the configuration, or a transaction of an environment the configuration does not accept, grants
///   nothing.
/// - An auto-renewable subscription grants while its status is `active` or `in_grace_period`; otherwise it ended
///   `expired`, `billing_retry`, `refunded` (revoked) or `upgraded`. A product the subscription moved away from
///   ended `upgraded` when its last transaction was upgraded (at the replacement's purchase), else `expired`.
/// - A non-consumable grants from its purchase unless revoked (`refunded`).
/// - A non-renewing subscription grants from its purchase for its configured duration (`expired` after), unless
///   revoked; without a duration, until revoked.
/// - A consumable never grants.
/// - Family sharing grants like a purchase; Apple's `REVOKE` sets a revocation date, which ends it (`refunded`).
/// - A receipt entry names no type: with an expiry date it is an auto-renewable subscription; without one it is a
///   non-consumable, unless its product has a `non_renewing_durations` entry.
///
/// Several sources of one entitlement: the one that lasts longest wins (no expiry beats any expiry), then the later
/// purchase, then the greater original transaction id and transaction id, so that input order never matters.
public struct EntitlementRules: Sendable {
    struct App: Sendable {
        /// Entitlement names by product id, sorted.
        var names: [String: [String]]
        var durations: [String: ISO8601Period]
        var restoreBehavior: RestoreBehavior
    }

    var apps: [String: App]
    var environments: Set<String>

    public init(configuration: ServiceConfiguration) {
        var apps: [String: App] = [:]
        for app in configuration.apps {
            var names: [String: [String]] = [:]
            for (name, products) in app.entitlements {
                for product in products { names[product, default: []].append(name) }
            }
            apps[app.bundleID] = App(
                names: names.mapValues { $0.sorted() }, durations: app.nonRenewingDurations,
                restoreBehavior: app.restoreBehavior)
        }
        self.apps = apps
        self.environments = Set(configuration.environments.map(\.rawValue))
    }

    /// What the ledger asks while linking: each app's restore behavior (`transfer` for an unknown app), and whether
    /// an original transaction grants any entitlement.
    public var linkRules: AccountLinkRules {
        let rules = self
        return AccountLinkRules(
            restoreBehavior: { bundleID in rules.restoreBehavior(of: bundleID) },
            grantsEntitlement: { facts, now in rules.grantsEntitlement(facts, at: now) })
    }

    /// The app's `restore_behavior`; `transfer` for an app not configured, or when the bundle id is unknown.
    public func restoreBehavior(of bundleID: String?) -> RestoreBehavior {
        bundleID.flatMap { apps[$0]?.restoreBehavior } ?? .transfer
    }

    /// Whether this original transaction grants any entitlement at `instant` (Unix milliseconds).
    public func grantsEntitlement(_ facts: SubscriptionFacts, at instant: Int64) -> Bool {
        sources(of: facts, at: instant).contains(where: \.isActive)
    }

    /// The account's entitlements at `instant`, by name: every one some purchase it owned then grants, and every one
    /// some purchase had granted by then (owned, or transferred away by then: `transferred`) that none grants any more.
    public func entitlements(of snapshot: AccountSnapshot, at instant: Int64) -> [Entitlement] {
        entitlements(of: snapshot, owning: snapshot.record.ownership(at: instant), at: instant)
    }

    /// ``entitlements(of:at:)`` with the account's `ownership` at `instant` already worked out, and each winner's
    /// offer read by `periodType` (the texts kept across requests keep it too, rather than parse the payload again).
    func entitlements(
        of snapshot: AccountSnapshot, owning ownership: (owned: [String], transferredAway: [String: Int64]),
        at instant: Int64,
        periodType: (TransactionFacts) -> Entitlement.PeriodType = { EntitlementRules.periodType(of: $0) }
    ) -> [Entitlement] {
        var candidates: [Entitlement] = []
        for originalTransactionID in ownership.owned {
            guard let facts = snapshot.subscriptions[originalTransactionID] else { continue }
            candidates += sources(of: facts, at: instant)
        }
        for (originalTransactionID, transferredAt) in ownership.transferredAway {
            guard let facts = snapshot.subscriptions[originalTransactionID] else { continue }
            for var source in sources(of: facts, at: instant) {
                source.end = .init(date: transferredAt, reason: .transferred)
                candidates.append(source)
            }
        }
        var byName: [String: Entitlement] = [:]
        for candidate in candidates {
            if let held = byName[candidate.name], !Self.isPreferred(candidate, over: held) { continue }
            byName[candidate.name] = candidate
        }
        return byName.values.sorted { $0.name < $1.name }.map { entitlement in
            var entitlement = entitlement
            entitlement.periodType = Self.decidingTransaction(of: entitlement, in: snapshot).map(periodType) ?? .normal
            return entitlement
        }
    }

    /// Active beats ended; between active ones the longer lasting, between ended ones the later ended; then the
    /// later purchase, then the greater ids.
    static func isPreferred(_ candidate: Entitlement, over held: Entitlement) -> Bool {
        if candidate.isActive != held.isActive { return candidate.isActive }
        let (left, right) = (
            candidate.isActive ? candidate.grantsUntil ?? .max : candidate.end?.date ?? .min,
            held.isActive ? held.grantsUntil ?? .max : held.end?.date ?? .min
        )
        if left != right { return left > right }
        let (leftPurchase, rightPurchase) = (candidate.purchaseDate ?? .min, held.purchaseDate ?? .min)
        if leftPurchase != rightPurchase { return leftPurchase > rightPurchase }
        if candidate.originalTransactionID != held.originalTransactionID {
            return held.originalTransactionID.utf8.lexicographicallyPrecedes(candidate.originalTransactionID.utf8)
        }
        return held.transactionID.utf8.lexicographicallyPrecedes(candidate.transactionID.utf8)
    }

    // MARK: - One original transaction

    /// One entry per entitlement this original transaction grants at `instant`, or had granted by then and no longer
    /// does. `periodType` is left `normal`: reading the offer parses the payload, which only the winners need.
    func sources(of storedFacts: SubscriptionFacts, at instant: Int64) -> [Entitlement] {
        var facts = storedFacts.asOf(instant)
        // Only when some is refused: removing nothing still copies every transaction the facts share.
        if refusesSome(facts.transactions) {
            facts.transactions.removeAll { !isAccepted($0.environment) }
        }
        guard let bundleID = facts.transactions.lazy.compactMap(\.bundleID).first, let app = apps[bundleID],
            let latest = facts.latestTransaction
        else { return [] }
        if facts.isAutoRenewable {
            return subscriptionSources(facts, latest: latest, app: app, at: instant)
        }
        let names = app.names[latest.productID] ?? []
        guard !names.isEmpty else { return [] }
        var expires: Int64?
        switch latest.type {
        case "Non-Consumable": break
        case "Non-Renewing Subscription":
            expires = app.durations[latest.productID].map { $0.adding(to: latest.purchaseDate ?? .min) }
        case nil:
            // A receipt entry without an expiry date: a non-renewing subscription only when it has a duration.
            expires = app.durations[latest.productID].map { $0.adding(to: latest.purchaseDate ?? .min) }
        default:
            // Consumables are claimed, never entitlements; a type Apple adds later grants nothing until known.
            return []
        }
        let end: Entitlement.End? =
            if let revoked = latest.revocationDate {
                .init(date: revoked, reason: .refunded)
            } else if let expires, expires <= instant {
                .init(date: expires, reason: .expired)
            } else {
                nil
            }
        return names.map { name in Self.entitlement(name, latest, expires: expires, end: end) }
    }

    private func subscriptionSources(
        _ facts: SubscriptionFacts, latest: TransactionFacts, app: App, at instant: Int64
    ) -> [Entitlement] {
        let renewal = facts.renewal
        var sources: [Entitlement] = []
        // Renewals repeat a product: each one's names are looked up once.
        var products: [String] = []
        for index in facts.transactions.indices where !products.contains(facts.transactions[index].productID) {
            products.append(facts.transactions[index].productID)
        }
        for name in Set(products.flatMap { app.names[$0] ?? [] }).sorted() {
            if app.names[latest.productID]?.contains(name) == true {
                var source = Self.entitlement(name, latest, expires: latest.expiresDate, end: nil)
                source.gracePeriodExpiresDate = renewal?.gracePeriodExpiresDate
                source.willRenew = renewal?.autoRenewStatus
                source.isInBillingRetryPeriod = renewal?.isInBillingRetryPeriod == true
                switch SubscriptionState(latest: latest, renewal: renewal, now: instant) ?? .expired {
                case .active: break
                case .inGracePeriod:
                    source.grantsUntil = renewal?.gracePeriodExpiresDate
                case .expired:
                    source.end = .init(date: latest.expiresDate ?? instant, reason: .expired)
                case .inBillingRetry:
                    // Access lasted through a grace period, if the app has one.
                    let expires = latest.expiresDate ?? instant
                    source.end = .init(
                        date: max(expires, renewal?.gracePeriodExpiresDate ?? expires), reason: .billingRetry)
                case .revoked:
                    source.end = .init(date: latest.revocationDate ?? instant, reason: .refunded)
                case .upgraded:
                    source.end = .init(date: Self.upgradeDate(of: latest, in: facts), reason: .upgraded)
                }
                sources.append(source)
            } else {
                // The subscription moved to a product that does not grant this name: its last transaction of a
                // product that did tells how that ended.
                let granting = facts.transactions.filter { app.names[$0.productID]?.contains(name) == true }
                guard let last = granting.max(by: Self.isPurchasedBefore) else { continue }
                let replacedAt = facts.transactions
                    .filter { Self.isPurchasedBefore(last, $0) }
                    .compactMap(\.purchaseDate).min()
                let end: Entitlement.End =
                    if let revoked = last.revocationDate {
                        .init(date: revoked, reason: .refunded)
                    } else if last.isUpgraded == true {
                        .init(date: Self.upgradeDate(of: last, in: facts), reason: .upgraded)
                    } else {
                        .init(date: min(last.expiresDate ?? .max, replacedAt ?? .max, instant), reason: .expired)
                    }
                sources.append(Self.entitlement(name, last, expires: last.expiresDate, end: end))
            }
        }
        return sources
    }

    /// When the customer moved off `upgraded`: the purchase of the next transaction of its original, or, while the
    /// ledger holds none, when Apple signed the version that says so.
    private static func upgradeDate(of upgraded: TransactionFacts, in facts: SubscriptionFacts) -> Int64 {
        facts.transactions.filter { isPurchasedBefore(upgraded, $0) }.compactMap(\.purchaseDate).min()
            ?? upgraded.signedDate
    }

    private static func isPurchasedBefore(_ lhs: TransactionFacts, _ rhs: TransactionFacts) -> Bool {
        let (left, right) = (lhs.purchaseDate ?? .min, rhs.purchaseDate ?? .min)
        if left != right { return left < right }
        return lhs.transactionID.utf8.lexicographicallyPrecedes(rhs.transactionID.utf8)
    }

    private static func entitlement(
        _ name: String, _ transaction: TransactionFacts, expires: Int64?, end: Entitlement.End?
    ) -> Entitlement {
        Entitlement(
            name: name, productID: transaction.productID, originalTransactionID: transaction.originalTransactionID,
            transactionID: transaction.transactionID, purchaseDate: transaction.purchaseDate, expiresDate: expires,
            ownership: transaction.inAppOwnershipType ?? "PURCHASED", environment: transaction.environment, end: end)
    }

    /// A transaction without an environment (an old receipt) is taken as the receipt was: accepted.
    private func isAccepted(_ environment: String?) -> Bool {
        environment.map(environments.contains) ?? true
    }

    /// Whether some transaction's environment is refused: renewals repeat one environment, looked up once rather than
    /// hashed for every transaction.
    private func refusesSome(_ transactions: [TransactionFacts]) -> Bool {
        var lastAccepted: String?
        for index in transactions.indices {
            guard let environment = transactions[index].environment, environment != lastAccepted else { continue }
            guard environments.contains(environment) else { return true }
            lastAccepted = environment
        }
        return false
    }

    // MARK: - When anything could change

    /// From the latest date of the account's facts at or before `instant` to the earliest one after it: every rule
    /// above, ``SubscriptionFacts/asOf(_:)`` and ``AccountRecord/ownership(at:)`` compare the instant with such a
    /// date (a purchase, an expiry, a revocation, a signing that tells an upgrade, a grace period's end, a
    /// non-renewing purchase's end, a transfer), each as "the date is at or before the instant", so that within the
    /// span every one of them decides alike. A rule that compares the instant with anything else must add it here.
    func unchangedSpan(of snapshot: AccountSnapshot, around instant: Int64) -> Range<Int64> {
        var lower = Int64.min
        var upper = Int64.max
        func consider(_ date: Int64?) {
            guard let date else { return }
            if date <= instant { lower = max(lower, date) } else { upper = min(upper, date) }
        }
        for transfer in snapshot.record.transfers { consider(transfer.transferredAt) }
        for facts in snapshot.subscriptions.values {
            consider(facts.renewal?.gracePeriodExpiresDate)
            for transaction in facts.transactions {
                consider(transaction.purchaseDate)
                consider(transaction.expiresDate)
                consider(transaction.revocationDate)
                consider(transaction.signedDate)
                // Whichever app's duration the rules take, every one that names the product is considered.
                for app in apps.values {
                    if let duration = app.durations[transaction.productID] {
                        consider(duration.adding(to: transaction.purchaseDate ?? .min))
                    }
                }
            }
        }
        return lower..<upper
    }

    // MARK: - Offers

    /// The transaction the entitlement was decided by, whose offer is its `period_type`.
    static func decidingTransaction(of entitlement: Entitlement, in snapshot: AccountSnapshot) -> TransactionFacts? {
        snapshot.subscriptions[entitlement.originalTransactionID]?.transactions
            .first(where: { $0.transactionID == entitlement.transactionID })
    }

    /// The transaction's offer, read from its stored payload: StoreKit 2's `offerType` and `offerDiscountType`, or the
    /// receipt fields the ledger keeps for receipt entries.
    static func periodType(of transaction: TransactionFacts) -> Entitlement.PeriodType {
        periodType(of: LedgerFacts.payload(transaction.payloadJSON))
    }

    static func periodType(of payload: JSONValue) -> Entitlement.PeriodType {
        if case .integer(let offerType)? = payload["offerType"] {
            switch offerType {
            case 1: return payload["offerDiscountType"] == .string("FREE_TRIAL") ? .trial : .intro
            case 2, 3, 4: return .promotional
            default: break
            }
        }
        if payload[LedgerFacts.ReceiptOffer.trial] == .bool(true) { return .trial }
        if payload[LedgerFacts.ReceiptOffer.introductory] == .bool(true) { return .intro }
        if case .string? = payload[LedgerFacts.ReceiptOffer.promotionalOfferID] { return .promotional }
        return .normal
    }
}

extension ServiceConfiguration {
    /// The entitlement rules of this configuration's apps.
    public var entitlementRules: EntitlementRules { EntitlementRules(configuration: self) }

    /// What the ledger asks while linking accounts: each app's `restore_behavior`, and the entitlement rules.
    public var accountLinkRules: AccountLinkRules { entitlementRules.linkRules }
}
