import Ledger

/// Which events one ledger change implies (docs/events.md, "Event types"), with their bodies ("What is sent").
///
/// Kinds a diff can see come from what the write changed, before against after, never from how the fact arrived: a
/// renewal first learned from a receipt and then from Apple's notification changes the ledger once, so it gives one
/// `RENEWAL`, and its dedupe key names the fact (the transaction), not the delivery. Apple's notification type names
/// only the kinds no diff can see (an expiry, a product change, a consumption request…), keyed by its uuid, which the
/// ledger stores once.
///
/// Called inside the ledger's write transaction (one writer thread on SQLite): a change that implies nothing costs a
/// diff of the touched original's facts and nothing more.
struct EventRules: Sendable {
    let entitlementRules: EntitlementRules
    /// `apps[].app_apple_id` by bundle id.
    let appAppleIDs: [String: Int64]
    /// Each event shows its subscription with every transaction of it, so without these a subscription's Nth event
    /// parsed its N transactions again (inside the write, on SQLite's one writer thread): ingest grew with the
    /// square of a subscription's history.
    let transactionTexts = NormalizedTransactionTexts()

    init(configuration: ServiceConfiguration) {
        entitlementRules = configuration.entitlementRules
        var appAppleIDs: [String: Int64] = [:]
        for app in configuration.apps {
            if let id = app.appAppleID { appAppleIDs[app.bundleID] = id }
        }
        self.appAppleIDs = appAppleIDs
    }

    /// One event before its body: its type, the fact it is about, and the account whose stream it goes to.
    struct Kind: Sendable, Hashable {
        var type: EventType
        var dedupeKey: String
        /// The transaction a purchase or refund is about: the body shows it rather than the change's.
        var transactionID: String?

        init(_ type: EventType, _ fact: String..., transactionID: String? = nil) {
            self.type = type
            self.dedupeKey = ([type.rawValue] + fact).joined(separator: ":")
            self.transactionID = transactionID
        }
    }

    /// An account whose active entitlement names the change altered.
    struct EntitlementChange: Sendable, Hashable {
        var account: String
        var before: [String]
        var after: [String]
    }

    func events(_ change: LedgerChange) -> [EventDraft] {
        let factsChanged =
            change.before?.transactions != change.after?.transactions || change.before?.renewal != change.after?.renewal
        var kinds = factsChanged ? Self.factKinds(change) : []
        if case .notification(let notification) = change.cause, let kind = Self.notificationKind(notification, change) {
            kinds.append(kind)
        }
        if case .renewalExtension(_, let effectiveDate) = change.cause {
            kinds.append(Self.renewalExtended(change.originalTransactionID, expiry: effectiveDate))
        }
        if case .transfer(_, let number) = change.cause {
            kinds.append(Kind(.transfer, change.originalTransactionID, String(number)))
        }
        // Entitlements move only with the facts or the owner; unchanged, evaluating them would be wasted.
        let entitlementChanges =
            factsChanged || change.accountBefore != change.accountAfter ? self.entitlementChanges(change) : []
        guard !kinds.isEmpty || !entitlementChanges.isEmpty else { return [] }

        var body = EventBody(change: change, rules: self)
        var drafts = kinds.map { body.draft($0, account: change.accountAfter) }
        for entitlementChange in entitlementChanges {
            let kind = Kind(
                .entitlementsChanged, entitlementChange.account, change.originalTransactionID, String(change.time))
            drafts.append(
                body.draft(kind, account: entitlementChange.account, entitlementsBefore: entitlementChange.before))
        }
        return drafts
    }

    // MARK: - Kinds

