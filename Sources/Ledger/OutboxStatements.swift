internal import JSONText

/// The outbox's operations (see Outbox.swift): each call is one database transaction.
extension LedgerRecords {
    func claimDeliveries(
        webhook: String, holder: String, now: Int64, leaseUntil: Int64, limit: Int
    ) throws(LedgerError) -> [ClaimedDelivery] {
        guard limit > 0 else { return [] }
        return try database.write { connection throws(LedgerError) in
            // SKIP LOCKED: a replica never waits on, nor claims, a row another replica is claiming right now; once that
            // claim commits, its lease excludes the row when the WHERE is checked again on the new version. Almost only
            // heads are due (what waits behind one is stored `waitingForTurn`, see `store`), and the due index holds
            // only what is not waiting: its first rows are the heads and the LIMIT stops the scan early. The literal
            // bound is what lets the database use that index (a parameter does not prove its predicate). The head test
            // stays, as a scalar subquery (one index probe per candidate; PostgreSQL never turns it into a join, whose
            // plan without statistics scanned the backlog per candidate): a delivery stored behind a lone head, one
            // made due by an older version, or by a replay behind a pending head, is due without heading its stream.
            // The heads are chosen before the events are joined, in a materialized CTE: with `events` beside them
            // PostgreSQL, its statistics a few seconds old, chose at random from one run to the next to scan every
            // event and probe each one's delivery (70 ms a claim at 4,000).
            let isPostgres = connection is PostgresConnection
            let rows = try connection.query(
                """
                WITH heads AS\(isPostgres ? " MATERIALIZED" : "") (
                    SELECT d.event_id, d.stream, d.sequence, d.attempts, d.next_attempt_at
                    FROM event_deliveries d
                    WHERE d.webhook = $1 AND d.state = 'pending' AND d.next_attempt_at <= $2
                        AND d.next_attempt_at < \(LedgerStatements.waitingForTurn)
                        AND (d.lease_until IS NULL OR d.lease_until <= $2)
                        AND d.sequence = (
                            SELECT min(earlier.sequence) FROM event_deliveries earlier
                            WHERE earlier.webhook = d.webhook AND earlier.stream = d.stream
                                AND earlier.state = 'pending')
                    ORDER BY d.next_attempt_at, d.sequence
                    LIMIT $3\(isPostgres ? " FOR UPDATE SKIP LOCKED" : "")
                )
                SELECT h.event_id, h.stream, h.sequence, h.attempts, e.type, e.body, e.created_at
                FROM heads h JOIN events e ON e.event_id = h.event_id
                ORDER BY h.next_attempt_at, h.sequence
                """,
                [.text(webhook), .integer(now), .integer(Int64(limit))]
            )
            var claimed: [ClaimedDelivery] = []
            for row in rows {
                claimed.append(
                    ClaimedDelivery(
                        eventID: try row.requiredString(0), webhook: webhook, type: try row.requiredString(4),
                        stream: try row.requiredString(1), sequence: try row.requiredInt64(2),
                        body: try row.requiredString(5), attempts: row.int(3) ?? 0,
                        createdAt: try row.requiredInt64(6), leaseUntil: leaseUntil
                    )
                )
            }
            // Only the lease changes: what waits behind a head is not due already. (Pushing a stream's followers to
            // the lease end at every claim, and pulling them back at every finish, rewrote a stream's whole backlog
            // for each of its events: on PostgreSQL 92,741 dead row versions for 4,000 deliveries.)
            for chunk in LedgerStatements.chunks(claimed.map(\.eventID)) {
                try connection.executeWithNext(
                    """
                    UPDATE event_deliveries SET lease_holder = $1, lease_until = $2
                    WHERE webhook = $3 AND event_id IN (\(LedgerStatements.placeholders(chunk.count, from: 4)))
                    """,
                    [.text(holder), .integer(leaseUntil), .text(webhook)] + chunk.map(SQLValue.text)
                )
            }
            return claimed
        }
    }

    func finishDelivery(
        eventID: String, webhook: String, holder: String, result: DeliveryResult, at time: Int64
    ) throws(LedgerError) -> Bool {
        try finishDeliveries(
            webhook: webhook, holder: holder, [DeliveryFinish(eventID: eventID, result: result)], at: time
        ).first ?? false
    }

    func finishDeliveries(
        webhook: String, holder: String, _ finishes: [DeliveryFinish], at time: Int64
    ) throws(LedgerError) -> [Bool] {
        guard !finishes.isEmpty else { return [] }
        return try database.write { connection throws(LedgerError) in
            var kept: [Bool] = []
            for finish in finishes {
                kept.append(
                    try Self.finish(
                        finish, webhook: webhook, holder: holder, at: time, connection: connection))
            }
            return kept
        }
    }

