/// The outbox (issue 25): events to the backend's webhooks, written in the same database transaction as the fact that
/// causes them, and delivered from the ledger by whichever server claims them.
///
/// The ledger does not know what an event means. Every write that changes facts (a notification, verified
/// transactions, a renewal info, a link or transfer, a claim) reads the touched original transactions' facts and their
/// owners' accounts before and after, hands them to ``OutboxRules/events`` as a ``LedgerChange``, and stores what it
/// answers: an event row per draft whose `dedupeKey` is new (so a fact learned twice gives one event), with the next
/// `sequence` of its stream (the account, or the original transaction while nobody owns it), and one delivery row per
/// webhook ``OutboxRules/subscribers`` names. A draft no webhook wants is not stored. With ``OutboxRules/none`` (no
/// webhooks configured) writes read nothing more and store no events.
///
/// Deliveries are claimed with a lease (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so replicas share the outbox): at
/// most one delivery per (webhook, stream) is pending-and-claimable at a time, the one with the lowest sequence, so a
/// later event of an account waits while an earlier one is retrying; a `failed` one no longer holds its stream back.
/// Only that head is due: the deliveries behind it wait for their turn, not for a time, and the head's finish
/// (delivered or failed) makes the next one due.

/// What one write did to the facts of one original transaction, and to the accounts involved.
public struct LedgerChange: Sendable {
    /// What caused the write.
    public var cause: LedgerChangeCause
    public var originalTransactionID: String
    /// The original's facts before the write (nil: the ledger held nothing of it) and after.
    public var before: SubscriptionFacts?
    public var after: SubscriptionFacts?
    /// The original's owner before and after the write.
    public var accountBefore: String?
    public var accountAfter: String?
    /// For each account in `accountBefore`/`accountAfter`: every original transaction it owned before the write, with
    /// facts, and every one it owns after (so the rules can tell whether its active entitlements changed).
    public var accountsBefore: [String: [SubscriptionFacts]]
    public var accountsAfter: [String: [SubscriptionFacts]]
    /// When the write happened (Unix ms): the events' `created_at`.
    public var time: Int64

    public init(
        cause: LedgerChangeCause, originalTransactionID: String, before: SubscriptionFacts?, after: SubscriptionFacts?,
        accountBefore: String?, accountAfter: String?, accountsBefore: [String: [SubscriptionFacts]],
        accountsAfter: [String: [SubscriptionFacts]], time: Int64
    ) {
        self.cause = cause
        self.originalTransactionID = originalTransactionID
        self.before = before
        self.after = after
        self.accountBefore = accountBefore
        self.accountAfter = accountAfter
        self.accountsBefore = accountsBefore
        self.accountsAfter = accountsAfter
        self.time = time
    }
}

/// Why the ledger wrote.
public enum LedgerChangeCause: Sendable, Hashable {
    /// A newly stored notification (never a duplicate or a conflict: those change nothing).
    case notification(NotificationSummary)
    /// Verified transactions or a renewal info from a source other than a notification.
    case facts(TransactionSource)
    /// An explicit or token link moved or created the original's owner.
    case link(AccountLinkSource)
    /// A transfer between accounts (`accountBefore` → `accountAfter`), recorded as transfer `number`.
    case transfer(AccountLinkSource, number: Int64)
    /// Apple extended the original's renewal date (receiptd asked): the facts did not change, Apple's signed renewal
    /// comes later (a `RENEWAL_EXTENDED` notification, or the status receiptd fetches after the extension).
    case renewalExtension(requestIdentifier: String, effectiveDate: Int64)
}

/// One event the rules want stored. The ledger adds `id`, `sequence` and `created_at`.
public struct EventDraft: Sendable, Hashable {
    /// The event type, e.g. `RENEWAL`.
    public var type: String
    /// Unique per fact and kind (e.g. `RENEWAL:2000000123`): a draft whose key the ledger holds is dropped.
    public var dedupeKey: String
    /// The account it concerns (its stream), or nil: then the stream is the original transaction.
    public var account: String?
    public var originalTransactionID: String
    public var bundleID: String?
    public var environment: String?
    /// The body's members after `"id"`, `"type"`, `"created_at"` and `"sequence"`, as JSON text without the enclosing
    /// braces, starting with `"environment":` (see docs/events.md); the ledger writes the whole body once, at insert.
    public var bodyMembers: String

    public init(
        type: String, dedupeKey: String, account: String?, originalTransactionID: String, bundleID: String?,
        environment: String?, bodyMembers: String
    ) {
        self.type = type
        self.dedupeKey = dedupeKey
        self.account = account
        self.originalTransactionID = originalTransactionID
        self.bundleID = bundleID
        self.environment = environment
        self.bodyMembers = bodyMembers
    }
}

