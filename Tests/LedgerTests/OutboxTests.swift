import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Ledger

/// The outbox: events stored in the transaction of the fact that causes them, once per fact, numbered per stream;
/// deliveries claimed by stream heads under a lease, finished, replayed and pruned.
struct OutboxTests {
    typealias E = AppleEvents

    /// Rules of this test: `NEW` for each transaction the change added (keyed by its id), `LINKED` when the original's
    /// owner changed, and `SEEN` once per original whatever the change (so later changes test the dedupe). Every
    /// change is kept in `seen`.
    final class Rules: Sendable {
        let seen = Mutex<[LedgerChange]>([])
        let subscribers: [String]
        let bodyMembers: String

        init(subscribers: [String] = ["backend"], bodyMembers: String = #""environment":"Sandbox""#) {
            self.subscribers = subscribers
            self.bodyMembers = bodyMembers
        }

        var outbox: OutboxRules {
            OutboxRules(
                events: { [self] change in
                    seen.withLock { $0.append(change) }
                    let known = Set(change.before?.transactions.map(\.transactionID) ?? [])
                    var drafts = (change.after?.transactions ?? []).filter { !known.contains($0.transactionID) }
                        .sorted { $0.transactionID < $1.transactionID }
                        .map { draft("NEW", "NEW:\($0.transactionID)", change) }
                    if change.accountBefore != change.accountAfter, let account = change.accountAfter {
                        drafts.append(draft("LINKED", "LINKED:\(change.originalTransactionID):\(account)", change))
                    }
                    drafts.append(draft("SEEN", "SEEN:\(change.originalTransactionID)", change))
                    return drafts
                },
                subscribers: { [subscribers] draft in draft.type == "IGNORED" ? [] : subscribers },
                formatTime: { "t\($0)" }
            )
        }

        func draft(_ type: String, _ key: String, _ change: LedgerChange) -> EventDraft {
            EventDraft(
                type: type, dedupeKey: key, account: change.accountAfter,
                originalTransactionID: change.originalTransactionID, bundleID: "com.example.app",
                environment: "Sandbox", bodyMembers: bodyMembers
            )
        }
    }

    static func open(
        _ location: DatabaseLocation, _ rules: Rules, clock: @escaping LedgerClock = TestClock.fixed,
        timeout: Double = LedgerConfiguration.defaultTimeout
    ) throws -> any LedgerStore {
        switch location {
        case .sqlite(let path): try SQLiteLedger(path: path, timeout: timeout, clock: clock, outbox: rules.outbox)
        case .postgres(let connectionString):
            try PostgresLedger(
                connectionString: connectionString, poolSize: 4, timeout: timeout, clock: clock, outbox: rules.outbox)
        }
    }

    static func open(_ backend: Backend, _ rules: Rules = Rules()) throws -> any LedgerStore {
        try open(try DatabaseLocation.fresh(backend), rules)
    }

    /// Two ledgers on one PostgreSQL database, as two replicas; SQLite serves one process, with one writer.
    static func replicas(
        _ backend: Backend, _ open: () throws -> any LedgerStore
    ) throws -> [any LedgerStore] {
        backend == .postgres ? [try open(), try open()] : [try open()]
    }

    static func transaction(_ id: String, original: String) -> TransactionFacts {
        E.transaction(id, purchase: E.t0, expires: E.t0 + 30 * E.day, signed: E.t0, original: original)
    }

    static func all(_ ledger: any LedgerStore) throws -> [OutboxEvent] {
        try ledger.events(OutboxQuery(limit: 10_000))
    }

    // MARK: - writing events

    @Test(arguments: Backend.tested)
    func aNewTransaction_storesItsEventWithBodyAndDeliveries(_ backend: Backend) throws {
        let ledger = try Self.open(backend, Rules(subscribers: ["backend", "crm"]))
        try ledger.record(transactions: [E.firstMonth], source: .jws)
        let events = try Self.all(ledger)
        #expect(events.map(\.type).sorted() == ["NEW", "SEEN"])
        let new = try #require(events.first { $0.type == "NEW" })
        #expect(new.id.hasPrefix("evt_") && new.id.count == 36)
        #expect(new.id.dropFirst(4).allSatisfy { "0123456789abcdef".contains($0) })
        #expect(new.stream == "otx:\(E.original)")
        #expect(new.account == nil)
        #expect(new.createdAt == TestClock.fixed())
        #expect(
            new.body
                == #"{"id":"\#(new.id)","type":"NEW","created_at":"t\#(TestClock.fixed())","#
                + #""sequence":\#(new.sequence),"environment":"Sandbox"}"#)
        #expect(new.deliveries.map(\.webhook) == ["backend", "crm"])
        #expect(new.deliveries.allSatisfy { $0.state == .pending && $0.attempts == 0 })
        #expect(Set(events.map(\.sequence)) == [1, 2])
        #expect(Set(events.map(\.id)).count == 2)
    }