    private static func finish(
        _ finish: DeliveryFinish, webhook: String, holder: String, at time: Int64, connection: any SQLConnection
    ) throws(LedgerError) -> Bool {
        // `state || ''` keeps the pending-only indexes out of it: planned while the outbox was nearly empty,
        // PostgreSQL's cached plan found the row by the due index, walking every pending delivery of the webhook
        // (17 ms at 4,000) instead of probing the primary key.
        let assignments: String
        var values: [SQLValue] = [.text(finish.eventID), .text(webhook), .text(holder)]
        switch finish.result {
        case .delivered(let status):
            assignments = "state = 'delivered', delivered_at = $4, last_status = $5, last_error = NULL"
            values += [.integer(time), .integer(Int64(status))]
        case .retry(let retryAt, let status, let error):
            assignments = "next_attempt_at = $4, last_status = $5, last_error = $6"
            values += [.integer(retryAt), SQLValue(status), .text(error)]
        case .failed(let status, let error):
            assignments = "state = 'failed', last_status = $4, last_error = $5"
            values += [SQLValue(status), .text(error)]
        }
        guard
            let head = try connection.query(
                """
                UPDATE event_deliveries SET \(assignments), attempts = attempts + 1, lease_holder = NULL,
                    lease_until = NULL
                WHERE event_id = $1 AND webhook = $2 AND lease_holder = $3 AND state || '' = 'pending'
                RETURNING stream, sequence
                """,
                values
            ).first, let stream = head.string(0), let sequence = head.int64(1)
        else { return false }
        // A head that will be tried again keeps its stream: what waits behind it keeps waiting. When nothing is seen
        // waiting, a writer may be storing the stream's next event right now, waiting for its turn because it saw
        // this one pending, and not committed yet: `releaseStrandedDeliveries` makes it due. (Waiting here for the
        // writer's lock on the stream instead was exact, but with group commit a lock held until a group commits
        // closed cycles with the writers' groups: PostgreSQL broke them after its one-second deadlock timeout, and
        // groups ran past store_timeout, so ingest answered 503.)
        if case .retry = finish.result {
            // Events stored while this head's first try was in flight were stored due (it had not failed yet); they
            // wait for their turn now, or every claim would walk them, and test them, until the receiver came back.
            // `<>`, not `<`: the due index's predicate then does not match, so the stream's index finds them.
            try connection.executeWithNext(
                """
                UPDATE event_deliveries SET next_attempt_at = \(LedgerStatements.waitingForTurn)
                WHERE webhook = $1 AND stream = $2 AND state = 'pending' AND sequence > $3
                    AND next_attempt_at <> \(LedgerStatements.waitingForTurn)
                """,
                [.text(webhook), .text(stream), .integer(sequence)]
            )
            return true
        }
        try makeNextDue(webhook: webhook, stream: stream, at: time, connection)
        return true
    }

    /// Makes the first pending delivery of the stream due at `time`, unless it is due already.
    private static func makeNextDue(
        webhook: String, stream: String, at time: Int64, _ connection: any SQLConnection
    ) throws(LedgerError) {
        try connection.executeWithNext(
            """
            UPDATE event_deliveries
            SET next_attempt_at = CASE WHEN next_attempt_at > $3 THEN $3 ELSE next_attempt_at END
            WHERE webhook = $1 AND stream = $2 AND state = 'pending' AND sequence = (
                SELECT min(next.sequence) FROM event_deliveries next
                WHERE next.webhook = $1 AND next.stream = $2 AND next.state = 'pending')
            """,
            [.text(webhook), .text(stream), .integer(time)]
        )
    }

    func releaseStrandedDeliveries(at time: Int64) throws(LedgerError) -> Int {
        // Found on a reader, so that a receiver down for days (every delivery but its streams' heads waiting) costs
        // the writer nothing: only a found one is written, its condition checked again there.
        let stranded = try database.read { connection throws(LedgerError) in
            var found: [(webhook: String, stream: String, sequence: Int64)] = []
            for webhook in try Self.webhooksWithWaitingDeliveries(connection) {
                for row in try connection.query(Self.firstWaitingBehindNothing, [.text(webhook)]) {
                    found.append((webhook, try row.requiredString(0), try row.requiredInt64(1)))
                }
            }
            return found
        }
        guard !stranded.isEmpty else { return 0 }
        return try database.write { connection throws(LedgerError) in
            var released = 0
            for delivery in stranded {
                // Safe against every writer: a stream's events are numbered under its `event_streams` row, held until
                // the writer commits, so an earlier delivery a writer has not committed cannot exist beside a later
                // one that is committed. A stranded delivery is therefore the first pending of its stream for good.
                released += try connection.query(
                    """
                    UPDATE event_deliveries SET next_attempt_at = $1
                    WHERE webhook = $2 AND stream = $3 AND sequence = $4 AND state = 'pending'
                        AND next_attempt_at = \(LedgerStatements.waitingForTurn) AND NOT EXISTS (
                            SELECT 1 FROM event_deliveries earlier
                            WHERE earlier.webhook = $2 AND earlier.stream = $3 AND earlier.state = 'pending'
                                AND earlier.sequence < $4)
                    RETURNING event_id
                    """,
                    [.integer(time), .text(delivery.webhook), .text(delivery.stream), .integer(delivery.sequence)]
                ).count
            }
            return released
        }
    }

    /// The webhooks that have waiting deliveries, one index probe each rather than a walk of the waiting ones.
    private static func webhooksWithWaitingDeliveries(_ connection: any SQLConnection) throws(LedgerError) -> [String] {
        let waiting = "state = 'pending' AND next_attempt_at = \(LedgerStatements.waitingForTurn)"
        return try connection.query(
            """
            WITH RECURSIVE hooks(webhook) AS (
                SELECT min(webhook) FROM event_deliveries WHERE \(waiting)
                UNION ALL
                SELECT (SELECT min(webhook) FROM event_deliveries WHERE \(waiting) AND webhook > hooks.webhook)
                FROM hooks WHERE hooks.webhook IS NOT NULL
            )
            SELECT webhook FROM hooks WHERE webhook IS NOT NULL
            """, []
        ).compactMap { $0.string(0) }
    }

