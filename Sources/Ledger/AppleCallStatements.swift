/// The `apple_calls` queue's operations (see AppleCalls.swift): each call is one database transaction.
extension LedgerRecords {
    func claimAppleCalls(holder: String, now: Int64, leaseUntil: Int64, limit: Int) throws(LedgerError) -> [AppleCall] {
        guard limit > 0 else { return [] }
        return try database.write { connection throws(LedgerError) in
            // SKIP LOCKED: a replica never waits on, nor takes, a call another replica is claiming right now.
            let rows = try connection.query(
                """
                SELECT \(LedgerStatements.appleCallColumns) FROM apple_calls
                WHERE state = 'pending' AND next_attempt_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)
                ORDER BY next_attempt_at, call_id
                LIMIT $2
                """ + (connection is PostgresConnection ? " FOR UPDATE SKIP LOCKED" : ""),
                [.integer(now), .integer(Int64(limit))]
            )
            let calls = try rows.map(LedgerStatements.appleCall)
            for chunk in LedgerStatements.chunks(calls.map(\.callID)) {
                try connection.execute(
                    """
                    UPDATE apple_calls SET lease_holder = $1, lease_until = $2
                    WHERE call_id IN (\(LedgerStatements.placeholders(chunk.count, from: 3)))
                    """,
                    [.text(holder), .integer(leaseUntil)] + chunk.map(SQLValue.text)
                )
            }
            return calls
        }
    }

    func finishAppleCall(callID: String, holder: String, result: AppleCallResult, at time: Int64) throws(LedgerError)
        -> Bool
    {
        let assignments: String
        var values: [SQLValue] = [.text(callID), .text(holder)]
        switch result {
        case .done:
            assignments = "state = 'done', done_at = $3, last_error = NULL"
            values += [.integer(time)]
        case .retry(let retryAt, let status, let appleErrorCode, let error):
            assignments = "next_attempt_at = $3, last_status = $4, apple_error_code = $5, last_error = $6"
            values += [.integer(retryAt), SQLValue(status), SQLValue(appleErrorCode), .text(error)]
        case .failed(let status, let appleErrorCode, let error):
            assignments = "state = 'failed', last_status = $3, apple_error_code = $4, last_error = $5"
            values += [SQLValue(status), SQLValue(appleErrorCode), .text(error)]
        }
        let parameters = values
        return try database.write { connection throws(LedgerError) in
            !(try connection.query(
                """
                UPDATE apple_calls SET \(assignments), attempts = attempts + 1, lease_holder = NULL, lease_until = NULL
                WHERE call_id = $1 AND lease_holder = $2 AND state = 'pending'
                RETURNING call_id
                """,
                parameters
            ).isEmpty)
        }
    }

    func appleCalls(transactionID: String) throws(LedgerError) -> [AppleCall] {
        try database.read { connection throws(LedgerError) in
            try connection.query(
                """
                SELECT \(LedgerStatements.appleCallColumns) FROM apple_calls
                WHERE (target_id = $1 AND kind = 'finish_transaction')
                    OR (kind = 'set_app_account_token' AND target_id =
                        (SELECT original_transaction_id FROM transactions WHERE transaction_id = $1))
                ORDER BY created_at, call_id
                """,
                [.text(transactionID)]
            ).map(LedgerStatements.appleCall)
        }
    }

    func appleCalls(in states: [AppleCallState], limit: Int) throws(LedgerError) -> [AppleCall] {
        guard !states.isEmpty, limit > 0 else { return [] }
        return try database.read { connection throws(LedgerError) in
            try connection.query(
                """
                SELECT \(LedgerStatements.appleCallColumns) FROM apple_calls
                WHERE state IN (\(LedgerStatements.placeholders(states.count, from: 2)))
                ORDER BY created_at, call_id
                LIMIT $1
                """,
                [.integer(Int64(limit))] + states.map { .text($0.rawValue) }
            ).map(LedgerStatements.appleCall)
        }
    }
}

