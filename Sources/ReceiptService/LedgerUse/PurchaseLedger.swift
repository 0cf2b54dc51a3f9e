import Dispatch
public import Ledger
import Synchronization

/// The ledger as the service uses it: configured or not, reachable or not, and never the cause of a wrong answer.
///
/// One background task owns the database's health: it opens the store (again and again, with back-off, while the
/// database is down at start), writes a heartbeat to it every second, and is the only one to try it again once it
/// was found unreachable or frozen. Requests meanwhile answer at once without the ledger: a frozen database costs the
/// one request that found it so one `store_timeout`, not every request, and all of a request's ledger work shares
/// that one `store_timeout`. A write that fails (disk full, read-only, corrupt) marks the ledger unavailable for
/// `/readyz`; only the background task's heartbeat write (and, after damage, an integrity check) makes it available
/// again, so readiness does not flap with the writes that happen to fit. A full pool or writer queue turns the one
/// request away (`busy`) and says nothing about health. A schema newer than this binary is never retried: it needs
/// a newer receiptd.
public final class PurchaseLedger: Sendable {
    /// Why an operation that needs the ledger cannot run.
    public enum Unavailability: Error, Sendable, Equatable {
        /// No `store` key: receiptd runs stateless.
        case notConfigured
        /// Configured but unreachable or failing; the ledger's error says how.
        case unavailable(LedgerError)
    }

    /// What `/readyz` answers from: kept by the background task and by every request's outcome, never asked of the
    /// database on the spot.
    public enum Health: Sendable, Equatable {
        case available
        /// Since when (Unix milliseconds) and why; `message` is the database's own (passwords masked).
        case unavailable(reason: LedgerError.Reason, message: String, since: Int64)

        public var reason: LedgerError.Reason? {
            if case .unavailable(let reason, _, _) = self { return reason }
            return nil
        }

        fileprivate var reasonAndMessage: (LedgerError.Reason, String) {
            switch self {
            case .available: (.unreachable, "the store is not open yet")
            case .unavailable(let reason, let message, _): (reason, "the ledger is unavailable (\(reason)): \(message)")
            }
        }
    }

    private let open: (@Sendable () throws(LedgerError) -> any LedgerStore)?
    private let state: Mutex<State>
    private let healthQueue = DispatchQueue(label: "receiptd.ledger.health")
    /// Requests doing ledger work at once, beyond which one answers 503 at once rather than take another thread.
    private let maximumConcurrentWork: Int
    /// `store_timeout`: the longest all of one request's ledger work may wait, together.
    private let storeTimeout: Double
    /// What this process already wrote, by source and transaction id, with the signing time and a hash of the
    /// payload it wrote: a receipt validated again (backends re-check stored receipts nightly) then costs the ledger
    /// a read, not a write. Another payload signed at the same time still goes to the ledger, whose tie-breaks decide.
    private let written = Mutex(BoundedMemory<(signedDate: Int64, payload: Int)>())
    /// Whether this process is the ledger's only server (SQLite, one replica), so that what it read stays true until
    /// it writes again or another process (the command line) commits to the file: subscriptions are then remembered
    /// between writes, and a validation that changes nothing costs no database work at all. With PostgreSQL other
    /// replicas write too, and every read goes to the database.
    private let isExclusiveWriter: Bool
    private let subscriptions = Mutex(SubscriptionMemory())
    /// Accounts as last read, with the memory's stamp taken before they were: see ``rememberedAccountRecord``.
    private let accountRecords = Mutex(BoundedMemory<(record: AccountRecord, stamp: MemoryStamp)>())

    private struct State {
        var store: (any LedgerStore)?
        var health: Health
        /// Set while the database is unreachable or frozen: requests then leave it to the background task.
        var requestsHeld: Bool
        var inFlight = 0
        var failedProbes = 0
        /// Whether the store was tried at all: until then, "not open yet" is no news to log.
        var hasTried = false
        /// The reason last told to the observer (nil: available), so each change is logged once.
        var announced: LedgerError.Reason?
        var observer: (@Sendable (Health) -> Void)?
        /// Set by `close`: nothing opens, probes or uses the store again.
        var isClosed = false
        /// A heartbeat asked for by a client's successful write is queued.
        var heartbeatQueued = false
    }