    /// Of webhook `$1`'s streams, the first waiting delivery of each that waits behind no pending one: two index
    /// probes a stream, from one stream to the next, rather than a step for each delivery waiting (only the first
    /// waiting delivery of a stream can wait behind nothing, since the others wait behind it).
    private static var firstWaitingBehindNothing: String {
        let next = """
            FROM event_deliveries n WHERE n.webhook = $1 AND n.state = 'pending'
                AND n.next_attempt_at = \(LedgerStatements.waitingForTurn) AND n.stream > firsts.stream
            ORDER BY n.stream, n.sequence LIMIT 1
            """
        return """
            WITH RECURSIVE firsts(stream, sequence) AS (
                SELECT stream, sequence FROM (
                    SELECT stream, sequence FROM event_deliveries
                    WHERE webhook = $1 AND state = 'pending' AND next_attempt_at = \(LedgerStatements.waitingForTurn)
                    ORDER BY stream, sequence LIMIT 1) AS start
                UNION ALL
                SELECT (SELECT n.stream \(next)), (SELECT n.sequence \(next))
                FROM firsts WHERE firsts.stream IS NOT NULL
            )
            SELECT stream, sequence FROM firsts WHERE stream IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM event_deliveries earlier
                WHERE earlier.webhook = $1 AND earlier.stream = firsts.stream AND earlier.state = 'pending'
                    AND earlier.sequence < firsts.sequence)
            """
    }

    func retryNow(webhook: String, at time: Int64) throws(LedgerError) -> Int {
        try database.write { connection throws(LedgerError) in
            try connection.query(
                """
                UPDATE event_deliveries SET next_attempt_at = $2
                WHERE webhook = $1 AND state = 'pending' AND next_attempt_at > $2
                    AND next_attempt_at < \(LedgerStatements.waitingForTurn)
                RETURNING event_id
                """,
                [.text(webhook), .integer(time)]
            ).count
        }
    }

    func events(_ query: OutboxQuery) throws(LedgerError) -> [OutboxEvent] {
        guard query.limit > 0 else { return [] }
        var conditions: [String] = []
        var values: [SQLValue] = []
        func condition(_ sql: (String) -> String, _ value: SQLValue) {
            values.append(value)
            conditions.append(sql("$\(values.count)"))
        }
        if let state = query.state {
            condition(
                {
                    "EXISTS (SELECT 1 FROM event_deliveries d WHERE d.event_id = events.event_id AND d.state = \($0))"
                }, .text(state.rawValue))
        }
        if let account = query.account { condition({ "account = \($0)" }, .text(account)) }
        if let original = query.originalTransactionID {
            condition({ "original_transaction_id = \($0)" }, .text(original))
        }
        if let since = query.since { condition({ "created_at >= \($0)" }, .integer(since)) }
        if let after = query.after {
            values += [.integer(after.createdAt), .integer(after.sequence), .text(after.id)]
            let count = values.count
            conditions.append("(created_at, sequence, event_id) < ($\(count - 2), $\(count - 1), $\(count))")
        }
        values.append(.integer(Int64(query.limit)))
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let sql = """
            SELECT event_id, type, account, original_transaction_id, stream, sequence, created_at, body FROM events
            \(filter) ORDER BY created_at DESC, sequence DESC, event_id DESC LIMIT $\(values.count)
            """
        return try database.read { connection throws(LedgerError) in
            var events: [OutboxEvent] = []
            for row in try connection.query(sql, values) {
                events.append(
                    OutboxEvent(
                        id: try row.requiredString(0), type: try row.requiredString(1), account: row.string(2),
                        originalTransactionID: try row.requiredString(3), stream: try row.requiredString(4),
                        sequence: try row.requiredInt64(5), createdAt: try row.requiredInt64(6),
                        body: try row.requiredString(7), deliveries: []
                    )
                )
            }
            var deliveries: [String: [OutboxEvent.Delivery]] = [:]
            for chunk in LedgerStatements.chunks(events.map(\.id)) {
                for row in try connection.query(
                    """
                    SELECT event_id, webhook, state, attempts, next_attempt_at, last_status, last_error, delivered_at
                    FROM event_deliveries WHERE event_id IN (\(LedgerStatements.placeholders(chunk.count)))
                    """,
                    chunk.map(SQLValue.text)
                ) {
                    let stateText = try row.requiredString(2)
                    guard let state = DeliveryState(rawValue: stateText) else {
                        throw LedgerError(.queryFailed, "an event delivery has the unknown state \(stateText)")
                    }
                    // A delivered or failed delivery has no next attempt, whatever the column last held; nor has one
                    // that waits for an earlier event of its stream: its turn has no date.
                    let next = state == .pending ? row.int64(4) : nil
                    deliveries[try row.requiredString(0), default: []].append(
                        OutboxEvent.Delivery(
                            webhook: try row.requiredString(1), state: state, attempts: row.int(3) ?? 0,
                            nextAttemptAt: next == LedgerStatements.waitingForTurn ? nil : next, lastStatus: row.int(5),
                            lastError: row.string(6), deliveredAt: row.int64(7)
                        )
                    )
                }
            }
            return events.map { event in
                var event = event
                event.deliveries = (deliveries[event.id] ?? []).sorted { $0.webhook < $1.webhook }
                return event
            }
        }
    }