/// What the service tells the ledger about events; called inside write transactions, with what they see.
public struct OutboxRules: Sendable {
    /// The events one change implies (empty for most writes).
    public var events: @Sendable (_ change: LedgerChange) -> [EventDraft]
    /// The webhooks that want this event (their filters on type, app and environment); none: it is not stored.
    public var subscribers: @Sendable (_ draft: EventDraft) -> [String]
    /// `created_at` as it appears in bodies (ISO 8601 UTC, milliseconds) from Unix ms.
    public var formatTime: @Sendable (_ unixMilliseconds: Int64) -> String
    /// False for ``none``: writes then read nothing more than before.
    public var isActive: Bool

    public init(
        events: @escaping @Sendable (_ change: LedgerChange) -> [EventDraft],
        subscribers: @escaping @Sendable (_ draft: EventDraft) -> [String],
        formatTime: @escaping @Sendable (_ unixMilliseconds: Int64) -> String
    ) {
        self.events = events
        self.subscribers = subscribers
        self.formatTime = formatTime
        self.isActive = true
    }

    /// No webhooks: no events.
    public static let none: OutboxRules = {
        var rules = OutboxRules(events: { _ in [] }, subscribers: { _ in [] }, formatTime: { String($0) })
        rules.isActive = false
        return rules
    }()
}

/// A delivery's state.
public enum DeliveryState: String, Sendable, Hashable, CaseIterable {
    /// Not yet delivered: waiting for its turn, its next try, or in flight under a lease.
    case pending
    /// A 2xx came back.
    case delivered
    /// Retried for the whole retry window (72 hours) without a 2xx; kept, shown, replayable.
    case failed
}

/// One delivery a dispatcher claimed: the event's body, exactly as stored, and the delivery's history.
public struct ClaimedDelivery: Sendable, Hashable {
    public var eventID: String
    public var webhook: String
    public var type: String
    /// The account, or `otx:ORIGINAL` while no account owns the original.
    public var stream: String
    public var sequence: Int64
    /// The full JSON body (the bytes to sign and send).
    public var body: String
    /// Tries made before this one.
    public var attempts: Int
    /// When the event was written (Unix ms): retries stop `retryWindow` after it.
    public var createdAt: Int64
    /// The lease this claim holds, until (Unix ms).
    public var leaseUntil: Int64

    public init(
        eventID: String, webhook: String, type: String, stream: String, sequence: Int64, body: String, attempts: Int,
        createdAt: Int64, leaseUntil: Int64
    ) {
        self.eventID = eventID
        self.webhook = webhook
        self.type = type
        self.stream = stream
        self.sequence = sequence
        self.body = body
        self.attempts = attempts
        self.createdAt = createdAt
        self.leaseUntil = leaseUntil
    }
}

/// How one try of a claimed delivery ended.
public enum DeliveryResult: Sendable, Hashable {
    /// A 2xx: `status`.
    case delivered(status: Int)
    /// Try again at `retryAt` (Unix ms); `status` if the receiver answered, `error` a short reason (no secrets).
    case retry(at: Int64, status: Int?, error: String)
    /// Give up: the retry window is over.
    case failed(status: Int?, error: String)
}

/// How one claimed try ended, for ``LedgerOutbox/finishDeliveries(webhook:holder:_:at:)``.
public struct DeliveryFinish: Sendable, Hashable {
    public var eventID: String
    public var result: DeliveryResult

    public init(eventID: String, result: DeliveryResult) {
        self.eventID = eventID
        self.result = result
    }
}

/// One event and its deliveries, for `webhooks list`, the support page and tests.
public struct OutboxEvent: Sendable, Hashable {
    public struct Delivery: Sendable, Hashable {
        public var webhook: String
        public var state: DeliveryState
        public var attempts: Int
        /// When a pending delivery is due (Unix ms); nil once delivered or failed, and while it waits for an earlier
        /// delivery of its stream.
        public var nextAttemptAt: Int64?
        public var lastStatus: Int?
        public var lastError: String?
        public var deliveredAt: Int64?

        public init(
            webhook: String, state: DeliveryState, attempts: Int, nextAttemptAt: Int64?, lastStatus: Int?,
            lastError: String?, deliveredAt: Int64?
        ) {
            self.webhook = webhook
            self.state = state
            self.attempts = attempts
            self.nextAttemptAt = nextAttemptAt
            self.lastStatus = lastStatus
            self.lastError = lastError
            self.deliveredAt = deliveredAt
        }
    }

    public var id: String
    public var type: String
    public var account: String?
    public var originalTransactionID: String
    public var stream: String
    public var sequence: Int64
    public var createdAt: Int64
    public var body: String
    public var deliveries: [Delivery]

    public init(
        id: String, type: String, account: String?, originalTransactionID: String, stream: String, sequence: Int64,
        createdAt: Int64, body: String, deliveries: [Delivery]
    ) {
        self.id = id
        self.type = type
        self.account = account
        self.originalTransactionID = originalTransactionID
        self.stream = stream
        self.sequence = sequence
        self.createdAt = createdAt
        self.body = body
        self.deliveries = deliveries
    }
}