    /// What a request's ledger work may take beyond `store_timeout`, in seconds: enough for the database's own
    /// timeouts (a lock wait, a statement timeout), which say why they fired, to end a wait before the bare deadline.
    static let reasonGrace = 0.5
    /// How often the background task writes its heartbeat to a healthy database, in seconds.
    static let heartbeatInterval = 1.0
    /// The first and the longest pause between tries of a database that does not answer, in seconds.
    static let backoff = (first: 0.05, longest: 2.0)

    /// A stateless service.
    public static let none = PurchaseLedger(opening: nil)

    /// - Parameters:
    ///   - open: makes (connects, migrates) the store; called by the background task until it succeeds.
    ///   - isExclusiveWriter: nothing but this process writes to the store.
    ///   - maximumConcurrentWork: requests that may wait on the ledger at once (each holds a thread): enough to keep
    ///     four pooled connections and SQLite's group commit busy, few enough that a hung database cannot take the
    ///     server's threads.
    ///   - storeTimeout: the longest one request's ledger calls may wait in all.
    public convenience init(
        opening open: (@Sendable () throws(LedgerError) -> any LedgerStore)?, isExclusiveWriter: Bool = false,
        maximumConcurrentWork: Int = 32, storeTimeout: Double = LedgerConfiguration.defaultTimeout
    ) {
        self.init(
            open: open, store: nil, isExclusiveWriter: isExclusiveWriter, maximumConcurrentWork: maximumConcurrentWork,
            storeTimeout: storeTimeout)
    }

    /// A ledger on a store that is already open (tests, benchmarks); a SQLite one is taken to be this process's own.
    public convenience init(
        store: any LedgerStore, maximumConcurrentWork: Int = 32,
        storeTimeout: Double = LedgerConfiguration.defaultTimeout
    ) {
        self.init(
            open: { store }, store: store, isExclusiveWriter: store is SQLiteLedger,
            maximumConcurrentWork: maximumConcurrentWork, storeTimeout: storeTimeout)
    }

    private init(
        open: (@Sendable () throws(LedgerError) -> any LedgerStore)?, store: (any LedgerStore)?,
        isExclusiveWriter: Bool, maximumConcurrentWork: Int, storeTimeout: Double
    ) {
        self.open = open
        self.isExclusiveWriter = isExclusiveWriter
        self.maximumConcurrentWork = maximumConcurrentWork
        self.storeTimeout = storeTimeout
        let health = store != nil || open == nil
            ? Health.available
            : .unavailable(reason: .unreachable, message: "the store is not open yet", since: unixMillisecondsNow())
        state = Mutex(State(store: store, health: health, requestsHeld: store == nil))
        if open != nil { scheduleProbe(after: store == nil ? 0 : Self.heartbeatInterval) }
    }

    public var isConfigured: Bool { open != nil }

    /// The ledger's health as last seen; never waits on the database.
    public var health: Health { state.withLock { $0.health } }

    /// Requests doing ledger work now.
    var workInFlight: Int { state.withLock { $0.inFlight } }

    /// How many subscriptions are remembered.
    var rememberedSubscriptions: Int { subscriptions.withLock { $0.facts.count } }

    /// For `/readyz`: whether the ledger was answering when last seen. A stateless service is always ready.
    public var isReachable: Bool { health == .available }

    /// Calls `observer` on each change of health (a new reason, or back to available), from the background task or a
    /// request: once per change, never once per request. The background task may have found the database unusable
    /// before the observer was set; it hears that first.
    public func observeHealth(_ observer: @escaping @Sendable (Health) -> Void) {
        let missed: Health? = state.withLock { state in
            state.observer = observer
            guard state.hasTried, let reason = state.health.reason, state.announced != reason else { return nil }
            state.announced = reason
            return state.health
        }
        if let missed { observer(missed) }
    }

