internal import JSONText

/// The ledger's tables, as an ordered list of migrations shared by SQLite and PostgreSQL.
///
/// Version N is reached by applying migrations 1...N in order, each once; the applied version is one row in
/// `ledger_schema`. Never edit a shipped migration: append a new one.
enum LedgerSchema {
    struct Migration: Sendable {
        var version: Int
        var statements: [String]
        /// What SQL both databases accept cannot do, run after the statements in the same transaction.
        var afterStatements: (@Sendable (any SQLConnection) throws(LedgerError) -> Void)? = nil
    }

    static let migrations: [Migration] = [
        Migration(version: 1, statements: [
            """
            CREATE TABLE transactions (
                transaction_id TEXT PRIMARY KEY,
                original_transaction_id TEXT NOT NULL,
                product_id TEXT NOT NULL,
                bundle_id TEXT,
                type TEXT,
                purchase_date BIGINT,
                original_purchase_date BIGINT,
                expires_date BIGINT,
                revocation_date BIGINT,
                revocation_reason INTEGER,
                in_app_ownership_type TEXT,
                web_order_line_item_id TEXT,
                environment TEXT,
                signed_date BIGINT NOT NULL,
                payload_json TEXT NOT NULL,
                first_seen BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX transactions_by_original ON transactions (original_transaction_id)",
            """
            CREATE TABLE transaction_sources (
                transaction_id TEXT NOT NULL,
                source TEXT NOT NULL,
                first_seen BIGINT NOT NULL,
                PRIMARY KEY (transaction_id, source)
            )
            """,
            """
            CREATE TABLE renewal_infos (
                original_transaction_id TEXT PRIMARY KEY,
                product_id TEXT,
                auto_renew_product_id TEXT,
                auto_renew_status INTEGER,
                expiration_intent INTEGER,
                is_in_billing_retry_period INTEGER,
                grace_period_expires_date BIGINT,
                environment TEXT,
                signed_date BIGINT NOT NULL,
                payload_json TEXT NOT NULL,
                source TEXT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE notifications (
                uuid TEXT PRIMARY KEY,
                type TEXT NOT NULL,
                subtype TEXT,
                signed_date BIGINT NOT NULL,
                environment TEXT,
                bundle_id TEXT,
                signed_payload TEXT NOT NULL,
                transaction_id TEXT,
                original_transaction_id TEXT,
                app_transaction_json TEXT,
                received_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX notifications_by_original ON notifications (original_transaction_id, signed_date)",
            """
            CREATE TABLE claims (
                transaction_id TEXT PRIMARY KEY,
                account TEXT NOT NULL,
                claimed_at BIGINT NOT NULL
            )
            """,
        ]),
        // Apple added priceIncreaseStatus to renewal infos after version 1 shipped.
        Migration(version: 2, statements: [
            "ALTER TABLE renewal_infos ADD COLUMN price_increase_status INTEGER"
        ]),
        // Versions of one row are ordered by values of the row itself (see `LedgerStatements.Version`): where its
        // facts came from and which notification delivered them; and StoreKit 2's `isUpgraded`.
        Migration(version: 3, statements: [
            "ALTER TABLE transactions ADD COLUMN source TEXT",
            "ALTER TABLE transactions ADD COLUMN notification_uuid TEXT",
            "ALTER TABLE transactions ADD COLUMN is_upgraded INTEGER",
            "ALTER TABLE renewal_infos ADD COLUMN notification_uuid TEXT",
            // Until now a row held StoreKit 2 facts exactly when a source other than a receipt had delivered it.
            """
            UPDATE transactions SET source = COALESCE(
                (SELECT max(transaction_sources.source) FROM transaction_sources
                    WHERE transaction_sources.transaction_id = transactions.transaction_id
                        AND transaction_sources.source <> 'receipt'),
                'receipt')
            """,
        ]),
        // The App Store Server API sync (issue 19): how far each app's notification history has been read. IF NOT
        // EXISTS: a database rolled back to an older version by hand may still hold the table.
        Migration(version: 4, statements: [
            """
            CREATE TABLE IF NOT EXISTS server_api_sync (
                bundle_id TEXT NOT NULL,
                environment TEXT NOT NULL,
                synced_until BIGINT,
                last_success_at BIGINT,
                lease_holder TEXT,
                lease_until BIGINT,
                PRIMARY KEY (bundle_id, environment)
            )
            """
        ]),
        // Accounts (issue 24): the backend's users, the `appAccountToken`s they registered, which original
        // transactions each owns, and every move of one from an account to another. `transfer_number` orders the moves
        // of one original transaction that share a millisecond. IF NOT EXISTS as in version 4: a database rolled back
        // to an older version by hand may still hold the tables.
        Migration(
            version: 5,
            statements: [
                "ALTER TABLE transactions ADD COLUMN app_account_token TEXT",
                "CREATE INDEX IF NOT EXISTS transactions_by_app_account_token ON transactions (app_account_token)",
                """
                CREATE TABLE IF NOT EXISTS accounts (
                    account TEXT PRIMARY KEY,
                    first_seen BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE IF NOT EXISTS account_tokens (
                    app_account_token TEXT PRIMARY KEY,
                    account TEXT NOT NULL,
                    registered_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX IF NOT EXISTS account_tokens_by_account ON account_tokens (account)",
                """
                CREATE TABLE IF NOT EXISTS account_links (
                    original_transaction_id TEXT PRIMARY KEY,
                    account TEXT NOT NULL,
                    source TEXT NOT NULL,
                    linked_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX IF NOT EXISTS account_links_by_account ON account_links (account)",
                """
                CREATE TABLE IF NOT EXISTS account_transfers (
                    original_transaction_id TEXT NOT NULL,
                    from_account TEXT NOT NULL,
                    to_account TEXT NOT NULL,
                    transferred_at BIGINT NOT NULL,
                    source TEXT NOT NULL,
                    transfer_number BIGINT NOT NULL
                )
                """,
                "CREATE INDEX IF NOT EXISTS account_transfers_by_from ON account_transfers (from_account)",
                "CREATE INDEX IF NOT EXISTS account_transfers_by_to ON account_transfers (to_account)",
            ],
            afterStatements: backfillAppAccountTokens
        ),
        // The outbox (issue 25): events written with the facts that cause them, a sequence per stream (an account, or
        // `otx:` + the original transaction while nobody owns it), and one delivery per event and webhook. The partial
        // indexes hold only what is not delivered: a claim and a backlog read never walk the delivered history.
        Migration(version: 6, statements: [
            """
            CREATE TABLE IF NOT EXISTS events (
                event_id TEXT PRIMARY KEY,
                dedupe_key TEXT NOT NULL UNIQUE,
                type TEXT NOT NULL,
                account TEXT,
                original_transaction_id TEXT NOT NULL,
                stream TEXT NOT NULL,
                sequence BIGINT NOT NULL,
                created_at BIGINT NOT NULL,
                body TEXT NOT NULL
            )
            """,
            "CREATE INDEX IF NOT EXISTS events_by_account ON events (account, created_at)",
            "CREATE INDEX IF NOT EXISTS events_by_original ON events (original_transaction_id)",
            "CREATE INDEX IF NOT EXISTS events_by_created ON events (created_at)",
            """
            CREATE TABLE IF NOT EXISTS event_streams (
                stream TEXT PRIMARY KEY,
                last_sequence BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE IF NOT EXISTS event_deliveries (
                event_id TEXT NOT NULL,
                webhook TEXT NOT NULL,
                stream TEXT NOT NULL,
                sequence BIGINT NOT NULL,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL,
                next_attempt_at BIGINT NOT NULL,
                lease_holder TEXT,
                lease_until BIGINT,
                last_status INTEGER,
                last_error TEXT,
                delivered_at BIGINT,
                PRIMARY KEY (event_id, webhook)
            )
            """,
            """
            CREATE INDEX IF NOT EXISTS event_deliveries_due ON event_deliveries (webhook, next_attempt_at, sequence)
            WHERE state = 'pending'
            """,
            """
            CREATE INDEX IF NOT EXISTS event_deliveries_by_stream ON event_deliveries (webhook, stream, sequence)
            WHERE state = 'pending'
            """,
            "CREATE INDEX IF NOT EXISTS event_deliveries_failed ON event_deliveries (webhook) WHERE state = 'failed'",
        ]),
        // Apple's server duties (issue 26). A refund question (`CONSUMPTION_REQUEST`) is stored with the notification
        // that asks it, and the backend's answer per transaction; calls Apple must get even if receiptd restarts
        // (finishing a claimed transaction, setting its app account token) wait in `apple_calls` until they are done;
        // every renewal extension asked of Apple is kept with Apple's answer.
        Migration(version: 7, statements: [
            """
            CREATE TABLE IF NOT EXISTS consumption_requests (
                notification_uuid TEXT PRIMARY KEY,
                transaction_id TEXT NOT NULL,
                original_transaction_id TEXT,
                bundle_id TEXT,
                environment TEXT,
                reason TEXT,
                requested_at BIGINT NOT NULL,
                expires_at BIGINT NOT NULL,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL,
                next_attempt_at BIGINT,
                lease_holder TEXT,
                lease_until BIGINT,
                sent_body TEXT,
                apple_status INTEGER,
                apple_error_code BIGINT,
                last_error TEXT,
                sent_at BIGINT,
                created_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX IF NOT EXISTS consumption_requests_by_transaction ON consumption_requests (transaction_id, requested_at)",
            "CREATE INDEX IF NOT EXISTS consumption_requests_open ON consumption_requests (expires_at) WHERE state = 'open'",
            """
            CREATE TABLE IF NOT EXISTS consumption_answers (
                transaction_id TEXT PRIMARY KEY,
                body TEXT NOT NULL,
                updated_at BIGINT NOT NULL
            )
            """,
            """
            CREATE TABLE IF NOT EXISTS apple_calls (
                call_id TEXT PRIMARY KEY,
                kind TEXT NOT NULL,
                bundle_id TEXT NOT NULL,
                environment TEXT NOT NULL,
                target_id TEXT NOT NULL,
                argument TEXT,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL,
                next_attempt_at BIGINT NOT NULL,
                lease_holder TEXT,
                lease_until BIGINT,
                last_status INTEGER,
                apple_error_code BIGINT,
                last_error TEXT,
                created_at BIGINT NOT NULL,
                done_at BIGINT
            )
            """,
            "CREATE INDEX IF NOT EXISTS apple_calls_due ON apple_calls (next_attempt_at) WHERE state = 'pending'",
            "CREATE INDEX IF NOT EXISTS apple_calls_by_target ON apple_calls (target_id, kind)",
            """
            CREATE TABLE IF NOT EXISTS renewal_extensions (
                request_identifier TEXT PRIMARY KEY,
                original_transaction_id TEXT,
                product_id TEXT,
                bundle_id TEXT NOT NULL,
                environment TEXT NOT NULL,
                days INTEGER NOT NULL,
                reason_code INTEGER NOT NULL,
                storefronts TEXT,
                requested_by TEXT,
                requested_at BIGINT NOT NULL,
                outcome TEXT NOT NULL,
                effective_date BIGINT,
                web_order_line_item_id TEXT,
                apple_status INTEGER,
                apple_error_code BIGINT,
                message TEXT,
                completed_at BIGINT,
                succeeded_count BIGINT,
                failed_count BIGINT
            )
            """,
            "CREATE INDEX IF NOT EXISTS renewal_extensions_by_original ON renewal_extensions (original_transaction_id, requested_at)",
            // Introductory offer eligibility finds a product's subscription group from any of its transactions.
            "CREATE INDEX IF NOT EXISTS transactions_by_product ON transactions (product_id)",
        ]),
        // A notification's signed payload is base64 (signatures, three certificate chains): PostgreSQL's default
        // TOAST compression, pglz, tried every one and gave up (12.8 KB forged payloads stored at 12,842 bytes),
        // the costliest part of the notification's INSERT. Stored out of line uncompressed from now on; rows
        // already stored stay as they are. SQLite never compresses.
        Migration(
            version: 8, statements: [],
            afterStatements: { connection throws(LedgerError) in
                guard connection is PostgresConnection else { return }
                try connection.execute("ALTER TABLE notifications ALTER COLUMN signed_payload SET STORAGE EXTERNAL")
            }),
        // A pending delivery behind an earlier pending one of its stream now waits for its turn: `next_attempt_at` is
        // the largest BIGINT (`LedgerStatements.waitingForTurn`) until the earlier one's finish makes it due, where it
        // held a time (due now, or the lease end of the head in flight) and every claim walked it. The backlog stored
        // before is converted, so that claims find its heads by the due index too. That index leaves the waiting ones
        // out: it is only the claim's, which names the bound, so PostgreSQL no longer finds the one delivery a finish
        // or a head test asks for by walking it (a plan cached while the outbox was empty, where every index of the
        // table looked alike: 3 to 17 ms a statement at 4,000 pending).
        Migration(version: 9, statements: [
            """
            UPDATE event_deliveries SET next_attempt_at = 9223372036854775807
            WHERE state = 'pending' AND sequence > (
                SELECT min(earlier.sequence) FROM event_deliveries earlier
                WHERE earlier.webhook = event_deliveries.webhook AND earlier.stream = event_deliveries.stream
                    AND earlier.state = 'pending')
            """,
            "DROP INDEX IF EXISTS event_deliveries_due",
            """
            CREATE INDEX event_deliveries_due ON event_deliveries (webhook, next_attempt_at, sequence)
            WHERE state = 'pending' AND next_attempt_at < 9223372036854775807
            """,
            // The waiting ones alone: what the dispatcher's sweep for deliveries waiting behind nothing reads every few
            // seconds, rather than every delivery kept for the retention days.
            """
            CREATE INDEX IF NOT EXISTS event_deliveries_waiting ON event_deliveries (webhook, stream, sequence)
            WHERE state = 'pending' AND next_attempt_at = 9223372036854775807
            """,
        ]),
        // An event's body (4 KB of JSON for a renewal) is compressed when stored: with pglz, PostgreSQL's default, to
        // the same size as with lz4 (1 KB) at about three times the CPU (2,000 rows: 48 to 66 µs a row against 16 to
        // 21), the costliest part of the event's INSERT. lz4 only where the server was built with it (its setting
        // then lists it); rows already stored stay as they are. SQLite never compresses.
        Migration(
            version: 10, statements: [],
            afterStatements: { connection throws(LedgerError) in
                guard connection is PostgresConnection else { return }
                let hasLZ4 = try connection.query(
                    "SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)", []
                )
                guard !hasLZ4.isEmpty else { return }
                try connection.execute("ALTER TABLE events ALTER COLUMN body SET COMPRESSION lz4")
            }),
    ]

    /// Every StoreKit 2 payload stored before version 5 kept its `appAccountToken`; the new column gets it, so that
    /// registering a token links purchases the ledger held before the upgrade. Receipts' payloads never have one. Read
    /// a page at a time, by transaction id, so that a large ledger's payloads are never all in memory at once.
    static func backfillAppAccountTokens(_ connection: any SQLConnection) throws(LedgerError) {
        let select = "SELECT transaction_id, payload_json FROM transactions WHERE payload_json LIKE '%appAccountToken%'"
        let page = " ORDER BY transaction_id LIMIT \(LedgerStatements.idsPerStatement)"
        var rows = try connection.query(select + page, [])
        while let last = rows.last {
            for row in rows {
                let payload = try? JSONValue(parsing: Array(try row.requiredString(1).utf8))
                guard case .string(let token)? = payload?["appAccountToken"] else { continue }
                try connection.execute(
                    "UPDATE transactions SET app_account_token = $2 WHERE transaction_id = $1",
                    [.text(try row.requiredString(0)), .text(token.lowercased())]
                )
            }
            rows = try connection.query(select + " AND transaction_id > $1" + page, [.text(try last.requiredString(0))])
        }
    }

    static var latestVersion: Int { migrations.last?.version ?? 0 }

    /// The applied version; 0 for a database the ledger never touched. Creates the version table if missing, so it
    /// must run inside the migrating transaction.
    static func appliedVersion(_ connection: any SQLConnection) throws(LedgerError) -> Int {
        try connection.execute("CREATE TABLE IF NOT EXISTS ledger_schema (version BIGINT NOT NULL)")
        let rows = try connection.query("SELECT version FROM ledger_schema", [])
        guard let row = rows.first else { return 0 }
        guard rows.count == 1, let version = row.int(0) else {
            throw LedgerError(.queryFailed, "ledger_schema must hold exactly one version row")
        }
        return version
    }

    /// Brings the schema forward to `target`; call inside one transaction so a failed step changes nothing.
    static func migrate(_ connection: any SQLConnection, to target: Int = latestVersion) throws(LedgerError) {
        let applied = try appliedVersion(connection)
        guard applied <= latestVersion else {
            throw LedgerError(
                .schemaTooNew,
                "the database has ledger schema version \(applied), newer than version \(latestVersion) of this "
                    + "receiptd; upgrade receiptd or restore a backup"
            )
        }
        guard applied < target else { return }
        for migration in migrations where migration.version > applied && migration.version <= target {
            for statement in migration.statements { try connection.execute(statement) }
            try migration.afterStatements?(connection)
        }
        if applied == 0 {
            try connection.execute("INSERT INTO ledger_schema (version) VALUES ($1)", [.integer(Int64(target))])
        } else {
            try connection.execute("UPDATE ledger_schema SET version = $1", [.integer(Int64(target))])
        }
    }
}