    func replay(_ replay: OutboxReplay, at time: Int64) throws(LedgerError) -> Int {
        let reset = """
            UPDATE event_deliveries SET state = 'pending', next_attempt_at = $1, lease_holder = NULL,
                lease_until = NULL, delivered_at = NULL
            """
        let returning = " RETURNING event_id, webhook, stream, sequence"
        return try database.write { connection throws(LedgerError) in
            var rows: [SQLRow] = []
            switch replay {
            case .events(let ids):
                for chunk in LedgerStatements.chunks(Array(Set(ids)).sorted()) {
                    rows += try connection.query(
                        reset + " WHERE event_id IN (\(LedgerStatements.placeholders(chunk.count, from: 2)))"
                            + returning,
                        [.integer(time)] + chunk.map(SQLValue.text)
                    )
                }
            case .failed:
                rows = try connection.query(reset + " WHERE state = 'failed'" + returning, [.integer(time)])
            case .since(let since):
                rows = try connection.query(
                    reset + " WHERE event_id IN (SELECT event_id FROM events WHERE created_at >= $2)" + returning,
                    [.integer(time), .integer(since)]
                )
            }
            // Of each stream's replayed deliveries only the first is due; the others wait for their turn, as at
            // insert, so that claims find the heads rather than walk a replayed backlog. They wait only behind a
            // delivery this replay made pending: nobody can finish that one before this commits, so its finish will
            // see them. The first stays due even behind a delivery that was pending already (the claim's head test
            // holds it back), since a finish of that one running now would not see it.
            var first: [String: Int64] = [:]
            var replayed: [(eventID: String, webhook: String, key: String, sequence: Int64)] = []
            for row in rows {
                let webhook = try row.requiredString(1)
                let key = webhook + "\u{0}" + (try row.requiredString(2))
                let sequence = try row.requiredInt64(3)
                replayed.append((try row.requiredString(0), webhook, key, sequence))
                first[key] = min(first[key] ?? sequence, sequence)
            }
            var waiting: [String: [String]] = [:]
            for delivery in replayed where first[delivery.key] != delivery.sequence {
                waiting[delivery.webhook, default: []].append(delivery.eventID)
            }
            for (webhook, ids) in waiting.sorted(by: { $0.key < $1.key }) {
                for chunk in LedgerStatements.chunks(ids.sorted()) {
                    try connection.execute(
                        """
                        UPDATE event_deliveries SET next_attempt_at = $2
                        WHERE webhook = $1 AND event_id IN (\(LedgerStatements.placeholders(chunk.count, from: 3)))
                        """,
                        [.text(webhook), .integer(LedgerStatements.waitingForTurn)] + chunk.map(SQLValue.text)
                    )
                }
            }
            return rows.count
        }
    }

    func webhookBacklogs() throws(LedgerError) -> [WebhookBacklog] {
        try database.read { connection throws(LedgerError) in
            var backlogs: [WebhookBacklog] = []
            // The oldest pending event of a webhook heads its stream, and heads are due: only they are joined with
            // their events, not a backlog that may hold millions. (A delivery stranded behind nothing waits, and
            // counts among the oldest again once the next sweep made it due.)
            var oldest: [String: Int64] = [:]
            for row in try connection.query(
                """
                SELECT d.webhook, min(e.created_at)
                FROM event_deliveries d JOIN events e ON e.event_id = d.event_id
                WHERE d.state = 'pending' AND d.next_attempt_at < \(LedgerStatements.waitingForTurn) GROUP BY d.webhook
                """,
                []
            ) {
                oldest[try row.requiredString(0)] = row.int64(1)
            }
            for row in try connection.query(
                "SELECT webhook, count(*) FROM event_deliveries WHERE state = 'pending' GROUP BY webhook", []
            ) {
                let webhook = try row.requiredString(0)
                backlogs.append(
                    WebhookBacklog(webhook: webhook, pending: row.int(1) ?? 0, oldestPendingCreatedAt: oldest[webhook]))
            }
            return backlogs.sorted { $0.webhook < $1.webhook }
        }
    }

    func pruneDeliveredEvents(deliveredBefore time: Int64) throws(LedgerError) -> Int {
        // The condition is checked again by the DELETE itself: a replay committed in between keeps its event.
        let unfinished = """
            created_at < $1 AND NOT EXISTS (
                SELECT 1 FROM event_deliveries d WHERE d.event_id = events.event_id
                    AND (d.state <> 'delivered' OR d.delivered_at IS NULL OR d.delivered_at >= $1))
            """
        let batch = LedgerStatements.idsPerStatement
        var pruned = 0
        var cursor: Cursor?
        // A batch per transaction: a long history never holds the writer (SQLite's only one) long enough to time out
        // the requests queued behind it. The cursor walks past the pending and failed events that stay.
        repeat {
            let after = cursor
            let (deleted, last, full) = try database.write { connection throws(LedgerError) in
                var values: [SQLValue] = [.integer(time)]
                var page = ""
                if let after {
                    page = " AND (created_at > $2 OR (created_at = $2 AND event_id > $3))"
                    values += [.integer(after.createdAt), .text(after.eventID)]
                }
                let candidates = try connection.query(
                    "SELECT event_id, created_at FROM events WHERE " + unfinished + page
                        + " ORDER BY created_at, event_id LIMIT \(batch)",
                    values
                )
                let ids = candidates.compactMap { $0.string(0) }
                guard let lastRow = candidates.last else { return (0, Cursor?.none, false) }
                let last = Cursor(createdAt: try lastRow.requiredInt64(1), eventID: try lastRow.requiredString(0))
                let deleted = try connection.query(
                    """
                    DELETE FROM events WHERE event_id IN (\(LedgerStatements.placeholders(ids.count, from: 2)))
                        AND \(unfinished)
                    RETURNING event_id
                    """,
                    [.integer(time)] + ids.map(SQLValue.text)
                ).compactMap { $0.string(0) }
                if !deleted.isEmpty {
                    try connection.execute(
                        """
                        DELETE FROM event_deliveries
                        WHERE event_id IN (\(LedgerStatements.placeholders(deleted.count)))
                        """,
                        deleted.map(SQLValue.text)
                    )
                }
                return (deleted.count, Optional(last), ids.count == batch)
            }
            pruned += deleted
            cursor = full ? last : nil
        } while cursor != nil
        return pruned
    }