    /// Runs `body` on the store, every ledger wait in it ending `storeTimeout` from now. Fails at once, without
    /// touching the database, while it is known to be unreachable or frozen, and (`busy`) when
    /// `maximumConcurrentWork` requests already wait on it.
    public func withStore<Result>(
        _ body: (any LedgerStore) throws(LedgerError) -> Result
    ) throws(Unavailability) -> Result {
        guard open != nil else { throw .notConfigured }
        let admitted: Swift.Result<any LedgerStore, LedgerError> = state.withLock { state in
            guard !state.requestsHeld, !state.isClosed, let store = state.store else {
                let (reason, message) = state.health.reasonAndMessage
                return .failure(LedgerError(.unavailable, message, reason: reason))
            }
            guard state.inFlight < maximumConcurrentWork else {
                return .failure(LedgerError(.busy, "\(maximumConcurrentWork) requests already wait on the ledger"))
            }
            state.inFlight += 1
            return .success(store)
        }
        let store: any LedgerStore
        switch admitted {
        case .success(let admittedStore): store = admittedStore
        case .failure(let error): throw .unavailable(error)
        }
        defer { state.withLock { $0.inFlight -= 1 } }
        do {
            return try LedgerDeadline.within(seconds: storeTimeout + Self.reasonGrace) { () throws(LedgerError) in
                try body(store)
            }
        } catch {
            note(failure: error, callerMayBeAtFault: true)
            throw .unavailable(error)
        }
    }

    /// ``withStore(_:)`` for background workers, which know no HTTP answer: a missing store is `unavailable` like one
    /// that cannot be reached, and the worker tries again later either way.
    public func withReachableStore<Result>(
        _ body: (any LedgerStore) throws(LedgerError) -> Result
    ) throws(LedgerError) -> Result {
        do {
            return try withStore { (store) throws(LedgerError) in try body(store) }
        } catch {
            switch error {
            case .notConfigured: throw LedgerError(.unavailable, "no store is configured")
            case .unavailable(let cause): throw cause
            }
        }
    }

    // MARK: - Health

    private func scheduleProbe(after delay: Double) {
        healthQueue.asyncAfter(deadline: .now() + delay) { [weak self] in self?.probe() }
    }

    /// One round of the background task; it ends when the ledger is deallocated.
    private func probe() {
        guard !state.withLock({ $0.isClosed }) else { return }
        let failure = probeOnce()
        let delay = state.withLock { state -> Double in
            guard failure != nil else {
                state.failedProbes = 0
                return Self.heartbeatInterval
            }
            state.failedProbes += 1
            let doublings = min(state.failedProbes - 1, 16)
            return min(Self.backoff.longest, Self.backoff.first * Double(1 << doublings))
        }
        scheduleProbe(after: delay)
    }

    /// Opens the store if it is not open, then writes its heartbeat: readiness means writes work, and a server that
    /// is not ready gets no traffic, so readiness must not wait for a client's write to come back. A file once found
    /// damaged is checked as well, since writes may still succeed on it. Only ever runs on `healthQueue`.
    private func probeOnce() -> LedgerError? {
        guard let open else { return nil }
        let (current, reason, isClosed) = state.withLock { ($0.store, $0.health.reason, $0.isClosed) }
        guard !isClosed else { return nil }
        do throws(LedgerError) {
            if let current {
                try current.checkWritable()
                if reason == .corrupt { try current.checkIntegrity() }
                noteHeartbeat()
            } else {
                let opened = try open()
                // A close that came while the store was opening wins: the new store is closed, never used.
                let keep = state.withLock { state -> Bool in
                    guard !state.isClosed else { return false }
                    state.store = opened
                    return true
                }
                guard keep else {
                    try? opened.close()
                    return nil
                }
                try opened.checkWritable()
                noteHeartbeat()
            }
            return nil
        } catch where error.code == .busy {
            // Other requests hold every connection: that is load, and says nothing about the database.
            return nil
        } catch {
            note(failure: error, callerMayBeAtFault: false)
            return error
        }
    }

    /// A client's write went through while the ledger is not ready: the heartbeat, which alone decides, runs now
    /// rather than at its next turn.
    private func heartbeatSoon() {
        let queue = state.withLock { state -> Bool in
            guard state.health.reason != nil, !state.heartbeatQueued, !state.isClosed else { return false }
            state.heartbeatQueued = true
            return true
        }
        guard queue else { return }
        healthQueue.async { [weak self] in
            guard let self else { return }
            self.state.withLock { $0.heartbeatQueued = false }
            _ = self.probeOnce()
        }
    }