    /// What the diff of one original's facts shows, oldest purchase first (a backfilled history reads in order).
    static func factKinds(_ change: LedgerChange) -> [Kind] {
        guard let after = change.after else { return [] }
        var known: [String: TransactionFacts] = [:]
        for transaction in change.before?.transactions ?? [] { known[transaction.transactionID] = transaction }
        var kinds: [Kind] = []
        for transaction in after.transactions.reversed() {
            let id = transaction.transactionID
            let earlier = known[id]
            if earlier == nil {
                // Apple gives the first purchase of a subscription the original's id; every later one (renewal,
                // resubscribe, upgrade) a new id under the same original.
                let type: EventType =
                    !after.isAutoRenewable ? .oneTimePurchase
                    : id == transaction.originalTransactionID ? .initialPurchase : .renewal
                kinds.append(Kind(type, id, transactionID: id))
            }
            if let revoked = transaction.revocationDate, earlier?.revocationDate != revoked {
                kinds.append(Kind(.refund, id, String(revoked), transactionID: id))
            } else if transaction.revocationDate == nil, let revoked = earlier?.revocationDate {
                kinds.append(Kind(.refundReversed, id, String(revoked), transactionID: id))
            }
        }
        guard let renewal = after.renewal, renewal != change.before?.renewal else { return kinds }
        let previous = change.before?.renewal
        let original = after.originalTransactionID
        switch (previous?.autoRenewStatus, renewal.autoRenewStatus) {
        case (true?, false?):
            kinds.append(Kind(.cancellation, original, String(renewal.signedDate)))
        case (false?, true?):
            kinds.append(Kind(.uncancellation, original, String(renewal.signedDate)))
        case (nil, false?):
            // First learned already off: news only while the subscription still grants (else it long ended).
            let state = after.status(at: change.time)
            if state == .active || state == .inGracePeriod {
                kinds.append(Kind(.cancellation, original, String(renewal.signedDate)))
            }
        default:
            break
        }
        if renewal.isInBillingRetryPeriod == true {
            // The renewal that failed is the one due at the latest expiry: the same retry, however learned, one key.
            let failedRenewal = String(after.latestTransaction?.expiresDate ?? renewal.signedDate)
            if previous?.isInBillingRetryPeriod != true {
                kinds.append(Kind(.billingIssue, original, failedRenewal))
            }
            if let grace = renewal.gracePeriodExpiresDate,
                previous?.isInBillingRetryPeriod != true || previous?.gracePeriodExpiresDate != grace
            {
                kinds.append(Kind(.gracePeriodStarted, original, String(grace)))
            }
        }
        return kinds
    }

    /// The kind a notification names that no diff can see; nil for the types that imply nothing beyond their facts.
    static func notificationKind(_ notification: NotificationSummary, _ change: LedgerChange) -> Kind? {
        // Apple's notification of an extension receiptd asked for names the same new expiry as Apple's answer
        // (`effectiveDate`): one key for both, so one extension is one event, whichever the ledger learns first.
        if notification.type == "RENEWAL_EXTENDED", let expiry = change.after?.latestTransaction?.expiresDate {
            return renewalExtended(change.originalTransactionID, expiry: expiry)
        }
        return notificationKind(notification)
    }

    /// `RENEWAL_EXTENDED` keyed by the subscription and its new expiry: the extension, however it is learned.
    static func renewalExtended(_ originalTransactionID: String, expiry: Int64) -> Kind {
        Kind(.renewalExtended, originalTransactionID, String(expiry))
    }

    static func notificationKind(_ notification: NotificationSummary) -> Kind? {
        let type: EventType? =
            switch notification.type {
            case "DID_CHANGE_RENEWAL_PREF": .productChange
            case "EXPIRED", "GRACE_PERIOD_EXPIRED": .expiration
            case "CONSUMPTION_REQUEST": .consumptionRequest
            case "PRICE_INCREASE": .priceIncrease
            case "OFFER_REDEEMED": .offerRedeemed
            case "RENEWAL_EXTENDED": .renewalExtended
            case "TEST": .test
            default: nil
            }
        return type.map { Kind($0, notification.uuid) }
    }

    // MARK: - Entitlements

    /// Every account involved whose active entitlement names differ before and after, at the change's time.
    ///
    /// A write that touches several originals of one account (a first receipt with all its purchases) is one change
    /// per original, each seeing the whole account before and after: only the change of the first touched original
    /// tells, so that the account gets one event per write.
    func entitlementChanges(_ change: LedgerChange) -> [EntitlementChange] {
        let accounts = Set(change.accountsBefore.keys).union(change.accountsAfter.keys)
        var changes: [EntitlementChange] = []
        for account in accounts.sorted() {
            let originalsBefore = change.accountsBefore[account] ?? []
            let originalsAfter = change.accountsAfter[account] ?? []
            let touched = Self.touched(originalsBefore, originalsAfter)
            if touched.contains(where: { $0.utf8.lexicographicallyPrecedes(change.originalTransactionID.utf8) }) {
                continue
            }
            let before = activeNames(originalsBefore, at: change.time)
            let after = activeNames(originalsAfter, at: change.time)
            if before != after { changes.append(EntitlementChange(account: account, before: before, after: after)) }
        }
        return changes
    }

    /// The originals whose facts or ownership differ between an account's two lists.
    static func touched(_ before: [SubscriptionFacts], _ after: [SubscriptionFacts]) -> [String] {
        var earlier: [String: SubscriptionFacts] = [:]
        for facts in before { earlier[facts.originalTransactionID] = facts }
        var touched: [String] = []
        for facts in after {
            if earlier.removeValue(forKey: facts.originalTransactionID) != facts {
                touched.append(facts.originalTransactionID)
            }
        }
        return touched + earlier.keys
    }

    /// The names some of these originals grant at `instant`, sorted; offers are not read (names are all events need).
    func activeNames(_ originals: [SubscriptionFacts], at instant: Int64) -> [String] {
        var names = Set<String>()
        for facts in originals {
            for source in entitlementRules.sources(of: facts, at: instant) where source.isActive {
                names.insert(source.name)
            }
        }
        return names.sorted()
    }
}