    private struct Cursor: Sendable {
        var createdAt: Int64
        var eventID: String
    }
}

/// What the outbox read of the originals a write touches, before the write; also what the write stored of them, when
/// the write follows its own rows (see ``LedgerStatements/outboxBefore(_:_:_:followingWrites:)``).
final class OutboxBefore {
    let originalTransactionIDs: [String]
    let facts: [String: SubscriptionFacts]
    let owners: [String: String]
    /// The rows before, with every row the write stored since; nil when the after-state is to be read.
    private(set) var rowsAfter: SubscriptionRows?
    /// A link the write may have made (by app account token): the owners after are then read.
    private(set) var linksMayHaveChanged = false
    /// PostgreSQL: the originals' streams were locked before the reads, so no other writer of these originals (nor of
    /// their links) has committed since. Deleting an account takes no stream: its links may go meanwhile, and the
    /// write's events then still name the account, as if the write had committed just before the deletion.
    let locksOriginalStreams: Bool

    init(
        originalTransactionIDs: [String], rows: SubscriptionRows, owners: [String: String], followsWrites: Bool,
        locksOriginalStreams: Bool
    ) {
        self.originalTransactionIDs = originalTransactionIDs
        self.facts = rows.facts(originalTransactionIDs)
        self.owners = owners
        self.rowsAfter = followsWrites ? rows : nil
        self.locksOriginalStreams = locksOriginalStreams
    }

    /// The owners after the write: those before when the write followed its rows and looked up no token, else read.
    func ownersAfter(_ connection: any SQLConnection) throws(LedgerError) -> [String: String] {
        guard rowsAfter == nil || linksMayHaveChanged else { return owners }
        return try LedgerStatements.owners(originalTransactionIDs, connection)
    }

    /// The facts after the write: derived when the write followed its rows, else read.
    func factsAfter(_ connection: any SQLConnection) throws(LedgerError) -> [String: SubscriptionFacts] {
        guard let rowsAfter else {
            return try LedgerStatements.subscriptions(originalTransactionIDs: originalTransactionIDs, connection)
        }
        return rowsAfter.facts(originalTransactionIDs)
    }

    /// The row of `transaction` now holds it, as stored at `time` (its token lowercased, as the column keeps it);
    /// `replacing`: an update of a row the ledger held, not an insert.
    func stored(_ transaction: TransactionFacts, at time: Int64, replacing: Bool) {
        var transaction = transaction
        transaction.appAccountToken = transaction.appAccountToken?.lowercased()
        rowsAfter?.store(transaction, at: time, replacing: replacing)
    }

    func stored(_ renewal: RenewalFacts, at time: Int64) { rowsAfter?.store(renewal, at: time) }

    func stored(_ notification: NotificationSummary, original: String, receivedAt: Int64) {
        rowsAfter?.store(notification, original: original, receivedAt: receivedAt)
    }

    /// The write looked up an app account token, which may link the original.
    func mayLink() { linksMayHaveChanged = true }
}

extension LedgerStatements {
    /// Reads what ``recordEvents(_:causes:fallback:at:_:_:)`` compares the write's outcome with; nil, and nothing
    /// read, when no webhook is configured.
    ///
    /// `followingWrites`: the caller hands the result to each of its write's statements, which note the rows they
    /// store, so that the after-state is derived, not read again. On SQLite the one writer makes that safe; on
    /// PostgreSQL the originals' streams are locked first, in the reads' round trip, and every writer of an original's
    /// facts takes its stream's lock here before reading them: none can commit rows of these originals between this
    /// read and this transaction's end.
    static func outboxBefore(
        _ originals: [String], _ outbox: OutboxRules, _ connection: any SQLConnection, followingWrites: Bool = false
    ) throws(LedgerError) -> OutboxBefore? {
        try outboxBefore(originals, outbox, connection, followingWrites: followingWrites, then: []).before
    }

    /// Also runs `next`, the write's first statements, after the reads (in their round trip on PostgreSQL), and
    /// returns their answers; runs only those when there is nothing to read. On SQLite the rows of originals the
    /// writer's ``SubscriptionRowsMemo`` keeps are taken from it, not read.
    static func outboxBefore(
        _ originals: [String], _ outbox: OutboxRules, _ connection: any SQLConnection, followingWrites: Bool = false,
        then next: [SQLStatement]
    ) throws(LedgerError) -> (before: OutboxBefore?, next: [[SQLRow]]) {
        guard outbox.isActive, !originals.isEmpty else { return (nil, try connection.queries(next)) }
        let ids = Array(Set(originals)).sorted()
        let isPostgres = connection is PostgresConnection
        if isPostgres { try lockStreams(ids.map(originalStream), connection) }
        let owned = ownerStatements(ids)
        let memo = (connection as? SQLiteConnection)?.subscriptionRowsMemo
        let kept = ids.compactMap { id in memo?.rows(of: id).map { (id, $0) } }
        #if DEBUG
        // Before `next`, which may store rows of these originals.
        try checkKept(kept, connection)
        #endif
        var (rows, answers) = try SubscriptionRows.read(
            kept.isEmpty ? ids : ids.filter { memo?.rows(of: $0) == nil }, connection, with: owned + next)
        for (id, original) in kept { rows.originals[id] = original }
        let before = OutboxBefore(
            originalTransactionIDs: ids, rows: rows,
            owners: try Self.owners(answers.prefix(owned.count).flatMap { $0 }),
            followsWrites: followingWrites, locksOriginalStreams: isPostgres
        )
        memo?.noteRunning(before)
        return (before, Array(answers.dropFirst(owned.count)))
    }