    /// The background task's heartbeat write (and integrity check) went through: the one proof that brings a failed
    /// store back. A client's write is not: on a nearly full disk some writes fit and others fail.
    private func noteHeartbeat() {
        let change: (Health, (@Sendable (Health) -> Void)?)? = state.withLock { state in
            state.hasTried = true
            guard state.health.reason != nil else { return nil }
            state.health = .available
            state.requestsHeld = false
            guard state.announced != nil else { return nil }
            state.announced = nil
            return (state.health, state.observer)
        }
        if let (health, observer) = change { observer?(health) }
    }

    /// `callerMayBeAtFault`: an error without a reason is then the request's own (a value that cannot be stored),
    /// and says nothing about the database.
    private func note(failure error: LedgerError, callerMayBeAtFault: Bool) {
        guard let reason = error.reason ?? (callerMayBeAtFault ? nil : .error) else { return }
        let change: (Health, @Sendable (Health) -> Void)? = state.withLock { state in
            // The first failure replaces "not open yet" with the database's own words.
            let isFirstTry = !state.hasTried
            state.hasTried = true
            state.requestsHeld = Self.holdsRequests(reason) || state.store == nil
            if state.health.reason != reason || isFirstTry {
                state.health = .unavailable(reason: reason, message: error.message, since: unixMillisecondsNow())
            }
            guard state.announced != reason, let observer = state.observer else { return nil }
            state.announced = reason
            return (state.health, observer)
        }
        if let (health, observer) = change { observer(health) }
    }

    /// An unreachable or frozen database is tried by the background task alone; one that refuses writes is still
    /// worth asking, since reads may work and the next write may succeed.
    private static func holdsRequests(_ reason: LedgerError.Reason) -> Bool {
        reason == .unreachable || reason == .timeout
    }

    /// Whether a transaction from `source` signed at that time is news to what this process wrote; the answer lets
    /// a caller skip building facts that `record` would skip anyway.
    public func needsRecording(source: TransactionSource) -> (_ transactionID: String, _ signedDate: Int64) -> Bool {
        if isExclusiveWriter { forgetIfOthersCommitted(to: state.withLock { $0.store }) }
        return { transactionID, signedDate in
            // The same signing time counts as known: two receipts made in one millisecond show the same entries.
            self.written.withLock { $0[Self.key(source, transactionID)].map { $0.signedDate < signedDate } ?? true }
        }
    }

    private static func key(_ source: TransactionSource, _ transactionID: String) -> String {
        source.rawValue + " " + transactionID
    }

    /// Records transactions unless this process already recorded each of them from `source` as of a later signing
    /// time, or the same payload as of the same time; the ledger would keep its state anyway, so skipping changes
    /// nothing it holds.
    public func record(
        _ transactions: [TransactionFacts], source: TransactionSource, in store: any LedgerStore
    ) throws(LedgerError) {
        func key(_ facts: TransactionFacts) -> String { Self.key(source, facts.transactionID) }
        let othersCommits = forgetIfOthersCommitted(to: store)
        let new = written.withLock { written in
            transactions.filter { facts in
                guard let known = written[key(facts)] else { return true }
                return (known.signedDate, known.payload) != (facts.signedDate, facts.payloadJSON.hashValue)
                    && known.signedDate <= facts.signedDate
            }
        }
        guard !new.isEmpty else { return }
        defer { forget(new.map(\.originalTransactionID)) }
        try store.record(transactions: new, source: source)
        heartbeatSoon()
        written.withLock { written in
            // Another process's commit seen since this write began (a deleted account, say) may have undone it.
            guard subscriptions.withLock({ $0.othersCommits }) == othersCommits else { return }
            for facts in new where (written[key(facts)]?.signedDate ?? .min) <= facts.signedDate {
                written.remember((facts.signedDate, facts.payloadJSON.hashValue), for: key(facts))
            }
        }
    }

    public func record(
        renewal: RenewalFacts, source: TransactionSource, in store: any LedgerStore
    ) throws(LedgerError) {
        defer { forget([renewal.originalTransactionID]) }
        try store.record(renewal: renewal, source: source)
        heartbeatSoon()
    }

    public func record(_ notification: NotificationFacts, in store: any LedgerStore) throws(LedgerError)
        -> NotificationWrite
    {
        defer {
            forget([notification.transaction?.originalTransactionID, notification.renewal?.originalTransactionID]
                .compactMap { $0 })
        }
        let write = try store.record(notification)
        heartbeatSoon()
        return write
    }

