/// Apple's refund questions (`CONSUMPTION_REQUEST`) and the backend's answers (issue 26): tables
/// `consumption_requests` and `consumption_answers` of schema 7.
///
/// A request is stored in the same transaction as the notification that asks it (a redelivery adds nothing), open
/// for Apple's window: 12 hours from the notification's signed date. The backend's answer is kept per transaction,
/// replaced by each new one. Senders claim due open requests that have an answer under a lease (`FOR UPDATE SKIP
/// LOCKED` on PostgreSQL), as the outbox's deliveries are claimed, so two replicas never send one twice.
public protocol LedgerConsumption: Sendable {
    /// Stores (or replaces) the backend's answer for `transactionID`: a JSON object's text, snake_case as the
    /// backend sent it. An open request of the transaction becomes due at `time`. The transaction's latest request,
    /// with the answer.
    func storeConsumptionAnswer(transactionID: String, body: String, at time: Int64) throws(LedgerError)
        -> ConsumptionRequest?

    /// The backend's answer for `transactionID`, if it gave one.
    func consumptionAnswer(transactionID: String) throws(LedgerError) -> ConsumptionAnswer?

    /// The transaction's latest request (by Apple's signed date), with the answer, or nil.
    func consumptionRequest(transactionID: String) throws(LedgerError) -> ConsumptionRequest?

    /// Requests newest first; `openOnly`: those still open and inside their window at `now`.
    func consumptionRequests(openOnly: Bool, now: Int64, limit: Int) throws(LedgerError) -> [ConsumptionRequest]

    /// Open requests whose window closed before `now` become `expired`; how many.
    func expireConsumptionRequests(now: Int64) throws(LedgerError) -> Int

    /// Claims up to `limit` open requests inside their window, due at `now`, that have an answer and no live lease,
    /// leasing them to `holder` until `leaseUntil`. Oldest first.
    func claimConsumptionRequests(holder: String, now: Int64, leaseUntil: Int64, limit: Int)
        throws(LedgerError) -> [ClaimedConsumptionRequest]

    /// Records how a try ended, only if `holder` still holds the lease and the request is open; false otherwise.
    func finishConsumptionRequest(
        notificationUUID: String, holder: String, result: ConsumptionSendResult, at time: Int64
    ) throws(LedgerError) -> Bool

    /// Requests per state, an open one past its window counted `expired`.
    func consumptionRequestCounts(now: Int64) throws(LedgerError) -> [ConsumptionRequestState: Int]
}

/// Where a refund question stands.
public enum ConsumptionRequestState: String, Sendable, Hashable, CaseIterable {
    /// Inside Apple's window, not yet answered to Apple.
    case open
    /// Apple took the answer (2xx).
    case sent
    /// Apple refused the answer for good (4xx other than 429).
    case failed
    /// The window closed before an answer went out.
    case expired
}

/// The backend's answer to the refund questions about one transaction.
public struct ConsumptionAnswer: Sendable, Hashable {
    public var transactionID: String
    /// A JSON object's text, snake_case as the backend sent it.
    public var body: String
    public var updatedAt: Int64

    public init(transactionID: String, body: String, updatedAt: Int64) {
        self.transactionID = transactionID
        self.body = body
        self.updatedAt = updatedAt
    }
}

/// One `CONSUMPTION_REQUEST` and what became of it. Dates are Unix milliseconds.
public struct ConsumptionRequest: Sendable, Hashable {
    public var notificationUUID: String
    public var transactionID: String
    public var originalTransactionID: String?
    public var bundleID: String?
    public var environment: String?
    /// `data.consumptionRequestReason`, e.g. `UNINTENDED_PURCHASE`, when Apple gave one.
    public var reason: String?
    /// The notification's signed date.
    public var requestedAt: Int64
    /// `requestedAt` + 12 hours: Apple's window.
    public var expiresAt: Int64
    /// As stored: an `open` one past `expiresAt` may not be marked `expired` yet (see ``state(at:)``).
    public var state: ConsumptionRequestState
    public var attempts: Int
    public var nextAttemptAt: Int64?
    /// The body sent to Apple (camelCase, as Apple's `ConsumptionRequest`), once sent.
    public var sentBody: String?
    public var appleStatus: Int?
    public var appleErrorCode: Int64?
    public var lastError: String?
    public var sentAt: Int64?
    /// The backend's answer for the transaction, if any.
    public var answer: ConsumptionAnswer?

    public init(
        notificationUUID: String, transactionID: String, originalTransactionID: String? = nil, bundleID: String? = nil,
        environment: String? = nil, reason: String? = nil, requestedAt: Int64, expiresAt: Int64,
        state: ConsumptionRequestState, attempts: Int = 0, nextAttemptAt: Int64? = nil, sentBody: String? = nil,
        appleStatus: Int? = nil, appleErrorCode: Int64? = nil, lastError: String? = nil, sentAt: Int64? = nil,
        answer: ConsumptionAnswer? = nil
    ) {
        self.notificationUUID = notificationUUID
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.bundleID = bundleID
        self.environment = environment
        self.reason = reason
        self.requestedAt = requestedAt
        self.expiresAt = expiresAt
        self.state = state
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.sentBody = sentBody
        self.appleStatus = appleStatus
        self.appleErrorCode = appleErrorCode
        self.lastError = lastError
        self.sentAt = sentAt
        self.answer = answer
    }

    /// Apple's window: how long after the notification's signed date an answer is taken.
    public static let window: Int64 = 12 * 3600 * 1000

    /// The state at `now`: an open request past its window is expired even before a sender marked it so.
    public func state(at now: Int64) -> ConsumptionRequestState {
        state == .open && now >= expiresAt ? .expired : state
    }
}

/// A request a sender claimed, with what it needs to decide the body: the transaction's type and whether an account
/// claimed it.
public struct ClaimedConsumptionRequest: Sendable, Hashable {
    public var request: ConsumptionRequest
    /// Apple's product type of the transaction (`Consumable`, …), when the ledger holds the transaction.
    public var productType: String?
    /// Whether an account claimed the transaction (`POST /v1/transactions/{id}/claim`).
    public var isClaimed: Bool
    public var leaseUntil: Int64

    public init(request: ConsumptionRequest, productType: String?, isClaimed: Bool, leaseUntil: Int64) {
        self.request = request
        self.productType = productType
        self.isClaimed = isClaimed
        self.leaseUntil = leaseUntil
    }
}

/// How one try to send an answer ended.
public enum ConsumptionSendResult: Sendable, Hashable {
    /// Apple took it: its HTTP status and the body sent.
    case sent(status: Int, body: String)
    /// Try again at `retryAt` (Unix ms).
    case retry(at: Int64, status: Int?, appleErrorCode: Int64?, error: String)
    /// Apple refused it for good.
    case failed(status: Int?, appleErrorCode: Int64?, error: String)
}