    @Test(arguments: Backend.tested)
    func theRules_seeTheFactsBeforeAndAfterTheWrite(_ backend: Backend) throws {
        let rules = Rules()
        let ledger = try Self.open(backend, rules)
        _ = try ledger.record(E.subscribed)
        _ = try ledger.link(originalTransactionIDs: [E.original], to: "alice", source: .purchase, at: 5)
        _ = try ledger.record(E.didRenew())
        _ = try ledger.link(originalTransactionIDs: [E.original], to: "bob", source: .purchase, at: 6)
        let changes = rules.seen.withLock { $0 }
        try #require(changes.count == 4)
        #expect(changes[0].before == nil)
        #expect(changes[0].after?.transactions.map(\.transactionID) == ["1000"])
        #expect(
            changes[0].cause
                == .notification(
                    NotificationSummary(
                        uuid: E.subscribed.uuid, type: "SUBSCRIBED", subtype: "INITIAL_BUY", signedDate: E.t0)))
        #expect(changes[1].cause == .link(.purchase))
        #expect(changes[1].accountBefore == nil && changes[1].accountAfter == "alice")
        #expect(changes[1].accountsBefore["alice"] == [])
        #expect(changes[1].accountsAfter["alice"]?.map(\.originalTransactionID) == [E.original])
        #expect(changes[2].accountBefore == "alice" && changes[2].accountAfter == "alice")
        #expect(changes[2].accountsBefore["alice"]?.first?.transactions.count == 1)
        #expect(changes[2].accountsAfter["alice"]?.first?.transactions.count == 2)
        #expect(changes[3].cause == .transfer(.purchase, number: 1))
        #expect(changes[3].accountsBefore["alice"]?.count == 1 && changes[3].accountsAfter["alice"] == [])
        #expect(changes[3].accountsBefore["bob"] == [] && changes[3].accountsAfter["bob"]?.count == 1)
        // The new transaction's event went to the account's stream, numbered on from its link's.
        let events = try Self.all(ledger)
        let renewal = try #require(events.first { $0.type == "NEW" && $0.account == "alice" })
        #expect(renewal.stream == "alice")
        #expect(try ledger.events(OutboxQuery(account: "bob")).map(\.type) == ["LINKED"])
    }

    @Test(arguments: Backend.tested)
    func aWriteThatFails_storesNeitherTheFactNorItsEvent(_ backend: Backend) throws {
        // A body the database cannot store fails the write after the fact was written, inside its transaction.
        let ledger = try Self.open(backend, Rules(bodyMembers: "\"environment\":\"a\u{0}b\""))
        let error = ledgerError { try ledger.record(transactions: [E.firstMonth], source: .jws) }
        #expect(error?.code == .invalidData)
        #expect(try ledger.transaction(id: "1000") == nil)
        #expect(try Self.all(ledger).isEmpty)
    }

    @Test(arguments: Backend.tested)
    func aFactLearnedTwice_givesOneEvent(_ backend: Backend) throws {
        let ledger = try Self.open(backend)
        #expect(try ledger.record(E.subscribed) == .stored)
        #expect(try ledger.record(E.subscribed) == .duplicate)
        try ledger.record(transactions: [E.firstMonth], source: .serverAPI)
        // A new notification changes the facts; its SEEN draft's key is held already.
        _ = try ledger.record(E.autoRenewDisabled)
        let events = try Self.all(ledger)
        #expect(events.map(\.type).sorted() == ["NEW", "SEEN"])
        #expect(events.map(\.sequence).sorted() == [1, 2])
    }

    @Test(arguments: Backend.tested)
    func aDraftNobodyWants_isNotStoredAndTakesNoSequence(_ backend: Backend) throws {
        let rules = Rules()
        let ignoring = OutboxRules(
            events: { change in
                rules.outbox.events(change).map { draft in
                    var draft = draft
                    if draft.type == "SEEN" { draft.type = "IGNORED" }
                    return draft
                }
            },
            subscribers: rules.outbox.subscribers, formatTime: rules.outbox.formatTime
        )
        let location = try DatabaseLocation.fresh(backend)
        let ledger: any LedgerStore =
            switch location {
            case .sqlite(let path): try SQLiteLedger(path: path, clock: TestClock.fixed, outbox: ignoring)
            case .postgres(let connection):
                try PostgresLedger(connectionString: connection, clock: TestClock.fixed, outbox: ignoring)
            }
        try ledger.record(transactions: [E.firstMonth], source: .jws)
        try ledger.record(transactions: [Self.transaction("1001", original: E.original)], source: .jws)
        #expect(try Self.all(ledger).map(\.sequence).sorted() == [1, 2])
        #expect(try Self.all(ledger).allSatisfy { $0.type == "NEW" })
    }

    @Test(arguments: Backend.tested)
    func oneWriteOfManyOriginals_givesOneChangeEach(_ backend: Backend) throws {
        let rules = Rules()
        let ledger = try Self.open(backend, rules)
        try ledger.record(
            transactions: [
                Self.transaction("a1", original: "a"), Self.transaction("b1", original: "b"),
                Self.transaction("a2", original: "a"),
            ],
            source: .receipt
        )
        #expect(rules.seen.withLock { $0.map(\.originalTransactionID) } == ["a", "b"])
        let streams = Dictionary(grouping: try Self.all(ledger), by: \.stream).mapValues { $0.map(\.sequence).sorted() }
        #expect(streams == ["otx:a": [1, 2, 3], "otx:b": [1, 2]])
    }

    @Test(arguments: Backend.tested)
    func withoutWebhooks_nothingIsStored(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        _ = try ledger.record(E.subscribed)
        _ = try ledger.link(originalTransactionIDs: [E.original], to: "alice", source: .purchase, at: 5)
        #expect(try Self.all(ledger).isEmpty)
    }

    @Test(arguments: Backend.tested)
    func tokenRegistrationAndClaim_produceLinkEvents(_ backend: Backend) throws {
        let rules = Rules()
        let ledger = try Self.open(backend, rules)
        try ledger.record(transactions: [AccountTests.tokened("1000")], source: .jws)
        try ledger.record(transactions: [Self.transaction("2000", original: "2000")], source: .jws)
        _ = try ledger.registerAppAccountToken(AccountTests.tokenA, account: "alice", at: 5)
        #expect(try ledger.claim(transactionID: "2000", account: "bob", at: 6) == .granted(first: true, claimedAt: 6))
        #expect(try ledger.events(OutboxQuery(account: "alice")).map(\.type) == ["LINKED"])
        #expect(try ledger.events(OutboxQuery(account: "bob")).map(\.type) == ["LINKED"])
        let causes = rules.seen.withLock { $0.map(\.cause) }
        #expect(causes.suffix(2) == [.link(.appAccountToken), .link(.claim)])
    }

    // MARK: - sequences

    @Test(arguments: Backend.tested)
    func concurrentWriters_numberEachStreamWithoutGapsOrRepeats(_ backend: Backend) throws {
        let location = try DatabaseLocation.fresh(backend)
        // What is tested is the numbering, not how fast: two replicas' groups wait on each other's stream locks, and
        // on a loaded machine a group took longer than the default 2 s store_timeout (8 of 240 writes, 1 run in 5).
        let ledgers = try Self.replicas(backend) { try Self.open(location, Rules(), timeout: 15) }
        let failures = Atomic<Int>(0)
        let perThread = 30
        onThreads(8) { thread in
            for index in 0..<perThread {
                let original = "o\(index % 3)"
                // Groups of two replicas lock the same streams and wait on each other; on a loaded machine a write may
                // still not commit within store_timeout (`unavailable`): the caller retries, as Apple does a
                // notification answered 503, and a write that committed after its caller gave up gives no second event.
                for attempt in 1...3 {
                    do {
                        try ledgers[thread % ledgers.count].record(
                            transactions: [Self.transaction("t\(thread)-\(index)", original: original)], source: .jws
                        )
                        break
                    } catch let error as LedgerError where error.code == .unavailable && attempt < 3 {
                        continue
                    } catch {
                        failures.add(1, ordering: .relaxed)
                    }
                }
            }
        }
        #expect(failures.load(ordering: .relaxed) == 0)
        let events = try Self.all(ledgers[0])
        #expect(events.filter { $0.type == "NEW" }.count == 8 * perThread)
        for (stream, inStream) in Dictionary(grouping: events, by: \.stream) {
            #expect(inStream.map(\.sequence).sorted() == Array(1...Int64(inStream.count)), "\(stream)")
        }
    }

    @Test(arguments: Backend.tested)
    func concurrentWritesOfOneAccount_numberEventsInTheOrderOfTheStatesTheySaw(_ backend: Backend) throws {
        // Each change says how many transactions the account holds after it.
        let ledgers = try Self.countingReplicas(backend) { change in
            guard let account = change.accountAfter, let after = change.after else { return nil }
            let total = change.accountsAfter[account]?.reduce(0) { $0 + $1.transactions.count } ?? 0
            return ("COUNT:\(change.originalTransactionID):\(after.transactions.count)", account, total)
        }
        let originals = (0..<8).map { "o\($0)" }
        try ledgers[0].record(transactions: originals.map { Self.transaction("\($0)-first", original: $0) }, source: .jws)
        _ = try ledgers[0].link(originalTransactionIDs: originals, to: "alice", source: .purchase, at: 1)
        #expect(Self.writeFromEightThreads(ledgers) { Self.transaction("o\($0)-\($1)", original: "o\($0)") } == 0)
        let totals = Self.counts(try ledgers[0].events(OutboxQuery(account: "alice", limit: 1000)))
        #expect(totals.count == 8 * 5 + 8)
        #expect(totals == totals.sorted())
        #expect(totals.last == 8 * 5 + 8)
    }

    /// Each write's after-state is derived from what it read before plus what it stored (on PostgreSQL too), which
    /// holds only if no other writer of the original committed in between: each change's event says how many
    /// transactions the original holds after it, so a write that missed another's would repeat a count and skip one.
    @Test(arguments: Backend.tested)
    func concurrentWritesOfOneOriginal_eachDecideOnEveryEarlierOnesRows(_ backend: Backend) throws {
        let ledgers = try Self.countingReplicas(backend) { change in
            guard let count = change.after?.transactions.count else { return nil }
            return ("COUNT:\(count)", nil, count)
        }
        #expect(Self.writeFromEightThreads(ledgers) { Self.transaction("t\($0)-\($1)", original: "o") } == 0)
        #expect(Self.counts(try Self.all(ledgers[0])) == Array(1...8 * 5))
    }

    /// The replicas of a fresh database whose rules store one `COUNT` event per change that `count` gives a dedupe
    /// key, an account and a count for, the count in its body.
    static func countingReplicas(
        _ backend: Backend, _ count: @escaping @Sendable (LedgerChange) -> (key: String, account: String?, count: Int)?
    ) throws -> [any LedgerStore] {
        let counting = OutboxRules(
            events: { change in
                guard let (key, account, count) = count(change) else { return [] }
                return [
                    EventDraft(
                        type: "COUNT", dedupeKey: key, account: account,
                        originalTransactionID: change.originalTransactionID, bundleID: nil, environment: nil,
                        bodyMembers: #""count":\#(count)"#
                    )
                ]
            },
            subscribers: { _ in ["backend"] }, formatTime: { String($0) }
        )
        let location = try DatabaseLocation.fresh(backend)
        return try Self.replicas(backend) { () throws -> any LedgerStore in
            switch location {
            case .sqlite(let path): try SQLiteLedger(path: path, clock: TestClock.fixed, outbox: counting)
            case .postgres(let connection):
                try PostgresLedger(connectionString: connection, clock: TestClock.fixed, outbox: counting)
            }
        }
    }

    /// Eight threads write five transactions each (`transaction(thread, index)`), spread over the replicas; answers
    /// how many writes failed.
    static func writeFromEightThreads(
        _ ledgers: [any LedgerStore], _ transaction: @escaping @Sendable (Int, Int) -> TransactionFacts
    ) -> Int {
        let failures = Atomic<Int>(0)
        onThreads(8) { thread in
            for index in 0..<5 {
                do {
                    try ledgers[thread % ledgers.count].record(transactions: [transaction(thread, index)], source: .jws)
                } catch {
                    failures.add(1, ordering: .relaxed)
                }
            }
        }
        return failures.load(ordering: .relaxed)
    }

    /// The counts of `COUNT` events, in their sequence order.
    static func counts(_ events: [OutboxEvent]) -> [Int] {
        events.sorted { $0.sequence < $1.sequence }
            .compactMap { event in event.body.split(separator: ":").last.flatMap { Int($0.dropLast()) } }
    }

    /// A registration takes its token's lock, then the streams of the originals it links. A write of a transaction
    /// carrying that token takes the token first too: had it taken its original's stream first, the registration
    /// would wait on the stream while the write waited on the token, until PostgreSQL's deadlock timeout broke it.
    @Test(.enabled(if: !Backend.skipPostgres))
    func aWriteWaitingOnItsTokensRegistration_holdsNoStreamTheRegistrationTakes() throws {
        let location = try DatabaseLocation.fresh(.postgres)
        guard case .postgres(let connectionString) = location else { return }
        let ledger = try Self.open(location, Rules())
        try ledger.record(transactions: [Self.transaction("t0", original: "o")], source: .jws)
        let token = "6f3c2a10-8d7e-4b5a-9c1d-2e3f4a5b6c7d"
        let registration = try PostgresConnection(connectionString: connectionString, timeout: 30)
        try registration.execute("BEGIN")
        try LedgerStatements.lockAppAccountToken(token, registration)
        var carrying = Self.transaction("t1", original: "o")
        carrying.appAccountToken = token
        let written = DispatchSemaphore(value: 0)
        let outcome = Mutex<(any Error)?>(nil)
        Thread { [carrying] in
            do { try ledger.record(transactions: [carrying], source: .jws) } catch {
                outcome.withLock { $0 = error }
            }
            written.signal()
        }.start()
        try PostgresWriterTests.waitUntil("the write waits on the token") {
            try registration.query(
                """
                SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
                    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                """, []
            ).count == 1
        }
        let stream = try registration.query(
            "SELECT stream FROM event_streams WHERE stream = 'otx:o' FOR UPDATE NOWAIT", [])
        #expect(stream.count == 1)
        try registration.execute("ROLLBACK")
        #expect(written.wait(timeout: .now() + 10) == .success)
        #expect(outcome.withLock { $0 } == nil)
    }

    // MARK: - claiming and finishing

    /// Three events in stream `otx:a`, one in `otx:b`, for the webhook `backend`.
    /// A listing read a page at a time (`webhooks list` over a whole outbox) is the listing read at once: events of
    /// one instant and one sequence in several streams are told apart by their ids, none twice, none left out.
    @Test(arguments: Backend.tested)
    func eventsReadPageByPage_areTheWholeListing_once(_ backend: Backend) throws {
        let ledger = try Self.threeAndOne(backend)
        try ledger.record(transactions: [Self.transaction("c1", original: "c")], source: .jws)
        let whole = try Self.all(ledger)
        #expect(Set(whole.map(\.createdAt)).count == 1, "every event of one instant, so that ids order them")
        var paged: [OutboxEvent] = []
        var after: OutboxEvent.Position?
        while true {
            let page = try ledger.events(OutboxQuery(after: after, limit: 2))
            paged += page
            guard let last = page.last, page.count == 2 else { break }
            after = last.position
        }
        #expect(paged.map(\.id) == whole.map(\.id))
        #expect(whole.count == 7)
        #expect(try ledger.events(OutboxQuery(state: .pending, after: whole[2].position)).map(\.id)
            == Array(whole.dropFirst(3)).map(\.id))
    }

    static func threeAndOne(_ backend: Backend) throws -> any LedgerStore {
        let ledger = try Self.open(backend)
        try ledger.record(transactions: [Self.transaction("a1", original: "a")], source: .jws)
        try ledger.record(transactions: [Self.transaction("a2", original: "a")], source: .jws)
        try ledger.record(transactions: [Self.transaction("b1", original: "b")], source: .jws)
        // otx:a holds NEW a1 (1), SEEN a (2), NEW a2 (3); otx:b holds NEW b1 (1), SEEN b (2).
        return ledger
    }

    static let now = TestClock.fixed()

    @Test(arguments: Backend.tested)
    func aClaim_takesOnlyTheHeadOfEachStream_andLeasesIt(_ backend: Backend) throws {
        let ledger = try Self.threeAndOne(backend)
        let claimed = try ledger.claimDeliveries(
            webhook: "backend", holder: "r1", now: Self.now, leaseUntil: Self.now + 60_000, limit: 10
        )
        #expect(Set(claimed.map { "\($0.stream)#\($0.sequence)" }) == ["otx:a#1", "otx:b#1"])
        #expect(
            claimed.allSatisfy { $0.attempts == 0 && $0.leaseUntil == Self.now + 60_000 && $0.webhook == "backend" })
        #expect(claimed.allSatisfy { $0.body.contains(#""sequence":1"#) })
        // Leased: nobody else gets them, nor what waits behind them.
        #expect(
            try ledger.claimDeliveries(
                webhook: "backend", holder: "r2", now: Self.now + 1, leaseUntil: Self.now + 60_001, limit: 10
            ).isEmpty)
        #expect(
            try ledger.claimDeliveries(
                webhook: "other", holder: "r2", now: Self.now + 1, leaseUntil: Self.now + 60_001, limit: 10
            ).isEmpty)
    }

    @Test(arguments: Backend.tested)
    func concurrentClaimers_neverClaimTheSameDelivery(_ backend: Backend) throws {
        let location = try DatabaseLocation.fresh(backend)
        let ledgers = try Self.replicas(backend) { try Self.open(location, Rules()) }
        let originals = 40
        try ledgers[0].record(
            transactions: (0..<originals).map { Self.transaction("t\($0)", original: "o\($0)") }, source: .jws
        )
        let claimed = Mutex<[String]>([])
        let failures = Atomic<Int>(0)
        onThreads(8) { thread in
            for _ in 0..<4 {
                do {
                    let got = try ledgers[thread % ledgers.count].claimDeliveries(
                        webhook: "backend", holder: "r\(thread)", now: Self.now, leaseUntil: Self.now + 60_000,
                        limit: 3
                    )
                    claimed.withLock { $0 += got.map(\.eventID) }
                } catch {
                    failures.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(failures.load(ordering: .relaxed) == 0)
        let all = claimed.withLock { $0 }
        #expect(all.count == Set(all).count)
        // 8 threads × 4 claims × 3 = 96 ≥ 40 heads: every head was claimed, by one claimer.
        #expect(all.count == originals)
    }

    @Test(arguments: Backend.tested)
    func anExpiredLease_isTakenOver_andTheStaleHolderCannotFinish(_ backend: Backend) throws {
        let ledger = try Self.threeAndOne(backend)
        let first = try ledger.claimDeliveries(
            webhook: "backend", holder: "r1", now: Self.now, leaseUntil: Self.now + 60_000, limit: 1
        )
        try #require(first.count == 1)
        let taken = try ledger.claimDeliveries(
            webhook: "backend", holder: "r2", now: Self.now + 60_000, leaseUntil: Self.now + 120_000, limit: 10
        )
        #expect(taken.map(\.eventID).contains(first[0].eventID))
        #expect(
            try !ledger.finishDelivery(
                eventID: first[0].eventID, webhook: "backend", holder: "r1", result: .delivered(status: 200),
                at: Self.now + 60_001))
        #expect(
            try ledger.finishDelivery(
                eventID: first[0].eventID, webhook: "backend", holder: "r2", result: .delivered(status: 204),
                at: Self.now + 60_002))
        // Done with the head: what waited behind it is due at once.
        let next = try ledger.claimDeliveries(
            webhook: "backend", holder: "r2", now: Self.now + 60_002, leaseUntil: Self.now + 120_000, limit: 10
        )
        #expect(next.map { "\($0.stream)#\($0.sequence)" } == ["\(first[0].stream)#2"])
        // Finishing twice is refused: the lease is gone.
        #expect(
            try !ledger.finishDelivery(
                eventID: first[0].eventID, webhook: "backend", holder: "r2", result: .delivered(status: 204),
                at: Self.now + 60_003))
        let delivered = try ledger.events(OutboxQuery(state: .delivered))
        #expect(delivered.map(\.id) == [first[0].eventID])
        #expect(delivered.first?.deliveries.first?.deliveredAt == Self.now + 60_002)
        #expect(delivered.first?.deliveries.first?.lastStatus == 204)
        #expect(delivered.first?.deliveries.first?.attempts == 1)
    }

    @Test(arguments: Backend.tested)
    func aRetryingHead_holdsItsStreamBack_untilDue_andAFailedOneNoLonger(_ backend: Backend) throws {
        let ledger = try Self.threeAndOne(backend)
        func claimA(at time: Int64, _ holder: String) throws -> [ClaimedDelivery] {
            try ledger.claimDeliveries(
                webhook: "backend", holder: holder, now: time, leaseUntil: time + 60_000, limit: 10
            ).filter { $0.stream == "otx:a" }
        }
        let head = try #require(try claimA(at: Self.now, "r1").first)
        #expect(
            try ledger.finishDelivery(
                eventID: head.eventID, webhook: "backend", holder: "r1",
                result: .retry(at: Self.now + 10_000, status: 500, error: "HTTP 500"), at: Self.now + 1))
        #expect(try claimA(at: Self.now + 5_000, "r1").isEmpty)
        // What waits behind the head keeps waiting for its turn.
        #expect(try Self.turns(ledger, stream: "otx:a") == ["1: due 10000", "2: waits", "3: waits"])
        let again = try claimA(at: Self.now + 10_000, "r1")
        #expect(again.map(\.eventID) == [head.eventID])
        #expect(again.first?.attempts == 1)
        #expect(
            try ledger.finishDelivery(
                eventID: head.eventID, webhook: "backend", holder: "r1", result: .failed(status: nil, error: "timeout"),
                at: Self.now + 10_001))
        #expect(try claimA(at: Self.now + 10_002, "r1").map(\.sequence) == [2])
        let failed = try ledger.events(OutboxQuery(state: .failed))
        #expect(failed.map(\.id) == [head.eventID])
        #expect(failed.first?.deliveries.first?.lastError == "timeout")
        #expect(failed.first?.deliveries.first?.attempts == 2)
    }

    /// Claims stream `otx:b`'s head for holder r1, leased for a minute.
    static func claimB(_ ledger: any LedgerStore, at time: Int64) throws -> ClaimedDelivery? {
        try ledger.claimDeliveries(webhook: "backend", holder: "r1", now: time, leaseUntil: time + 60_000, limit: 10)
            .first { $0.stream == "otx:b" }
    }

    /// Finishes a delivery r1 claimed; whether it was kept.
    static func finish(
        _ ledger: any LedgerStore, _ delivery: ClaimedDelivery, _ result: DeliveryResult, at time: Int64
    ) throws -> Bool {
        try ledger.finishDelivery(eventID: delivery.eventID, webhook: "backend", holder: "r1", result: result, at: time)
    }

    /// Of ``threeAndOne(_:)``: b's first event delivered at `now` + 1, so that its second heads the stream alone.
    static func deliverBsFirstEvent(_ ledger: any LedgerStore) throws {
        let first = try #require(try claimB(ledger, at: now))
        #expect(try finish(ledger, first, .delivered(status: 200), at: now + 1))
    }

    /// Stored due behind a head being retried, what a failing receiver leaves behind would be walked, and held back by
    /// the head test, by every claim until the receiver recovers: on SQLite on the writer, at every write's nudge.
    @Test(arguments: Backend.tested)
    func anEventStoredBehindAHeadBeingRetried_waitsForItsTurn(_ backend: Backend) throws {
        let ledger = try Self.threeAndOne(backend)
        func claimB(at time: Int64) throws -> ClaimedDelivery? { try Self.claimB(ledger, at: time) }
        // b's second event, a head alone now, answered 500.
        try Self.deliverBsFirstEvent(ledger)
        let second = try #require(try claimB(at: Self.now + 2))
        #expect(second.sequence == 2)
        #expect(
            try Self.finish(
                ledger, second, .retry(at: Self.now + 10_000, status: 500, error: "HTTP 500"), at: Self.now + 3))

        try ledger.record(transactions: [Self.transaction("b2", original: "b")], source: .jws)
        #expect(try Self.turns(ledger, stream: "otx:b") == ["2: due 10000", "3: waits"])
        // The head's delivery gives it its turn.
        let retried = try #require(try claimB(at: Self.now + 10_000))
        #expect(try Self.finish(ledger, retried, .delivered(status: 200), at: Self.now + 10_001))
        #expect(try claimB(at: Self.now + 10_002)?.sequence == 3)
    }

    /// A receiver that hangs: events stored while the head's first try is in flight are stored due, since it has not
    /// failed yet; its failure makes them wait for their turn, so that claims stop walking them.
    @Test(arguments: Backend.tested)
    func eventsStoredDuringAHeadsFirstTry_waitForTheirTurnOnceItFails(_ backend: Backend) throws {
        let ledger = try Self.threeAndOne(backend)
        func claimB(at time: Int64) throws -> ClaimedDelivery? { try Self.claimB(ledger, at: time) }
        try Self.deliverBsFirstEvent(ledger)
        let inFlight = try #require(try claimB(at: Self.now + 2))
        try ledger.record(transactions: [Self.transaction("b2", original: "b")], source: .jws)
        try ledger.record(transactions: [Self.transaction("b3", original: "b")], source: .jws)
        #expect(try Self.turns(ledger, stream: "otx:b") == ["2: due 1", "3: due 0", "4: due 0"])

        #expect(
            try Self.finish(
                ledger, inFlight, .retry(at: Self.now + 10_000, status: nil, error: "timed out"), at: Self.now + 10))
        #expect(try Self.turns(ledger, stream: "otx:b") == ["2: due 10000", "3: waits", "4: waits"])
        let retried = try #require(try claimB(at: Self.now + 10_000))
        #expect(try Self.finish(ledger, retried, .delivered(status: 200), at: Self.now + 10_001))
        #expect(try Self.turns(ledger, stream: "otx:b") == ["3: due 10001", "4: waits"])
    }

    @Test(arguments: Backend.tested)
    func finishDeliveries_recordsEachTry_andKeepsOnlyWhatTheHolderHolds(_ backend: Backend) throws {
        let ledger = try Self.threeAndOne(backend)
        let heads = try ledger.claimDeliveries(
            webhook: "backend", holder: "r1", now: Self.now, leaseUntil: Self.now + 60_000, limit: 10
        )
        let a = try #require(heads.first { $0.stream == "otx:a" })
        let other = try #require(heads.first { $0.stream != "otx:a" })
        let kept = try ledger.finishDeliveries(
            webhook: "backend", holder: "r1",
            [
                DeliveryFinish(eventID: a.eventID, result: .delivered(status: 200)),
                DeliveryFinish(eventID: other.eventID, result: .retry(at: Self.now + 10_000, status: 503, error: "x")),
                DeliveryFinish(eventID: "evt_unknown", result: .delivered(status: 200)),
            ],
            at: Self.now + 1)
        #expect(kept == [true, true, false])
        // a's next is due at once; the retried head holds its stream until its next try.
        let next = try ledger.claimDeliveries(
            webhook: "backend", holder: "r1", now: Self.now + 2, leaseUntil: Self.now + 60_000, limit: 10
        )
        #expect(next.map { "\($0.stream)#\($0.sequence)" } == ["otx:a#2"])
        #expect(try ledger.events(OutboxQuery(state: .delivered)).map(\.id) == [a.eventID])
        let leasedToR1 = try #require(next.first)
        let byAnother = DeliveryFinish(eventID: leasedToR1.eventID, result: .failed(status: nil, error: "x"))
        #expect(try ledger.finishDeliveries(webhook: "backend", holder: "r2", [byAnother], at: Self.now + 3) == [false])
        #expect(try ledger.finishDeliveries(webhook: "backend", holder: "r1", [], at: Self.now + 3).isEmpty)
    }

    @Test(arguments: Backend.tested)
    func retryNow_makesEveryHeadDue(_ backend: Backend) throws {
        let ledger = try Self.threeAndOne(backend)
        let heads = try ledger.claimDeliveries(
            webhook: "backend", holder: "r1", now: Self.now, leaseUntil: Self.now + 60_000, limit: 10
        )
        for head in heads {
            _ = try ledger.finishDelivery(
                eventID: head.eventID, webhook: "backend", holder: "r1",
                result: .retry(at: Self.now + 3_600_000, status: 503, error: "HTTP 503"), at: Self.now + 1)
        }
        // The heads; what waits behind them waits for its turn.
        #expect(try ledger.retryNow(webhook: "backend", at: Self.now + 2) == 2)
        #expect(try Self.turns(ledger, stream: "otx:a") == ["1: due 2", "2: waits", "3: waits"])
        #expect(
            try ledger.claimDeliveries(
                webhook: "backend", holder: "r1", now: Self.now + 2, leaseUntil: Self.now + 60_000, limit: 10
            ).count == 2)
    }

    // MARK: - waiting for a turn

    /// The pending deliveries of `stream` to `backend`, by sequence: due when (ms after `now`), or waiting for a turn.
    static func turns(_ ledger: any LedgerStore, stream: String) throws -> [String] {
        try all(ledger).filter { $0.stream == stream }.sorted { $0.sequence < $1.sequence }.compactMap { event in
            guard let delivery = event.deliveries.first(where: { $0.webhook == "backend" }), delivery.state == .pending
            else { return nil }
            return "\(event.sequence): " + (delivery.nextAttemptAt.map { "due \($0 - now)" } ?? "waits")
        }
    }

    /// Claims, from `start` on, and delivers what it claimed until nothing more is due: every claim, in order.
    static func deliverAll(_ ledger: any LedgerStore, from start: Int64) throws -> [ClaimedDelivery] {
        var delivered: [ClaimedDelivery] = []
        var time = start
        while true {
            let claimed = try ledger.claimDeliveries(
                webhook: "backend", holder: "r1", now: time, leaseUntil: time + 60_000, limit: 10)
            guard !claimed.isEmpty else { return delivered }
            let finishes = claimed.map { DeliveryFinish(eventID: $0.eventID, result: .delivered(status: 200)) }
            #expect(try ledger.finishDeliveries(webhook: "backend", holder: "r1", finishes, at: time).allSatisfy { $0 })
            delivered += claimed
            time += 1
        }
    }

    /// Each stream's sequences in the order they were claimed.
    static func orderByStream(_ claims: [ClaimedDelivery]) -> [String: [Int64]] {
        Dictionary(grouping: claims, by: \.stream).mapValues { $0.map(\.sequence) }
    }

    @Test(arguments: Backend.tested)
    func anEventBehindAPendingOne_waitsForItsTurn_untilTheOneBeforeItIsDone(_ backend: Backend) throws {
        let ledger = try Self.threeAndOne(backend)
        #expect(try Self.turns(ledger, stream: "otx:a") == ["1: due 0", "2: waits", "3: waits"])
        let heads = try ledger.claimDeliveries(
            webhook: "backend", holder: "r1", now: Self.now, leaseUntil: Self.now + 60_000, limit: 10)
        let a1 = try #require(heads.first { $0.stream == "otx:a" })
        let b1 = try #require(heads.first { $0.stream == "otx:b" })
        // Stored while the head is in flight: it waits too, and no claim takes anything of the stream.
        try ledger.record(transactions: [Self.transaction("a3", original: "a")], source: .jws)
        #expect(try Self.turns(ledger, stream: "otx:a") == ["1: due 0", "2: waits", "3: waits", "4: waits"])
        #expect(
            try ledger.claimDeliveries(
                webhook: "backend", holder: "r2", now: Self.now + 1, leaseUntil: Self.now + 60_001, limit: 10
            ).isEmpty)
        // Delivered: the next one, and only it, is due.
        #expect(
            try ledger.finishDelivery(
                eventID: a1.eventID, webhook: "backend", holder: "r1", result: .delivered(status: 200),
                at: Self.now + 5))
        #expect(try Self.turns(ledger, stream: "otx:a") == ["2: due 5", "3: waits", "4: waits"])
        let a2 = try ledger.claimDeliveries(
            webhook: "backend", holder: "r2", now: Self.now + 5, leaseUntil: Self.now + 60_005, limit: 10)
        #expect(a2.map { "\($0.stream)#\($0.sequence)" } == ["otx:a#2"])
        // Failed for good: it no longer holds the stream back either.
        #expect(
            try ledger.finishDelivery(
                eventID: a2[0].eventID, webhook: "backend", holder: "r2", result: .failed(status: 410, error: "gone"),
                at: Self.now + 6))
        #expect(try Self.turns(ledger, stream: "otx:a") == ["3: due 6", "4: waits"])
        // A stream with nothing pending stores its next event due at once.
        #expect(
            try ledger.finishDelivery(
                eventID: b1.eventID, webhook: "backend", holder: "r1", result: .delivered(status: 200),
                at: Self.now + 7))
        #expect(try Self.orderByStream(Self.deliverAll(ledger, from: Self.now + 7)) == ["otx:a": [3, 4], "otx:b": [2]])
        #expect(try Self.turns(ledger, stream: "otx:b").isEmpty)
        try ledger.record(transactions: [Self.transaction("b2", original: "b")], source: .jws)
        #expect(try Self.turns(ledger, stream: "otx:b") == ["3: due 0"])
    }

    @Test(arguments: Backend.tested)
    func aDeliveryStrandedBehindNothing_isReleased_andOnlyIt(_ backend: Backend) throws {
        let location = try DatabaseLocation.fresh(backend)
        let ledger = try Self.open(location, Rules())
        for (id, original) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
            try ledger.record(transactions: [Self.transaction(id, original: original)], source: .jws)
        }
        #expect(try Self.turns(ledger, stream: "otx:a") == ["1: due 0", "2: waits", "3: waits"])
        #expect(try ledger.releaseStrandedDeliveries(at: Self.now + 5) == 0)
        // As a finish leaves it when a writer's event behind it was not committed yet: the head is gone, and what
        // waited behind it waits behind nothing.
        try location.rawConnection().execute(
            "UPDATE event_deliveries SET state = 'delivered', delivered_at = $1 WHERE stream = 'otx:a' AND sequence = 1",
            [.integer(Self.now)])
        #expect(try Self.turns(ledger, stream: "otx:a") == ["2: waits", "3: waits"])
        #expect(try ledger.releaseStrandedDeliveries(at: Self.now + 5) == 1)
        #expect(try Self.turns(ledger, stream: "otx:a") == ["2: due 5", "3: waits"])
        #expect(try Self.turns(ledger, stream: "otx:b") == ["1: due 0", "2: waits"])
        #expect(try ledger.releaseStrandedDeliveries(at: Self.now + 6) == 0)
        #expect(
            try Self.orderByStream(Self.deliverAll(ledger, from: Self.now + 5)) == ["otx:a": [2, 3], "otx:b": [1, 2]])
    }

    /// A receiver down for days leaves every delivery but its streams' heads waiting; the sweep looks for stranded
    /// ones without the writer, so it neither waits on intake nor holds it up when none is found.
    @Test(arguments: Backend.tested)
    func sweepOfABacklogWithNothingStranded_leavesTheWriterAlone(_ backend: Backend) throws {
        let location = try DatabaseLocation.fresh(backend)
        let ledger = try Self.open(location, Rules(), timeout: 1)
        for (id, original) in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("b2", "b")] {
            try ledger.record(transactions: [Self.transaction(id, original: original)], source: .jws)
        }
        #expect(try Self.turns(ledger, stream: "otx:b") == ["1: due 0", "2: waits", "3: waits"])
        let intake = try location.rawConnection()
        try intake.execute(backend == .sqlite ? "BEGIN IMMEDIATE" : "BEGIN")
        if backend == .postgres { try intake.execute("LOCK TABLE event_deliveries IN EXCLUSIVE MODE") }
        let swept = Result { () throws(LedgerError) in try ledger.releaseStrandedDeliveries(at: Self.now + 5) }
        try intake.execute("ROLLBACK")

        #expect(try swept.get() == 0)
        #expect(try Self.turns(ledger, stream: "otx:a") == ["1: due 0", "2: waits", "3: waits", "4: waits"])
    }

    @Test(arguments: Backend.tested)
    func writersBesideADeliverer_leaveNoEventWaitingBehindADeliveredOne(_ backend: Backend) throws {
        // Writers of one stream store events while its heads are delivered: an event stored waiting behind a head
        // whose finish did not see it yet must still be made due, by `releaseStrandedDeliveries` (on PostgreSQL,
        // replicas side by side).
        let location = try DatabaseLocation.fresh(backend)
        let ledgers = try Self.replicas(backend) { try Self.open(location, Rules()) }
        let writers = 4
        let perWriter = 15
        let written = Atomic<Int>(0)
        let failures = Atomic<Int>(0)
        let claims = Mutex<[ClaimedDelivery]>([])
        onThreads(writers + 1) { thread in
            guard thread == writers else {
                for index in 0..<perWriter {
                    do {
                        try ledgers[thread % ledgers.count].record(
                            transactions: [Self.transaction("w\(thread)-\(index)", original: "o")], source: .jws)
                    } catch {
                        failures.add(1, ordering: .relaxed)
                    }
                }
                written.add(1, ordering: .releasing)
                return
            }
            var time = Self.now
            var released = false
            do {
                while true {
                    let writersDone = written.load(ordering: .acquiring) == writers
                    let claimed = try ledgers[0].claimDeliveries(
                        webhook: "backend", holder: "r1", now: time, leaseUntil: time + 60_000, limit: 10)
                    if claimed.isEmpty && writersDone {
                        if released { break }
                        released = true
                        _ = try ledgers[1 % ledgers.count].releaseStrandedDeliveries(at: time)
                        continue
                    }
                    released = false
                    if claimed.isEmpty { usleep(200) }
                    let finishes = claimed.map { DeliveryFinish(eventID: $0.eventID, result: .delivered(status: 200)) }
                    _ = try ledgers[0].finishDeliveries(webhook: "backend", holder: "r1", finishes, at: time)
                    claims.withLock { $0 += claimed }
                    time += 1
                }
            } catch {
                failures.add(1, ordering: .relaxed)
            }
        }
        #expect(failures.load(ordering: .relaxed) == 0)
        let events = try Self.all(ledgers[0])
        #expect(events.count == writers * perWriter + 1)
        #expect(events.allSatisfy { $0.deliveries.map(\.state) == [.delivered] })
        let order = claims.withLock { $0 }.map(\.sequence)
        #expect(order == Array(1...Int64(events.count)))
    }

    // MARK: - listing, replay, backlog, prune

    @Test(arguments: Backend.tested)
    func replay_setsDeliveriesBackToPending(_ backend: Backend) throws {
        let ledger = try Self.threeAndOne(backend)
        let heads = try ledger.claimDeliveries(
            webhook: "backend", holder: "r1", now: Self.now, leaseUntil: Self.now + 60_000, limit: 10
        )
        try #require(heads.count == 2)
        _ = try ledger.finishDelivery(
            eventID: heads[0].eventID, webhook: "backend", holder: "r1", result: .delivered(status: 200), at: Self.now)
        _ = try ledger.finishDelivery(
            eventID: heads[1].eventID, webhook: "backend", holder: "r1",
            result: .failed(status: 410, error: "HTTP 410"),
            at: Self.now)
        #expect(try ledger.replay(.failed, at: Self.now + 5) == 1)
        #expect(try ledger.events(OutboxQuery(state: .failed)).isEmpty)
        #expect(try ledger.replay(.events([heads[0].eventID, "evt_unknown"]), at: Self.now + 6) == 1)
        #expect(try ledger.events(OutboxQuery(state: .delivered)).isEmpty)
        let pending = try ledger.events(OutboxQuery(state: .pending))
        #expect(pending.count == 5)
        let replayed = try #require(pending.first { $0.id == heads[0].eventID }?.deliveries.first)
        #expect(replayed.nextAttemptAt == Self.now + 6 && replayed.deliveredAt == nil && replayed.attempts == 1)
        #expect(try ledger.replay(.since(Self.now), at: Self.now + 7) == 5)
        #expect(try ledger.replay(.since(Self.now + 1), at: Self.now + 7) == 0)
    }

    @Test(arguments: Backend.tested)
    func replay_makesOnlyTheFirstOfEachStreamDue_andDeliversInOrder(_ backend: Backend) throws {
        let ledger = try Self.threeAndOne(backend)
        #expect(
            try Self.orderByStream(Self.deliverAll(ledger, from: Self.now)) == ["otx:a": [1, 2, 3], "otx:b": [1, 2]])
        #expect(try ledger.replay(.since(Self.now), at: Self.now + 100) == 5)
        #expect(try Self.turns(ledger, stream: "otx:a") == ["1: due 100", "2: waits", "3: waits"])
        #expect(try Self.turns(ledger, stream: "otx:b") == ["1: due 100", "2: waits"])
        #expect(
            try Self.orderByStream(Self.deliverAll(ledger, from: Self.now + 100)) == [
                "otx:a": [1, 2, 3], "otx:b": [1, 2],
            ])
        // Some events of a stream: the first of them is due, the others wait behind it.
        let a = try Self.all(ledger).filter { $0.stream == "otx:a" }.sorted { $0.sequence < $1.sequence }
        #expect(try ledger.replay(.events([a[2].id, a[1].id]), at: Self.now + 200) == 2)
        #expect(try Self.turns(ledger, stream: "otx:a") == ["2: due 200", "3: waits"])
        #expect(try Self.orderByStream(Self.deliverAll(ledger, from: Self.now + 200)) == ["otx:a": [2, 3]])
    }

    @Test(arguments: Backend.tested)
    func backlogAndQueries_countWhatIsPending(_ backend: Backend) throws {
        let ledger = try Self.threeAndOne(backend)
        #expect(
            try ledger.webhookBacklogs() == [
                WebhookBacklog(webhook: "backend", pending: 5, oldestPendingCreatedAt: Self.now)
            ])
        #expect(try ledger.events(OutboxQuery(originalTransactionID: "b")).count == 2)
        #expect(try ledger.events(OutboxQuery(limit: 3)).count == 3)
        #expect(try ledger.events(OutboxQuery(since: Self.now + 1)).isEmpty)
        #expect(try ledger.events(OutboxQuery(state: .failed)).isEmpty)
    }

    @Test(arguments: Backend.tested)
    func prune_deletesOnlyEventsDeliveredEverywhereBeforeTheCutoff(_ backend: Backend) throws {
        let ledger = try Self.open(backend, Rules(subscribers: ["backend", "crm"]))
        try ledger.record(transactions: [Self.transaction("a1", original: "a")], source: .jws)
        try ledger.record(transactions: [Self.transaction("b1", original: "b")], source: .jws)
        try ledger.record(transactions: [Self.transaction("c1", original: "c")], source: .jws)
        func finish(_ stream: String, _ webhook: String, _ result: DeliveryResult) throws {
            // A lease that ends as it starts: the heads of the other streams stay claimable.
            let claimed = try ledger.claimDeliveries(
                webhook: webhook, holder: "r", now: Self.now, leaseUntil: Self.now, limit: 10
            ).filter { $0.stream == stream }
            for delivery in claimed {
                _ = try ledger.finishDelivery(
                    eventID: delivery.eventID, webhook: webhook, holder: "r", result: result, at: Self.now)
            }
        }
        // otx:a's head delivered to both; otx:b's to one, failed at the other; otx:c's left pending.
        try finish("otx:a", "backend", .delivered(status: 200))
        try finish("otx:a", "crm", .delivered(status: 200))
        try finish("otx:b", "backend", .delivered(status: 200))
        try finish("otx:b", "crm", .failed(status: 500, error: "HTTP 500"))
        #expect(try ledger.pruneDeliveredEvents(deliveredBefore: Self.now) == 0)
        #expect(try ledger.pruneDeliveredEvents(deliveredBefore: Self.now + 1) == 1)
        let left = try Self.all(ledger)
        #expect(left.count == 5)
        #expect(left.filter { $0.stream == "otx:a" }.map(\.sequence) == [2])
        #expect(try ledger.pruneDeliveredEvents(deliveredBefore: Self.now + 1) == 0)
        // The stream numbers on from where it was.
        try ledger.record(transactions: [Self.transaction("a2", original: "a")], source: .jws)
        #expect(try ledger.events(OutboxQuery(originalTransactionID: "a")).map(\.sequence) == [3, 2])
    }

    @Test(arguments: Backend.tested)
    func prune_walksALongHistoryInBatches_pastWhatItKeeps(_ backend: Backend) throws {
        let ledger = try Self.open(backend)
        // 520 events: more than one batch of 500.
        let originals = 260
        for first in stride(from: 0, to: originals, by: 20) {
            try ledger.record(
                transactions: (first..<first + 20).map { Self.transaction("t\($0)", original: "o\($0)") }, source: .jws
            )
        }
        // Each stream's NEW, then its SEEN; the very first claimed fails, and stays.
        var kept: String?
        for _ in 0..<2 {
            var claimed: [ClaimedDelivery] = []
            repeat {
                claimed = try ledger.claimDeliveries(
                    webhook: "backend", holder: "r", now: Self.now, leaseUntil: Self.now + 1, limit: 50
                )
                for delivery in claimed {
                    let fails = kept == nil
                    if fails { kept = delivery.eventID }
                    _ = try ledger.finishDelivery(
                        eventID: delivery.eventID, webhook: "backend", holder: "r",
                        result: fails ? .failed(status: 500, error: "HTTP 500") : .delivered(status: 200), at: Self.now)
                }
            } while !claimed.isEmpty
        }
        #expect(try ledger.events(OutboxQuery(state: .delivered, limit: 10_000)).count == 2 * originals - 1)
        #expect(try ledger.pruneDeliveredEvents(deliveredBefore: Self.now + 1) == 2 * originals - 1)
        #expect(try Self.all(ledger).map(\.id) == [kept])
    }

    // MARK: - migration

    @Test(arguments: Backend.tested)
    func migrationFrom5_keepsTheFacts_andStartsTheOutbox(_ backend: Backend) throws {
        let location = try DatabaseLocation.fresh(backend)
        do {
            let old = try location.open(schemaVersion: 5)
            try old.record(transactions: [E.firstMonth], source: .jws)
            _ = try old.link(originalTransactionIDs: [E.original], to: "alice", source: .purchase, at: 1)
        }
        let ledger = try Self.open(location, Rules())
        #expect(try ledger.schemaVersion() == LedgerSchema.latestVersion)
        #expect(try ledger.transaction(id: "1000")?.facts == E.firstMonth)
        #expect(try ledger.owner(originalTransactionID: E.original) == "alice")
        try ledger.record(transactions: [Self.transaction("1001", original: E.original)], source: .jws)
        #expect(try Self.all(ledger).map(\.type).sorted() == ["NEW", "SEEN"])
        #expect(try Self.all(ledger).allSatisfy { $0.stream == "alice" })
    }

    @Test(arguments: Backend.tested)
    func migrationTo9_makesWhatWaitsBehindEachHeadWaitForItsTurn(_ backend: Backend) throws {
        let location = try DatabaseLocation.fresh(backend)
        do {
            let ledger = try Self.open(location, Rules())
            for (id, original) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
                try ledger.record(transactions: [Self.transaction(id, original: original)], source: .jws)
            }
            let a1 = try #require(
                try ledger.claimDeliveries(
                    webhook: "backend", holder: "r1", now: Self.now, leaseUntil: Self.now + 60_000, limit: 10
                ).first { $0.stream == "otx:a" })
            _ = try ledger.finishDelivery(
                eventID: a1.eventID, webhook: "backend", holder: "r1", result: .delivered(status: 200), at: Self.now)
        }
        // As version 8 left a backlog: every pending delivery holds a time (due, or the lease end of its head).
        do {
            let raw = try location.rawConnection()
            try raw.execute(
                "UPDATE event_deliveries SET next_attempt_at = $1 WHERE state = 'pending'", [.integer(Self.now + 9)])
            try raw.execute("UPDATE ledger_schema SET version = 8", [])
        }
        let ledger = try Self.open(location, Rules())
        #expect(try ledger.schemaVersion() == LedgerSchema.latestVersion)
        #expect(try Self.turns(ledger, stream: "otx:a") == ["2: due 9", "3: waits"])
        #expect(try Self.turns(ledger, stream: "otx:b") == ["1: due 9", "2: waits"])
        #expect(try ledger.events(OutboxQuery(state: .delivered)).count == 1)
        // b's head, claimed before the upgrade, is taken over once its lease ran out.
        #expect(
            try Self.orderByStream(Self.deliverAll(ledger, from: Self.now + 60_000)) == [
                "otx:a": [2, 3], "otx:b": [1, 2],
            ])
    }
}