    #if DEBUG
    /// Debug builds (the tests') read what the memo answered from the tables too: a memo that drifted from them
    /// stops the test run at the write that found it, not events later.
    private static func checkKept(
        _ kept: [(String, SubscriptionRows.Original)], _ connection: any SQLConnection
    ) throws(LedgerError) {
        guard !kept.isEmpty else { return }
        let read = try SubscriptionRows.read(kept.map(\.0), connection)
        for (id, original) in kept where read.originals[id] != original {
            preconditionFailure("the SQLite writer's memo of original \(id) differs from its rows")
        }
    }
    #endif

    static func owners(_ originals: [String], _ connection: any SQLConnection) throws(LedgerError) -> [String: String] {
        try owners(connection.queries(ownerStatements(originals)).flatMap { $0 })
    }

    static func ownerStatements(_ originals: [String]) -> [SQLStatement] {
        chunks(originals).map { chunk in
            SQLStatement(
                """
                SELECT original_transaction_id, account FROM account_links
                WHERE original_transaction_id IN (\(placeholders(chunk.count)))
                """,
                chunk.map(SQLValue.text)
            )
        }
    }

    static func owners(_ rows: [SQLRow]) throws(LedgerError) -> [String: String] {
        var owners: [String: String] = [:]
        for row in rows { owners[try row.requiredString(0)] = try row.requiredString(1) }
        return owners
    }

    /// Builds one ``LedgerChange`` per original in `before` whose facts or owner the write changed, asks the rules for
    /// their events, and stores the new ones; `causes` gives each original's cause (`fallback` for the others).
    ///
    /// Only the touched originals' facts and links change in a write, so an account's originals before it are its
    /// originals after it, less the touched ones it did not own before, plus the touched ones it did.
    ///
    /// On PostgreSQL the streams the change can concern are locked before what is compared is read (the originals'
    /// before the state before, in ``outboxBefore(_:_:_:followingWrites:then:)``; the accounts' before the accounts'
    /// other originals), and stay locked until commit: writers of one account then read, decide and number its events
    /// one after the other, so an event with a greater sequence was decided on a state that holds everything the
    /// earlier ones saw (two writes of one account's purchases, side by side, never end on entitlements that miss one
    /// of them).
    static func recordEvents(
        _ before: OutboxBefore?, causes: [String: LedgerChangeCause] = [:], fallback: LedgerChangeCause,
        at time: Int64, _ outbox: OutboxRules, _ connection: any SQLConnection
    ) throws(LedgerError) {
        guard let before else { return }
        let originals = before.originalTransactionIDs
        let touched = Set(originals)
        let afterOwners = try before.ownersAfter(connection)
        if before.locksOriginalStreams {
            // The originals' streams are locked since the reads before; the accounts' join them.
            try lockStreams(Set(before.owners.values).union(afterOwners.values).sorted(), connection)
        }
        let afterFacts = try before.factsAfter(connection)
        let changed = originals.filter { before.facts[$0] != afterFacts[$0] || before.owners[$0] != afterOwners[$0] }
        guard !changed.isEmpty else { return }

        let accounts = Set(changed.compactMap { before.owners[$0] } + changed.compactMap { afterOwners[$0] })
        var ownedAfter: [String: [String]] = [:]
        for chunk in chunks(accounts.sorted()) {
            for row in try connection.query(
                """
                SELECT account, original_transaction_id FROM account_links
                WHERE account IN (\(placeholders(chunk.count)))
                """,
                chunk.map(SQLValue.text)
            ) {
                ownedAfter[try row.requiredString(0), default: []].append(try row.requiredString(1))
            }
        }
        let untouched = Set(ownedAfter.values.joined()).subtracting(touched)
        let untouchedFacts = try subscriptions(originalTransactionIDs: Array(untouched), connection)
        var accountsBefore: [String: [SubscriptionFacts]] = [:]
        var accountsAfter: [String: [SubscriptionFacts]] = [:]
        for account in accounts {
            let after = Set(ownedAfter[account] ?? [])
            let beforeIDs = after.subtracting(touched).union(originals.filter { before.owners[$0] == account })
            accountsAfter[account] = after.sorted().compactMap {
                touched.contains($0) ? afterFacts[$0] : untouchedFacts[$0]
            }
            accountsBefore[account] = beforeIDs.sorted().compactMap {
                touched.contains($0) ? before.facts[$0] : untouchedFacts[$0]
            }
        }

        var drafts: [EventDraft] = []
        for original in changed {
            let accountBefore = before.owners[original]
            let accountAfter = afterOwners[original]
            let involved = [accountBefore, accountAfter].compactMap { $0 }
            let change = LedgerChange(
                cause: causes[original] ?? fallback, originalTransactionID: original, before: before.facts[original],
                after: afterFacts[original], accountBefore: accountBefore, accountAfter: accountAfter,
                accountsBefore: accountsBefore.filter { involved.contains($0.key) },
                accountsAfter: accountsAfter.filter { involved.contains($0.key) }, time: time
            )
            drafts += outbox.events(change)
        }
        try store(drafts, at: time, outbox, connection)
    }