/// Which events to list, newest first; every condition given must hold.
public struct OutboxQuery: Sendable, Hashable {
    /// Events with at least one delivery in this state.
    public var state: DeliveryState?
    public var account: String?
    public var originalTransactionID: String?
    /// Created at or after (Unix ms).
    public var since: Int64?
    /// Only events listed after this one: the next page of a listing too long for one read.
    public var after: OutboxEvent.Position?
    public var limit: Int

    public init(
        state: DeliveryState? = nil, account: String? = nil, originalTransactionID: String? = nil, since: Int64? = nil,
        after: OutboxEvent.Position? = nil, limit: Int = 100
    ) {
        self.state = state
        self.account = account
        self.originalTransactionID = originalTransactionID
        self.since = since
        self.after = after
        self.limit = limit
    }
}

extension OutboxEvent {
    /// Where an event stands in a listing, newest first: by creation, then sequence, then id (unique).
    public struct Position: Sendable, Hashable {
        public var createdAt: Int64
        public var sequence: Int64
        public var id: String
    }

    public var position: Position { Position(createdAt: createdAt, sequence: sequence, id: id) }
}

/// Which deliveries to send again (set back to `pending`, due now, attempts kept).
public enum OutboxReplay: Sendable, Hashable {
    case events([String])
    case failed
    /// Every delivery of events created at or after (Unix ms).
    case since(Int64)
}

/// One webhook's backlog, for `/metrics`.
public struct WebhookBacklog: Sendable, Hashable {
    public var webhook: String
    public var pending: Int
    /// The oldest pending event's `created_at` (Unix ms), nil when nothing is pending.
    public var oldestPendingCreatedAt: Int64?

    public init(webhook: String, pending: Int, oldestPendingCreatedAt: Int64?) {
        self.webhook = webhook
        self.pending = pending
        self.oldestPendingCreatedAt = oldestPendingCreatedAt
    }
}

/// The outbox operations every ``LedgerStore`` offers (implemented once in `LedgerRecords`).
public protocol LedgerOutbox: Sendable {
    /// Claims up to `limit` deliveries of `webhook` that are due at `now` and head their stream (no earlier pending
    /// delivery of the same webhook and stream), leasing them to `holder` until `leaseUntil`. A lease that ran out
    /// (a replica killed mid-delivery) is claimable again. Oldest due first.
    func claimDeliveries(webhook: String, holder: String, now: Int64, leaseUntil: Int64, limit: Int)
        throws(LedgerError) -> [ClaimedDelivery]

    /// Records how a try ended, only if `holder` still holds the lease; false when it did not (taken over).
    func finishDelivery(eventID: String, webhook: String, holder: String, result: DeliveryResult, at time: Int64)
        throws(LedgerError) -> Bool

    /// ``finishDelivery(eventID:webhook:holder:result:at:)`` for each of `finishes`, in one transaction: a dispatcher
    /// records what its senders finished meanwhile with one commit rather than one per try. Whether each was kept, in
    /// order.
    func finishDeliveries(webhook: String, holder: String, _ finishes: [DeliveryFinish], at time: Int64)
        throws(LedgerError) -> [Bool]

    /// Makes every pending delivery of `webhook` that heads its stream due at `time` (a receiver that answered 2xx
    /// again has recovered: its other streams need not wait out their back-off); how many. What waits behind a head
    /// keeps waiting for its turn.
    func retryNow(webhook: String, at time: Int64) throws(LedgerError) -> Int

    /// Makes due every pending delivery that waits for its turn behind nothing: one a writer stored behind a delivery
    /// whose finish, running beside that write, could not see it and so made nothing due; how many. The dispatcher
    /// runs it every few seconds, so such a delivery waits that long, never for good. It looks on a reader, at the
    /// first waiting delivery of each stream, and writes only when it found one: a backlog costs it a step per
    /// stream, and intake nothing.
    func releaseStrandedDeliveries(at time: Int64) throws(LedgerError) -> Int

    /// Events matching `query`, newest first, with their deliveries.
    func events(_ query: OutboxQuery) throws(LedgerError) -> [OutboxEvent]

    /// Sets matching deliveries back to pending, the first of each stream due at `time` and the others waiting for
    /// their turn behind it; how many.
    func replay(_ replay: OutboxReplay, at time: Int64) throws(LedgerError) -> Int

    /// Pending deliveries per webhook (every webhook that has any).
    func webhookBacklogs() throws(LedgerError) -> [WebhookBacklog]

    /// Deletes events whose every delivery was delivered before `time`; how many.
    func pruneDeliveredEvents(deliveredBefore time: Int64) throws(LedgerError) -> Int
}

extension LedgerOutbox {
    /// One transaction per try, for outboxes that have nothing better (test doubles).
    public func finishDeliveries(webhook: String, holder: String, _ finishes: [DeliveryFinish], at time: Int64)
        throws(LedgerError) -> [Bool]
    {
        var kept: [Bool] = []
        for finish in finishes {
            kept.append(
                try finishDelivery(
                    eventID: finish.eventID, webhook: webhook, holder: holder, result: finish.result, at: time))
        }
        return kept
    }
}