extension LedgerStatements {
    /// The calls a granted claim of `transactionID` (of `original`) by `account` owes Apple, added in the claim's
    /// transaction. The token goes only to an original the account owns after the claim's link (a purchase the restore
    /// behavior kept with another account keeps its owner's say), and only when no transaction of it carries one.
    static func recordClaimDuties(
        transactionID: String, original: String, account: String, link: AccountLinkOutcome, rules: AppleCallRules,
        at time: Int64, _ changed: inout ChangedAccounts, _ connection: any SQLConnection
    ) throws(LedgerError) {
        guard
            let transaction = try connection.query(
                "SELECT bundle_id, environment FROM transactions WHERE transaction_id = $1", [.text(transactionID)]
            ).first,
            let bundleID = transaction.string(0), let environment = transaction.string(1)
        else { return }
        let duties = rules.claimDuties(bundleID)
        if duties.finishTransaction {
            try addAppleCall(
                "finish:\(transactionID)", .finishTransaction, bundleID: bundleID, environment: environment,
                target: transactionID, argument: nil, at: time, connection)
        }
        switch link {
        case .linked, .alreadyLinked, .transferred: break
        case .ownedByAnotherAccount, .unknownTransaction: return
        }
        guard duties.setAppAccountToken,
            try connection.query(
                "SELECT call_id FROM apple_calls WHERE call_id = $1", [.text("token:\(original)")]
            ).isEmpty,
            try connection.query(
                """
                SELECT transaction_id FROM transactions
                WHERE original_transaction_id = $1 AND app_account_token IS NOT NULL LIMIT 1
                """,
                [.text(original)]
            ).isEmpty
        else { return }
        // The account's own token when it registered one, so that Apple's notifications name it as its app does;
        // else a new one registered to it here, so that those notifications link to it all the same.
        let token: String
        if let registered = try connection.query(
            """
            SELECT app_account_token FROM account_tokens WHERE account = $1
            ORDER BY registered_at, app_account_token LIMIT 1
            """,
            [.text(account)]
        ).first?.string(0) {
            token = registered
        } else {
            token = newAppAccountToken()
            try lockAppAccountToken(token, connection)
            try connection.execute(
                "INSERT INTO account_tokens (app_account_token, account, registered_at) VALUES ($1, $2, $3)",
                [.text(token), .text(account), .integer(time)]
            )
            changed.insert(account)
        }
        try addAppleCall(
            "token:\(original)", .setAppAccountToken, bundleID: bundleID, environment: environment, target: original,
            argument: token, at: time, connection)
    }

    private static func addAppleCall(
        _ callID: String, _ kind: AppleCallKind, bundleID: String, environment: String, target: String,
        argument: String?, at time: Int64, _ connection: any SQLConnection
    ) throws(LedgerError) {
        try connection.execute(
            """
            INSERT INTO apple_calls (call_id, kind, bundle_id, environment, target_id, argument, state, attempts,
                next_attempt_at, created_at)
            VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $7, $7)
            ON CONFLICT (call_id) DO NOTHING
            """,
            [.text(callID), .text(kind.rawValue), .text(bundleID), .text(environment), .text(target),
             SQLValue(argument), .integer(time)]
        )
    }

    /// A version 4 UUID from the system's CSPRNG, lowercase, as StoreKit's `appAccountToken`s are stored.
    static func newAppAccountToken() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let hex = bytes.map { byte in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }
        return [0..<4, 4..<6, 6..<8, 8..<10, 10..<16].map { hex[$0].joined() }.joined(separator: "-")
    }

    static let appleCallColumns = """
        call_id, kind, bundle_id, environment, target_id, argument, state, attempts, next_attempt_at, last_status, \
        apple_error_code, last_error, created_at, done_at
        """

    static func appleCall(_ row: SQLRow) throws(LedgerError) -> AppleCall {
        let kind = try row.requiredString(1)
        let state = try row.requiredString(6)
        guard let callKind = AppleCallKind(rawValue: kind), let callState = AppleCallState(rawValue: state) else {
            throw LedgerError(.queryFailed, "apple_calls holds a call of kind \(kind) in state \(state)")
        }
        return AppleCall(
            callID: try row.requiredString(0), kind: callKind, bundleID: try row.requiredString(2),
            environment: try row.requiredString(3), targetID: try row.requiredString(4), argument: row.string(5),
            state: callState, attempts: row.int(7) ?? 0, nextAttemptAt: try row.requiredInt64(8),
            lastStatus: row.int(9), appleErrorCode: row.int64(10), lastError: row.string(11),
            createdAt: try row.requiredInt64(12), doneAt: row.int64(13))
    }
}