    /// Stores the drafts some webhook wants whose dedupe key is new, each with the next sequence of its stream and a
    /// pending delivery per subscriber: per stream, its number and its events, then every delivery in one statement.
    /// A delivery is due at `time`, or waits for its turn (``waitingForTurn``) behind one that waits already or one
    /// of the same write: the finish of the one before it makes it due.
    ///
    /// Streams are locked in one order for every writer (their `event_streams` row, until commit), so concurrent
    /// PostgreSQL writes cannot deadlock on them, and the numbers of one stream are handed out, and committed, in
    /// order.
    static func store(
        _ drafts: [EventDraft], at time: Int64, _ outbox: OutboxRules, _ connection: any SQLConnection
    ) throws(LedgerError) {
        guard !drafts.isEmpty else { return }
        // Keys stored by earlier writes are not looked up first: the event's INSERT skips them, and their numbers are
        // given back.
        var keys = Set<String>()
        var byStream: [String: [(draft: EventDraft, webhooks: [String])]] = [:]
        for draft in drafts where keys.insert(draft.dedupeKey).inserted {
            let webhooks = Array(Set(outbox.subscribers(draft))).sorted()
            guard !webhooks.isEmpty else { continue }
            byStream[draft.account ?? originalStream(draft.originalTransactionID), default: []].append(
                (draft, webhooks))
        }
        let createdAt = JSONValue.string(outbox.formatTime(time)).serializedText
        var deliveries: [(values: [SQLValue], headsIfAlone: Bool)] = []
        let isPostgres = connection is PostgresConnection
        for (stream, entries) in byStream.sorted(by: { $0.key < $1.key }) {
            var queued = Set<String>()
            for text in [stream] + entries.flatMap({ [$0.draft.type, $0.draft.dedupeKey, $0.draft.bodyMembers] }) {
                try checkStorable(text)
            }
            if isPostgres, entries.count == 1, let (draft, webhooks) = entries.first {
                // A write's one event of a stream, the usual case: numbered and stored in one statement, one round
                // trip less.
                guard
                    let (id, sequence) = try storeNumbered(
                        draft, stream: stream, createdAt: createdAt, time, connection)
                else { continue }
                for webhook in webhooks {
                    deliveries.append(([.text(id), .text(webhook), .text(stream), .integer(sequence)], true))
                }
                continue
            }
            guard
                let last = try connection.query(
                    """
                    INSERT INTO event_streams (stream, last_sequence) VALUES ($1, $2)
                    ON CONFLICT (stream) DO UPDATE SET last_sequence = event_streams.last_sequence + $2
                    RETURNING last_sequence
                    """,
                    [.text(stream), .integer(Int64(entries.count))]
                ).first?.requiredInt64(0)
            else { throw LedgerError(.queryFailed, "an event stream's sequence cannot be read back") }
            var sequence = last - Int64(entries.count)
            for (draft, webhooks) in entries {
                let id = newEventID()
                let type = JSONValue.string(draft.type).serializedText
                let body =
                    #"{"id":"\#(id)","type":\#(type),"created_at":\#(createdAt),"sequence":\#(sequence + 1)"#
                    + (draft.bodyMembers.isEmpty ? "" : "," + draft.bodyMembers) + "}"
                // This fact's event is already stored, by an earlier write or by another writer since (PostgreSQL).
                let inserted = try connection.query(
                    """
                    INSERT INTO events (event_id, dedupe_key, type, account, original_transaction_id, stream, sequence,
                        created_at, body)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                    ON CONFLICT (dedupe_key) DO NOTHING
                    RETURNING event_id
                    """,
                    [
                        .text(id), .text(draft.dedupeKey), .text(draft.type), SQLValue(draft.account),
                        .text(draft.originalTransactionID), .text(stream), .integer(sequence + 1), .integer(time),
                        .text(body),
                    ]
                )
                guard !inserted.isEmpty else { continue }
                sequence += 1
                for webhook in webhooks {
                    deliveries.append(
                        (
                            [.text(id), .text(webhook), .text(stream), .integer(sequence)],
                            queued.insert(webhook).inserted
                        ))
                }
            }
            if sequence != last {
                // Numbers taken for events stored before are given back: a stream has no gaps. The row
                // is still locked by this transaction, so nobody took a later number.
                try connection.execute(
                    "UPDATE event_streams SET last_sequence = $2 WHERE stream = $1",
                    [.text(stream), .integer(sequence)]
                )
            }
        }
        // The first delivery of a stream in this write waits for its turn only behind one that waits already or a head
        // that was tried before (each found by one index probe: only a head is ever tried); the others of the write
        // wait behind it (nobody can finish it before this commits, so its finish will see them). Behind a lone head
        // not tried yet it is stored due, and the claim's head test holds it back: that head may be finished by another
        // transaction while this one is open, and that finish would not see this delivery. Behind a head being retried
        // the same can happen only while a retry is under way, once per back-off; every claim would otherwise walk what
        // a failing receiver left behind its heads, each time a write nudged the dispatcher (on SQLite on the writer,
        // whose time per notification doubled with 4,000 pending, BENCHMARKS.md). Behind a waiting one a miss can
        // happen only if the stream moves two steps meanwhile. `releaseStrandedDeliveries` makes a missed one due a few
        // seconds later.
        let rowsPerStatement = idsPerStatement / 5
        for start in stride(from: 0, to: deliveries.count, by: rowsPerStatement) {
            var values: [SQLValue] = []
            var rows: [String] = []
            for delivery in deliveries[start..<min(start + rowsPerStatement, deliveries.count)] {
                let first = values.count
                values += delivery.values
                let (id, webhook, stream) = ("$\(first + 1)", "$\(first + 2)", "$\(first + 3)")
                let sequence = "$\(first + 4)"
                var nextAttempt = "\(waitingForTurn)"
                if delivery.headsIfAlone {
                    values.append(.integer(time))
                    nextAttempt = """
                        CASE WHEN EXISTS (SELECT 1 FROM event_deliveries earlier WHERE earlier.webhook = \(webhook)
                            AND earlier.stream = \(stream) AND earlier.state = 'pending'
                            AND earlier.next_attempt_at = \(nextAttempt))
                        OR (SELECT head.attempts FROM event_deliveries head WHERE head.webhook = \(webhook)
                            AND head.stream = \(stream) AND head.state = 'pending' ORDER BY head.sequence LIMIT 1) > 0
                        THEN \(nextAttempt) ELSE $\(first + 5) END
                        """
                }
                rows.append("(\(id), \(webhook), \(stream), \(sequence), 'pending', 0, \(nextAttempt))")
            }
            try connection.executeWithNext(
                """
                INSERT INTO event_deliveries (event_id, webhook, stream, sequence, state, attempts, next_attempt_at)
                VALUES \(rows.joined(separator: ", "))
                """,
                values
            )
        }
    }