    /// A subscription's facts; while this process is the only writer, from memory when nothing was written since.
    public func subscription(
        originalTransactionID: String, in store: any LedgerStore
    ) throws(LedgerError) -> SubscriptionFacts? {
        guard isExclusiveWriter else { return try store.subscription(originalTransactionID: originalTransactionID) }
        forgetIfOthersCommitted(to: store)
        return try rememberedSubscription(originalTransactionID: originalTransactionID, in: store)
    }

    /// ``subscription(originalTransactionID:in:)`` once the caller saw that no other process committed.
    private func rememberedSubscription(
        originalTransactionID: String, in store: any LedgerStore
    ) throws(LedgerError) -> SubscriptionFacts? {
        let (remembered, generation) = subscriptions.withLock { ($0.facts[originalTransactionID], $0.generation) }
        if let remembered { return remembered }
        let facts = try store.subscription(originalTransactionID: originalTransactionID)
        subscriptions.withLock { memory in
            // A write since the read began may have made it stale: keep it only if none happened. An unknown id is
            // not remembered: anyone can ask for any number of them, and answering one again costs a single read.
            guard memory.generation == generation, facts != nil else { return }
            // Transactions and renewal info hold a few hundred bytes of text each.
            let factBytes = 512 * ((facts?.transactions.count ?? 0) + (facts?.renewal == nil ? 0 : 1))
            memory.facts.remember(facts, for: originalTransactionID, bytes: factBytes)
        }
        return facts
    }

    /// An account with the facts of its originals; while this process is the only writer, its links, tokens and
    /// transfers are read and each original's facts come from memory as ``subscription(originalTransactionID:in:)``
    /// gives them, so that an account costs what its subscriptions cost rather than a read of every transaction.
    public func account(_ account: String, in store: any LedgerStore) throws(LedgerError) -> AccountSnapshot? {
        guard isExclusiveWriter else { return try store.account(account) }
        guard let record = try rememberedAccountRecord(account, in: store) else { return nil }
        var subscriptions: [String: SubscriptionFacts] = [:]
        for original in record.originalTransactionIDsWithFacts {
            subscriptions[original] = try rememberedSubscription(originalTransactionID: original, in: store)
        }
        return AccountSnapshot(record: record, subscriptions: subscriptions)
    }

    /// What this process's memory of the ledger holds at one moment: the groups its writer ended, and the forgetting
    /// of subscriptions after each write (which ends after its commit is counted) or after another process's commit.
    /// Two equal stamps, each taken before a read, mean the second read sees what the first saw, so that an answer
    /// worked out from the first may be given again.
    struct MemoryStamp: Equatable, Sendable {
        var writes: UInt64
        var generation: Int
    }

    /// nil where nothing is remembered: PostgreSQL, whose other replicas write too.
    func memoryStamp(in store: any LedgerStore) -> MemoryStamp? {
        guard isExclusiveWriter, let sqlite = store as? SQLiteLedger else { return nil }
        forgetIfOthersCommitted(to: store)
        let writes = sqlite.writesByThisLedger()
        return MemoryStamp(writes: writes, generation: subscriptions.withLock { $0.generation })
    }

    /// The account's links, tokens and transfers; from memory while neither this ledger's writer nor another process
    /// wrote anything since they were read. Every write counts, not only those that link: tokens, claims, posts,
    /// notifications and deletions all may change an account, and each is a write of that one writer.
    private func rememberedAccountRecord(
        _ account: String, in store: any LedgerStore
    ) throws(LedgerError) -> AccountRecord? {
        // Taken before the read: a write that ends during it changes the stamp past what is kept with it.
        guard let stamp = memoryStamp(in: store) else { return try store.accountRecord(account) }
        if let kept = accountRecords.withLock({ $0[account] }), kept.stamp == stamp { return kept.record }
        guard let record = try store.accountRecord(account) else { return nil }
        // Links, tokens and transfers hold a hundred bytes or two each.
        let bytes = 160 * (record.links.count + record.appAccountTokens.count + record.transfers.count)
        accountRecords.withLock { $0.remember((record, stamp), for: account, bytes: bytes) }
        return record
    }

