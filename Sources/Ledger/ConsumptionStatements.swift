/// The refund questions' operations (see Consumption.swift): each call is one database transaction.
extension LedgerRecords {
    func storeConsumptionAnswer(
        transactionID: String, body: String, at time: Int64
    ) throws(LedgerError) -> ConsumptionRequest? {
        try checkStorable(transactionID)
        try checkStorable(body)
        return try database.write { connection throws(LedgerError) in
            try connection.execute(
                """
                INSERT INTO consumption_answers (transaction_id, body, updated_at) VALUES ($1, $2, $3)
                ON CONFLICT (transaction_id) DO UPDATE SET body = $2, updated_at = $3
                """,
                [.text(transactionID), .text(body), .integer(time)]
            )
            // An answer that arrives while a try backs off goes out now, not at the back-off's end.
            try connection.execute(
                """
                UPDATE consumption_requests SET next_attempt_at = $2
                WHERE transaction_id = $1 AND state = 'open' AND expires_at > $2
                """,
                [.text(transactionID), .integer(time)]
            )
            return try LedgerStatements.latestConsumptionRequest(transactionID: transactionID, connection)
        }
    }

    func consumptionAnswer(transactionID: String) throws(LedgerError) -> ConsumptionAnswer? {
        try database.read { connection throws(LedgerError) in
            try LedgerStatements.consumptionAnswer(transactionID: transactionID, connection)
        }
    }

    func consumptionRequest(transactionID: String) throws(LedgerError) -> ConsumptionRequest? {
        try database.read { connection throws(LedgerError) in
            try LedgerStatements.latestConsumptionRequest(transactionID: transactionID, connection)
        }
    }

    func consumptionRequests(openOnly: Bool, now: Int64, limit: Int) throws(LedgerError) -> [ConsumptionRequest] {
        try database.read { connection throws(LedgerError) in
            let rows = try connection.query(
                """
                SELECT \(LedgerStatements.consumptionColumns) FROM consumption_requests r
                LEFT JOIN consumption_answers a ON a.transaction_id = r.transaction_id
                \(openOnly ? "WHERE r.state = 'open' AND r.expires_at > $2" : "WHERE $2 = $2")
                ORDER BY r.requested_at DESC, r.notification_uuid DESC
                LIMIT $1
                """,
                [.integer(Int64(max(0, limit))), .integer(now)]
            )
            var requests: [ConsumptionRequest] = []
            for row in rows { requests.append(try LedgerStatements.consumptionRequest(row)) }
            return requests
        }
    }

    func expireConsumptionRequests(now: Int64) throws(LedgerError) -> Int {
        try database.write { connection throws(LedgerError) in
            try connection.query(
                """
                UPDATE consumption_requests SET state = 'expired', lease_holder = NULL, lease_until = NULL
                WHERE state = 'open' AND expires_at <= $1
                RETURNING notification_uuid
                """,
                [.integer(now)]
            ).count
        }
    }

    func claimConsumptionRequests(
        holder: String, now: Int64, leaseUntil: Int64, limit: Int
    ) throws(LedgerError) -> [ClaimedConsumptionRequest] {
        guard limit > 0 else { return [] }
        return try database.write { connection throws(LedgerError) in
            // SKIP LOCKED, as the outbox's claim: a replica never waits on, nor takes, a request another is claiming.
            let rows = try connection.query(
                """
                SELECT \(LedgerStatements.consumptionColumns), t.type,
                    CASE WHEN c.transaction_id IS NULL THEN 0 ELSE 1 END
                FROM consumption_requests r
                JOIN consumption_answers a ON a.transaction_id = r.transaction_id
                LEFT JOIN transactions t ON t.transaction_id = r.transaction_id
                LEFT JOIN claims c ON c.transaction_id = r.transaction_id
                WHERE r.state = 'open' AND r.expires_at > $1
                    AND (r.next_attempt_at IS NULL OR r.next_attempt_at <= $1)
                    AND (r.lease_until IS NULL OR r.lease_until <= $1)
                ORDER BY r.requested_at, r.notification_uuid
                LIMIT $2
                """ + (connection is PostgresConnection ? " FOR UPDATE OF r SKIP LOCKED" : ""),
                [.integer(now), .integer(Int64(limit))]
            )
            var claimed: [ClaimedConsumptionRequest] = []
            let extra = LedgerStatements.consumptionColumnCount
            for row in rows {
                claimed.append(
                    ClaimedConsumptionRequest(
                        request: try LedgerStatements.consumptionRequest(row), productType: row.string(extra),
                        isClaimed: row.bool(extra + 1) ?? false, leaseUntil: leaseUntil))
            }
            for request in claimed {
                try connection.execute(
                    "UPDATE consumption_requests SET lease_holder = $2, lease_until = $3 WHERE notification_uuid = $1",
                    [.text(request.request.notificationUUID), .text(holder), .integer(leaseUntil)]
                )
            }
            return claimed
        }
    }