    /// Takes the stream's next number and stores the event under it in one statement (PostgreSQL: SQLite has no
    /// INSERT in a WITH); nil, and the number given back, when the event's dedupe key is stored already. The body is
    /// the one ``store(_:at:_:_:)`` writes, its sequence spliced in by the server as the decimal digits Swift writes.
    private static func storeNumbered(
        _ draft: EventDraft, stream: String, createdAt: String, _ time: Int64, _ connection: any SQLConnection
    ) throws(LedgerError) -> (id: String, sequence: Int64)? {
        let id = newEventID()
        let type = JSONValue.string(draft.type).serializedText
        let head = #"{"id":"\#(id)","type":\#(type),"created_at":\#(createdAt),"sequence":"#
        let tail = (draft.bodyMembers.isEmpty ? "" : "," + draft.bodyMembers) + "}"
        let stored = try connection.query(
            """
            WITH numbered AS (
                INSERT INTO event_streams (stream, last_sequence) VALUES ($6, 1)
                ON CONFLICT (stream) DO UPDATE SET last_sequence = event_streams.last_sequence + 1
                RETURNING last_sequence
            )
            INSERT INTO events (event_id, dedupe_key, type, account, original_transaction_id, stream, sequence,
                created_at, body)
            SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, last_sequence, $7::bigint,
                $8::text || last_sequence || $9::text
            FROM numbered
            ON CONFLICT (dedupe_key) DO NOTHING
            RETURNING sequence
            """,
            [
                .text(id), .text(draft.dedupeKey), .text(draft.type), SQLValue(draft.account),
                .text(draft.originalTransactionID), .text(stream), .integer(time), .text(head), .text(tail),
            ]
        )
        guard let sequence = try stored.first?.requiredInt64(0) else {
            // This fact's event is stored already. The stream's row is locked by this transaction since the number
            // was taken, so nobody took a later one: giving it back leaves no gap.
            try connection.executeWithNext(
                "UPDATE event_streams SET last_sequence = last_sequence - 1 WHERE stream = $1", [.text(stream)]
            )
            return nil
        }
        return (id, sequence)
    }

    /// `next_attempt_at` of a pending delivery that waits for an earlier one of its stream (its webhook's) to be
    /// delivered or to fail: never due by time, only made due by that finish (or a replay). Such deliveries are not in
    /// the due index (schema version 9), so a claim finds a long backlog's heads without walking it.
    static let waitingForTurn = Int64.max

    /// Locks the streams' rows, in the order given (sorted by every caller), creating those that are missing. Sent
    /// with the connection's next statement: that statement runs after the locks are held.
    static func lockStreams(_ streams: [String], _ connection: any SQLConnection) throws(LedgerError) {
        for chunk in chunks(streams) {
            let rows = (1...chunk.count).map { "($\($0), 0)" }.joined(separator: ", ")
            try connection.executeWithNext(
                """
                INSERT INTO event_streams (stream, last_sequence) VALUES \(rows)
                ON CONFLICT (stream) DO UPDATE SET last_sequence = event_streams.last_sequence
                """,
                chunk.map(SQLValue.text)
            )
        }
    }

    /// The stream of an original's events while no account owns it.
    static func originalStream(_ originalTransactionID: String) -> String { "otx:" + originalTransactionID }

    /// `evt_` and 128 bits from the system's CSPRNG, in lowercase hex.
    static func newEventID() -> String {
        var generator = SystemRandomNumberGenerator()
        return "evt_"
            + (0..<2).map { _ in
                let hex = String(generator.next() as UInt64, radix: 16)
                return String(repeating: "0", count: 16 - hex.count) + hex
            }.joined()
    }

    static func placeholders(_ count: Int, from first: Int) -> String {
        (first..<(first + count)).map { "$\($0)" }.joined(separator: ", ")
    }
}

extension JSONValue {
    fileprivate var serializedText: String { String(decoding: serialized(), as: UTF8.self) }
}
