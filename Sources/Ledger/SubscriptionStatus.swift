/// Everything the ledger knows about one subscription (one original transaction id).
public struct SubscriptionFacts: Sendable, Hashable {
    public var originalTransactionID: String
    /// Every transaction of this original id, newest first (by purchase date, then expires date).
    public var transactions: [TransactionFacts]
    /// The newest renewal info by signed date.
    public var renewal: RenewalFacts?
    /// The newest notification by signed date, not the last one received.
    public var lastNotification: NotificationSummary?
    /// Every stored notification about this subscription, oldest first by signed date (then uuid): what the support
    /// page lists, and where it finds past grace and billing-retry periods that the newest renewal info no longer
    /// shows.
    public var notifications: [NotificationSummary]
    /// When the ledger last stored something about this subscription (Unix milliseconds, the ledger's clock).
    public var updatedAt: Int64

    public init(
        originalTransactionID: String, transactions: [TransactionFacts], renewal: RenewalFacts?,
        lastNotification: NotificationSummary?, notifications: [NotificationSummary] = [], updatedAt: Int64
    ) {
        self.originalTransactionID = originalTransactionID
        self.transactions = transactions
        self.renewal = renewal
        self.lastNotification = lastNotification
        self.notifications = notifications
        self.updatedAt = updatedAt
    }

    /// The transaction that decides the status: the greatest expires date among those not upgraded; without one, the
    /// latest purchase date. An upgraded transaction decides only when no other is known.
    public var latestTransaction: TransactionFacts? {
        SubscriptionState.latest(of: transactions)
    }

    /// Where ``latestTransaction`` is in ``transactions``: what an answer that writes it by its place needs.
    public var latestTransactionIndex: Int? {
        SubscriptionState.latestIndex(of: transactions)
    }

    /// Whether this is an auto-renewable subscription: renewal info exists only for those, and a transaction says so
    /// by its `type` (a receipt entry, which names no type, by having an expiry date). Consumables, non-consumables
    /// and non-renewing subscriptions are one-time purchases.
    public var isAutoRenewable: Bool {
        renewal != nil || transactions.isEmpty || transactions.contains(where: \.isAutoRenewable)
    }

    /// The status at `now` (Unix milliseconds); see ``SubscriptionState/init(latest:renewal:now:)``.
    public func status(at now: Int64) -> SubscriptionState? {
        SubscriptionState(latest: latestTransaction, renewal: renewal, now: now)
    }
}

/// A subscription's status, computed from stored facts and a given time.
public enum SubscriptionState: String, Sendable, Hashable, CaseIterable {
    case active
    case inGracePeriod = "in_grace_period"
    case inBillingRetry = "in_billing_retry"
    case expired
    case revoked
    /// The customer upgraded to a higher product of the group; the transaction that replaced it has not reached
    /// the ledger yet.
    case upgraded

    /// The status of a subscription whose latest transaction is `latest`, at `now`; nil without a transaction.
    ///
    /// `revoked` when `latest` has a revocation date; else `upgraded` when it was upgraded (whatever its expires
    /// date); else `active` while its expires date is after `now` (or it has none: a purchase that does not expire);
    /// else `inGracePeriod` while the renewal info says billing retry and `now` is before the grace period's end; else
    /// `inBillingRetry` while in billing retry; else `expired`.
    public init?(latest: TransactionFacts?, renewal: RenewalFacts?, now: Int64) {
        guard let latest else { return nil }
        if latest.revocationDate != nil {
            self = .revoked
        } else if latest.isUpgraded == true {
            self = .upgraded
        } else if latest.expiresDate.map({ $0 > now }) ?? true {
            self = .active
        } else if renewal?.isInBillingRetryPeriod == true {
            if let graceEnd = renewal?.gracePeriodExpiresDate, now < graceEnd {
                self = .inGracePeriod
            } else {
                self = .inBillingRetry
            }
        } else {
            self = .expired
        }
    }

    /// A transaction not upgraded wins over an upgraded one (an upgrade's old, longer period must not outlive the
    /// new product's); then the greatest expires date; ties and transactions without one fall back to the latest
    /// purchase date, then the newest signed date, then the transaction id so that the choice never depends on
    /// input order.
    static func latest(of transactions: [TransactionFacts]) -> TransactionFacts? {
        latestIndex(of: transactions).map { transactions[$0] }
    }

    /// ``latest(of:)``'s place: compared in place, key by key, so that no transaction is copied and its id is read
    /// only when everything else ties (an account's entitlements and answers find it for every subscription).
    static func latestIndex(of transactions: [TransactionFacts]) -> Int? {
        guard var best = transactions.indices.first else { return nil }
        for index in transactions.indices.dropFirst() where isDecidedBefore(transactions[best], transactions[index]) {
            best = index
        }
        return best
    }

    private static func isDecidedBefore(_ lhs: TransactionFacts, _ rhs: TransactionFacts) -> Bool {
        let (left, right) = (lhs.isUpgraded == true ? 0 : 1, rhs.isUpgraded == true ? 0 : 1)
        if left != right { return left < right }
        let (leftExpiry, rightExpiry) = (lhs.expiresDate ?? .min, rhs.expiresDate ?? .min)
        if leftExpiry != rightExpiry { return leftExpiry < rightExpiry }
        let (leftPurchase, rightPurchase) = (lhs.purchaseDate ?? .min, rhs.purchaseDate ?? .min)
        if leftPurchase != rightPurchase { return leftPurchase < rightPurchase }
        if lhs.signedDate != rhs.signedDate { return lhs.signedDate < rhs.signedDate }
        return lhs.transactionID < rhs.transactionID
    }
}