    /// Forgets everything remembered (subscriptions and what was written) once another process committed to the
    /// file: `store sync`'s refund, `accounts delete`, a restore. Called before memory is used, so that an answer
    /// never comes from memory older than another process's commit that ended before the call (see
    /// `SQLiteForeignCommits` for why no such commit goes unseen). Returns the count of such commits seen.
    @discardableResult
    private func forgetIfOthersCommitted(to store: (any LedgerStore)?) -> UInt64 {
        guard isExclusiveWriter, let sqlite = store as? SQLiteLedger else { return 0 }
        let othersCommits = sqlite.commitsByOthers()
        // A caller that read the count before a concurrent one read a larger count must not bring memory back to it.
        let isNews = subscriptions.withLock { memory in
            guard othersCommits > memory.othersCommits else { return false }
            memory.othersCommits = othersCommits
            memory.generation &+= 1
            memory.facts = BoundedMemory()
            return true
        }
        if isNews { written.withLock { $0 = BoundedMemory() } }
        return othersCommits
    }

    /// Called after every write (also a failed one, which may have committed before it failed).
    private func forget(_ originalTransactionIDs: [String]) {
        guard isExclusiveWriter else { return }
        subscriptions.withLock { memory in
            memory.generation &+= 1
            for id in originalTransactionIDs { memory.facts.forget(id) }
        }
    }

    /// Opens the store now, on the background task's queue, so that start-up reports a database it cannot use (a
    /// newer schema above all) before the server listens. An unreachable database is not fatal here: the background
    /// task keeps trying it, and the observer hears why it is unavailable; the failure is returned for a caller to
    /// whom it is fatal (a SQLite file that cannot be opened or is damaged will not heal by waiting).
    @discardableResult
    public func openNow() throws(LedgerError) -> LedgerError? {
        guard open != nil else { return nil }
        let error = healthQueue.sync(execute: { probeOnce() })
        if let error, error.code == .schemaTooNew || error.code == .invalidConfiguration { throw error }
        return error
    }

    /// Closes the store for good, at shutdown once the server stopped: SQLite's file is then whole on its own. The
    /// background task stops, later calls answer `unavailable`, and nothing reopens it.
    public func close() throws(LedgerError) {
        // A stateless service (`none` is shared by every one in the process) has nothing to close.
        guard open != nil else { return }
        let current = state.withLock { state -> (any LedgerStore)? in
            state.isClosed = true
            state.requestsHeld = true
            state.health = .unavailable(
                reason: .unreachable, message: "the ledger is closed", since: unixMillisecondsNow())
            defer { state.store = nil }
            return state.store
        }
        // On the background task's queue: a probe under way finishes before the store closes under it.
        let failure: LedgerError? = healthQueue.sync {
            do throws(LedgerError) {
                try current?.close()
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }
}

/// Subscriptions as last read, and a count of writes that tells a read that raced a write.
private struct SubscriptionMemory {
    var facts = BoundedMemory<SubscriptionFacts?>()
    var generation = 0
    /// `SQLiteLedger.commitsByOthers()` as of the last time everything was forgotten for it.
    var othersCommits: UInt64 = 0
}

/// A dictionary that forgets everything rather than pass `entryLimit` entries or `byteLimit` bytes (estimated high:
/// malloc keeps freed memory per thread arena), so that what it remembers never grows the process without bound.
struct BoundedMemory<Value> {
    private var values: [String: Value] = [:]
    /// What was added since the last reset, estimated high: forgetting an entry does not give its bytes back.
    private var bytes = 0
    let entryLimit: Int
    let byteLimit: Int

    init(entryLimit: Int = 100_000, byteLimit: Int = 4 << 20) {
        self.entryLimit = entryLimit
        self.byteLimit = byteLimit
    }

    var count: Int { values.count }

    subscript(key: String) -> Value? { values[key] }

    /// `bytes`: what the value holds beyond its own size (its arrays and strings).
    mutating func remember(_ value: Value, for key: String, bytes extra: Int = 0) {
        if values[key] == nil {
            // The key's text, and its slot at the dictionary's maximum load (three quarters, rounded up to doubled
            // capacity): hash storage grows by doubling, so a full table costs up to twice its entries.
            let cost = key.utf8.count + 128 + 2 * (MemoryLayout<String>.stride + MemoryLayout<Value>.stride) + extra
            if values.count >= entryLimit || bytes + cost > byteLimit {
                values.removeAll()
                bytes = 0
            }
            bytes += cost
        }
        values[key] = value
    }

    mutating func forget(_ key: String) { values[key] = nil }
}