    func finishConsumptionRequest(
        notificationUUID: String, holder: String, result: ConsumptionSendResult, at time: Int64
    ) throws(LedgerError) -> Bool {
        let assignments: String
        var values: [SQLValue] = [.text(notificationUUID), .text(holder)]
        switch result {
        case .sent(let status, let body):
            try checkStorable(body)
            assignments = "state = 'sent', sent_at = $3, apple_status = $4, sent_body = $5, apple_error_code = NULL, "
                + "last_error = NULL"
            values += [.integer(time), .integer(Int64(status)), .text(body)]
        case .retry(let retryAt, let status, let appleErrorCode, let error):
            assignments = "next_attempt_at = $3, apple_status = $4, apple_error_code = $5, last_error = $6"
            values += [.integer(retryAt), SQLValue(status), SQLValue(appleErrorCode), .text(error)]
        case .failed(let status, let appleErrorCode, let error):
            assignments = "state = 'failed', apple_status = $3, apple_error_code = $4, last_error = $5"
            values += [SQLValue(status), SQLValue(appleErrorCode), .text(error)]
        }
        let bound = values
        return try database.write { connection throws(LedgerError) in
            !(try connection.query(
                """
                UPDATE consumption_requests SET \(assignments), attempts = attempts + 1, lease_holder = NULL,
                    lease_until = NULL
                WHERE notification_uuid = $1 AND lease_holder = $2 AND state = 'open'
                RETURNING notification_uuid
                """,
                bound
            ).isEmpty)
        }
    }

    func consumptionRequestCounts(now: Int64) throws(LedgerError) -> [ConsumptionRequestState: Int] {
        try database.read { connection throws(LedgerError) in
            var counts: [ConsumptionRequestState: Int] = [:]
            for row in try connection.query(
                """
                SELECT CASE WHEN state = 'open' AND expires_at <= $1 THEN 'expired' ELSE state END, count(*)
                FROM consumption_requests GROUP BY 1
                """,
                [.integer(now)]
            ) {
                guard let state = ConsumptionRequestState(rawValue: try row.requiredString(0)) else { continue }
                counts[state, default: 0] += row.int(1) ?? 0
            }
            return counts
        }
    }
}

extension LedgerStatements {
    /// A newly stored `CONSUMPTION_REQUEST` opens its request, in the notification's transaction: Apple's window runs
    /// from the notification's signed date, not from when receiptd got it.
    static func recordConsumptionRequest(
        _ notification: NotificationFacts, at time: Int64, _ connection: any SQLConnection
    ) throws(LedgerError) {
        guard notification.type == "CONSUMPTION_REQUEST", let transaction = notification.transaction else { return }
        try connection.execute(
            """
            INSERT INTO consumption_requests (notification_uuid, transaction_id, original_transaction_id, bundle_id,
                environment, reason, requested_at, expires_at, state, attempts, next_attempt_at, created_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'open', 0, $9, $9)
            ON CONFLICT (notification_uuid) DO NOTHING
            """,
            [
                .text(notification.uuid), .text(transaction.transactionID), .text(transaction.originalTransactionID),
                SQLValue(notification.bundleID ?? transaction.bundleID),
                SQLValue(notification.environment ?? transaction.environment),
                SQLValue(notification.consumptionRequestReason), .integer(notification.signedDate),
                .integer(notification.signedDate + ConsumptionRequest.window), .integer(time),
            ]
        )
    }

    static let consumptionColumns = """
        r.notification_uuid, r.transaction_id, r.original_transaction_id, r.bundle_id, r.environment, r.reason,
        r.requested_at, r.expires_at, r.state, r.attempts, r.next_attempt_at, r.sent_body, r.apple_status,
        r.apple_error_code, r.last_error, r.sent_at, a.body, a.updated_at
        """
    static let consumptionColumnCount = 18

    static func consumptionRequest(_ row: SQLRow) throws(LedgerError) -> ConsumptionRequest {
        let transactionID = try row.requiredString(1)
        guard let state = ConsumptionRequestState(rawValue: try row.requiredString(8)) else {
            throw LedgerError(.queryFailed, "a consumption request has an unknown state")
        }
        var answer: ConsumptionAnswer?
        if let body = row.string(16), let updatedAt = row.int64(17) {
            answer = ConsumptionAnswer(transactionID: transactionID, body: body, updatedAt: updatedAt)
        }
        return ConsumptionRequest(
            notificationUUID: try row.requiredString(0), transactionID: transactionID,
            originalTransactionID: row.string(2), bundleID: row.string(3), environment: row.string(4),
            reason: row.string(5), requestedAt: try row.requiredInt64(6), expiresAt: try row.requiredInt64(7),
            state: state, attempts: row.int(9) ?? 0, nextAttemptAt: row.int64(10), sentBody: row.string(11),
            appleStatus: row.int(12), appleErrorCode: row.int64(13), lastError: row.string(14), sentAt: row.int64(15),
            answer: answer)
    }

    static func latestConsumptionRequest(
        transactionID: String, _ connection: any SQLConnection
    ) throws(LedgerError) -> ConsumptionRequest? {
        try connection.query(
            """
            SELECT \(consumptionColumns) FROM consumption_requests r
            LEFT JOIN consumption_answers a ON a.transaction_id = r.transaction_id
            WHERE r.transaction_id = $1
            ORDER BY r.requested_at DESC, r.notification_uuid DESC
            LIMIT 1
            """,
            [.text(transactionID)]
        ).first.map { row throws(LedgerError) in try consumptionRequest(row) }
    }

    static func consumptionAnswer(
        transactionID: String, _ connection: any SQLConnection
    ) throws(LedgerError) -> ConsumptionAnswer? {
        guard
            let row = try connection.query(
                "SELECT body, updated_at FROM consumption_answers WHERE transaction_id = $1", [.text(transactionID)]
            ).first
        else { return nil }
        return ConsumptionAnswer(
            transactionID: transactionID, body: try row.requiredString(0), updatedAt: try row.requiredInt64(1))
    }
}
