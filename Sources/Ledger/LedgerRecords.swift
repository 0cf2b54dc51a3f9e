/// Where the shared ledger logic runs its statements: each call is one database transaction.
protocol LedgerDatabase: Sendable {
    /// Runs `body` in a write transaction and returns once it is durably committed.
    func write<Result: Sendable>(
        _ body: @escaping @Sendable (any SQLConnection) throws(LedgerError) -> Result
    ) throws(LedgerError) -> Result

    /// Runs `body` in a read transaction that sees one consistent snapshot.
    func read<Result>(_ body: (any SQLConnection) throws(LedgerError) -> Result) throws(LedgerError) -> Result
}

/// The ledger's reads and writes, written once in SQL both databases accept.
///
/// Order is kept by the statements themselves: every upsert replaces a row only with a greater
/// ``LedgerStatements/Version`` (StoreKit 2 over receipts, then signed date, then deterministic tie-breaks), so any
/// interleaving of deliveries ends in the same rows.
struct LedgerRecords<Database: LedgerDatabase>: Sendable {
    let database: Database
    let clock: LedgerClock
    let linkRules: AccountLinkRules
    let outbox: OutboxRules
    /// What a granted claim owes Apple (see AppleCalls.swift).
    var appleCallRules: AppleCallRules = .none

    func record(_ notification: NotificationFacts) throws(LedgerError) -> NotificationWrite {
        let receivedAt = clock()
        let outbox = outbox
        let original = notification.transaction?.originalTransactionID ?? notification.renewal?.originalTransactionID
        return try database.write { connection throws(LedgerError) in
            try LedgerStatements.lockAppAccountTokensShared(of: notification.transaction.map { [$0] } ?? [], connection)
            let along = LedgerStatements.factsSentAlong(notification, receivedAt: receivedAt, connection)
            let (before, answers) = try LedgerStatements.outboxBefore(
                original.map { [$0] } ?? [], outbox, connection, followingWrites: true,
                then: [LedgerStatements.insertStatement(notification, receivedAt: receivedAt)] + along
            )
            let (write, tokenLookup) = try LedgerStatements.insert(
                notification, receivedAt: receivedAt, noting: before, inserted: answers.first,
                factsAnswers: along.isEmpty ? nil : Array(answers.dropFirst()), connection
            )
            if let tokenLookup {
                try LedgerStatements.linkByAppAccountToken([tokenLookup], at: receivedAt, connection)
            }
            if case .stored = write {
                try LedgerStatements.recordConsumptionRequest(notification, at: receivedAt, connection)
                let summary = NotificationSummary(
                    uuid: notification.uuid, type: notification.type, subtype: notification.subtype,
                    signedDate: notification.signedDate
                )
                try LedgerStatements.recordEvents(
                    before, fallback: .notification(summary), at: receivedAt, outbox, connection
                )
            }
            return write
        }
    }

    func record(transactions: [TransactionFacts], source: TransactionSource) throws(LedgerError) {
        guard !transactions.isEmpty else { return }
        let now = clock()
        // One lock order for every writer, so concurrent PostgreSQL batches cannot deadlock.
        let sorted = transactions.sorted { $0.transactionID < $1.transactionID }
        let outbox = outbox
        try database.write { connection throws(LedgerError) in
            try LedgerStatements.lockAppAccountTokensShared(of: sorted, connection)
            let before = try LedgerStatements.outboxBefore(
                sorted.map(\.originalTransactionID), outbox, connection, followingWrites: true
            )
            var tokenLookups: [AppAccountTokenLookup] = []
            for transaction in sorted {
                if let lookup = try LedgerStatements.upsert(
                    transaction, source: source, now: now, noting: before, connection
                ) {
                    tokenLookups.append(lookup)
                }
            }
            try LedgerStatements.linkByAppAccountToken(tokenLookups, at: now, connection)
            try LedgerStatements.recordEvents(before, fallback: .facts(source), at: now, outbox, connection)
        }
    }

    func record(renewal: RenewalFacts, source: TransactionSource) throws(LedgerError) {
        let now = clock()
        let outbox = outbox
        try database.write { connection throws(LedgerError) in
            let before = try LedgerStatements.outboxBefore(
                [renewal.originalTransactionID], outbox, connection, followingWrites: true
            )
            try LedgerStatements.upsert(renewal, source: source, now: now, noting: before, connection)
            try LedgerStatements.recordEvents(before, fallback: .facts(source), at: now, outbox, connection)
        }
    }

    /// A granted claim links the claimed purchase to the account as an explicit link would; the grant stands whatever
    /// the link's outcome. The calls it owes Apple are written in the same transaction, so none is lost to a crash.
    func claim(transactionID: String, account: String, at time: Int64) throws(LedgerError) -> ClaimOutcome {
        let rules = linkRules
        let outbox = outbox
        let appleCallRules = appleCallRules
        return try database.write { connection throws(LedgerError) in
            let outcome = try LedgerStatements.claim(
                transactionID: transactionID, account: account, at: time, connection
            )
            guard case .granted = outcome,
                let original = try connection.query(
                    "SELECT original_transaction_id FROM transactions WHERE transaction_id = $1", [.text(transactionID)]
                ).first?.string(0)
            else { return outcome }
            let before = try LedgerStatements.outboxBefore([original], outbox, connection)
            var changed = ChangedAccounts()
            let link = try LedgerStatements.link(
                original, to: account, source: .claim, at: time, rules: rules, &changed, connection
            )
            try LedgerStatements.recordClaimDuties(
                transactionID: transactionID, original: original, account: account, link: link, rules: appleCallRules,
                at: time, &changed, connection)
            try changed.touch(at: time, connection)
            try LedgerStatements.recordEvents(
                before, causes: try LedgerStatements.linkCauses([original: link], source: .claim, before, connection),
                fallback: .link(.claim), at: time, outbox, connection
            )
            return outcome
        }
    }

    func subscription(originalTransactionID: String) throws(LedgerError) -> SubscriptionFacts? {
        try database.read { connection throws(LedgerError) in
            try LedgerStatements.subscriptions(originalTransactionIDs: [originalTransactionID], connection)[
                originalTransactionID]
        }
    }

    func transaction(id: String) throws(LedgerError) -> TransactionRecord? {
        try database.read { connection throws(LedgerError) in
            let rows = try connection.query(
                "SELECT \(LedgerStatements.transactionColumns), first_seen FROM transactions WHERE transaction_id = $1",
                [.text(id)]
            )
            guard let row = rows.first else { return nil }
            var sources: [TransactionSource: Int64] = [:]
            let sourceRows = try connection.query(
                "SELECT source, first_seen FROM transaction_sources WHERE transaction_id = $1", [.text(id)]
            )
            for sourceRow in sourceRows {
                guard let source = TransactionSource(rawValue: try sourceRow.requiredString(0)) else { continue }
                sources[source] = try sourceRow.requiredInt64(1)
            }
            return TransactionRecord(
                facts: try LedgerStatements.transactionFacts(row),
                firstSeen: try row.requiredInt64(LedgerStatements.transactionColumnCount),
                sources: sources,
                claim: try LedgerStatements.existingClaim(transactionID: id, connection)
            )
        }
    }

    func transactions(originalTransactionIDs: [String]) throws(LedgerError) -> [TransactionFacts] {
        try database.read { connection throws(LedgerError) in
            try LedgerStatements.transactions(originalTransactionIDs: originalTransactionIDs, connection).map(\.facts)
        }
    }

    func renewalInfos(originalTransactionIDs: [String]) throws(LedgerError) -> [RenewalFacts] {
        try database.read { connection throws(LedgerError) in
            try LedgerStatements.renewals(originalTransactionIDs: originalTransactionIDs, connection).map(\.facts)
        }
    }

    func notification(uuid: String) throws(LedgerError) -> StoredNotification? {
        try database.read { connection throws(LedgerError) in
            let rows = try connection.query(
                """
                SELECT uuid, type, subtype, signed_date, environment, bundle_id, signed_payload, transaction_id,
                    original_transaction_id, app_transaction_json, received_at
                FROM notifications WHERE uuid = $1
                """,
                [.text(uuid)]
            )
            guard let row = rows.first else { return nil }
            return StoredNotification(
                uuid: try row.requiredString(0),
                type: try row.requiredString(1),
                subtype: row.string(2),
                signedDate: try row.requiredInt64(3),
                environment: row.string(4),
                bundleID: row.string(5),
                signedPayload: try row.requiredString(6),
                transactionID: row.string(7),
                originalTransactionID: row.string(8),
                appTransactionJSON: row.string(9),
                receivedAt: try row.requiredInt64(10)
            )
        }
    }

    func ping() throws(LedgerError) {
        try database.read { connection throws(LedgerError) in try connection.execute("SELECT 1") }
    }

    /// Rewrites the schema version as it is: on PostgreSQL a new row version and a flushed commit record (MVCC writes
    /// even an unchanged row), so a full disk, a read-only server or a held lock fails it as it fails real writes.
    /// SQLite skips such an update; its ledger beats a header field instead.
    func checkWritable() throws(LedgerError) {
        try database.write { connection throws(LedgerError) in
            try connection.execute("UPDATE ledger_schema SET version = version")
        }
    }

    func schemaVersion() throws(LedgerError) -> Int {
        try database.read { connection throws(LedgerError) in
            guard let version = try connection.query("SELECT version FROM ledger_schema", []).first?.int(0) else {
                throw LedgerError(.queryFailed, "ledger_schema holds no version")
            }
            return version
        }
    }

    func counts() throws(LedgerError) -> LedgerCounts {
        try database.read { connection throws(LedgerError) in try LedgerStatements.counts(connection) }
    }
}

/// The statements behind ``LedgerRecords``; each runs inside the caller's transaction.
enum LedgerStatements {
    /// Also returns what storing its transaction found of the transaction's `appAccountToken`. Notes the rows it
    /// stores in `noting`.
    ///
    /// `inserted`: the answer of ``insertStatement(_:receivedAt:)``, when the caller sent it along with its reads;
    /// `factsAnswers`: those of ``factsSentAlong(_:receivedAt:_:)``, when it sent them right behind it.
    static func insert(
        _ notification: NotificationFacts, receivedAt: Int64, noting before: OutboxBefore? = nil,
        inserted answer: [SQLRow]? = nil, factsAnswers: [[SQLRow]]? = nil, _ connection: any SQLConnection
    ) throws(LedgerError) -> (write: NotificationWrite, tokenLookup: AppAccountTokenLookup?) {
        let originalID = notification.transaction?.originalTransactionID ?? notification.renewal?.originalTransactionID
        let inserted: [SQLRow]
        if let answer {
            inserted = answer
        } else {
            let statement = insertStatement(notification, receivedAt: receivedAt)
            inserted = try connection.query(statement.sql, statement.parameters)
        }
        // A retried delivery must not touch anything, not even first_seen of its transaction's sources.
        guard !inserted.isEmpty else {
            if factsAnswers != nil { try connection.execute("ROLLBACK TO SAVEPOINT \(factsSavepoint)") }
            let stored = try connection.query(
                "SELECT signed_payload FROM notifications WHERE uuid = $1", [.text(notification.uuid)]
            )
            guard let storedPayload = stored.first?.string(0) else {
                throw LedgerError(.queryFailed, "a notification uuid conflicted but cannot be read back")
            }
            let write: NotificationWrite =
                signedClaims(storedPayload) == signedClaims(notification.signedPayload) ? .duplicate : .conflict
            return (write, nil)
        }
        let uuid = notification.uuid
        if let originalID {
            let summary = NotificationSummary(
                uuid: uuid, type: notification.type, subtype: notification.subtype, signedDate: notification.signedDate
            )
            before?.stored(summary, original: originalID, receivedAt: receivedAt)
        }
        // Past the savepoint's own answer: the transaction's insert, then the renewal info's insert and read.
        var answers = factsAnswers?.dropFirst()
        var tokenLookup: AppAccountTokenLookup?
        if let transaction = notification.transaction {
            tokenLookup = try upsert(
                transaction, source: .notification, notificationUUID: uuid, now: receivedAt, noting: before,
                inserted: answers?.popFirst(), connection
            )
        }
        if let renewal = notification.renewal {
            try upsert(
                renewal, source: .notification, notificationUUID: uuid, now: receivedAt, noting: before,
                answers: answers.map(Array.init), connection
            )
        }
        return (.stored, tokenLookup)
    }

    /// On PostgreSQL, the notification's transaction and renewal info inserts (and the renewal info's read), to be
    /// sent right behind the notification's own insert, in the round trip of the write's reads: two round trips
    /// fewer. They run before anyone knows whether the notification is new, so they follow a savepoint of their own,
    /// which ``insert(_:receivedAt:noting:inserted:factsAnswers:_:)`` rolls back when it is not. Empty on SQLite
    /// (no round trip to save) and for a notification with neither.
    static func factsSentAlong(
        _ notification: NotificationFacts, receivedAt: Int64, _ connection: any SQLConnection
    ) -> [SQLStatement] {
        guard connection is PostgresConnection, notification.transaction != nil || notification.renewal != nil else {
            return []
        }
        var statements = [SQLStatement("SAVEPOINT \(factsSavepoint)")]
        if let transaction = notification.transaction {
            statements.append(
                transactionInsert(
                    transaction, source: .notification, notificationUUID: notification.uuid, now: receivedAt))
        }
        if let renewal = notification.renewal {
            let (insert, read) = renewalInsertAndRead(
                renewal, source: .notification, notificationUUID: notification.uuid, now: receivedAt, connection)
            statements += [insert, read]
        }
        return statements
    }

    private static let factsSavepoint = "notification_facts"

    /// Stores the notification unless its uuid is stored already; answers its uuid when it stored it.
    static func insertStatement(_ notification: NotificationFacts, receivedAt: Int64) -> SQLStatement {
        SQLStatement(
            """
            INSERT INTO notifications (uuid, type, subtype, signed_date, environment, bundle_id, signed_payload,
                transaction_id, original_transaction_id, app_transaction_json, received_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
            ON CONFLICT (uuid) DO NOTHING
            RETURNING uuid
            """,
            [
                .text(notification.uuid), .text(notification.type), SQLValue(notification.subtype),
                .integer(notification.signedDate), SQLValue(notification.environment),
                SQLValue(notification.bundleID), .text(notification.signedPayload),
                SQLValue(notification.transaction?.transactionID),
                SQLValue(
                    notification.transaction?.originalTransactionID ?? notification.renewal?.originalTransactionID),
                SQLValue(notification.appTransactionJSON), .integer(receivedAt),
            ]
        )
    }

    /// What a compact JWS says, without how it was signed: its payload segment. ES256 signatures differ on every
    /// signing, so the same notification signed again is still the same notification; other text is not.
    /// Found on the UTF-8 bytes: splitting by `Character` cost the writer a millisecond per retried delivery (13 KB).
    static func signedClaims(_ jws: String) -> Substring {
        let dot = UInt8(ascii: ".")
        let bytes = jws.utf8
        guard let first = bytes.firstIndex(of: dot),
            let second = bytes[bytes.index(after: first)...].firstIndex(of: dot),
            !bytes[bytes.index(after: second)...].contains(dot)
        else { return jws[...] }
        return jws[bytes.index(after: first)..<second]
    }

    /// One version of a transaction or a renewal info, as the order between versions of one row sees it.
    ///
    /// The greater version is kept, whatever the order of arrival, so every interleaving of deliveries ends in the
    /// same rows. In order: StoreKit 2 facts over a receipt's entry (a receipt cannot say what StoreKit 2 says:
    /// ownership, offers, upgrades, the revocation reason), then the later signed date; at the same signed date a
    /// revocation over what is not one (a refund is never lost to a renewal signed in the same millisecond); then
    /// a version verified on its own (a JWS or a receipt, which carry no uuid) over one a notification delivered,
    /// and between two notifications the greater `notificationUUID` (the order `last_notification` uses); last the
    /// greater payload text, byte by byte, so that even two versions that differ only in content have one answer.
    struct Version: Comparable {
        var isStoreKit2: Bool
        var signedDate: Int64
        var isRevocation: Bool
        var notificationUUID: String?
        var payloadJSON: String

        static func < (lhs: Version, rhs: Version) -> Bool {
            if lhs.isStoreKit2 != rhs.isStoreKit2 { return rhs.isStoreKit2 }
            if lhs.signedDate != rhs.signedDate { return lhs.signedDate < rhs.signedDate }
            if lhs.isRevocation != rhs.isRevocation { return rhs.isRevocation }
            switch (lhs.notificationUUID, rhs.notificationUUID) {
            case (nil, _?): return false
            case (_?, nil): return true
            case (let left?, let right?) where !left.utf8.elementsEqual(right.utf8):
                return left.utf8.lexicographicallyPrecedes(right.utf8)
            default: break
            }
            return lhs.payloadJSON.utf8.lexicographicallyPrecedes(rhs.payloadJSON.utf8)
        }

        // Bytes, not Swift's canonical equivalence, which `<` does not follow.
        static func == (lhs: Version, rhs: Version) -> Bool { !(lhs < rhs) && !(rhs < lhs) }
    }

    /// Locks the row a statement reads until the transaction ends. PostgreSQL runs writers side by side, and a
    /// decision taken on a row another transaction is changing would be taken on stale facts; SQLite has one
    /// writer, which already serializes every decision.
    static func forUpdate(_ connection: any SQLConnection) -> String {
        connection is PostgresConnection ? " FOR UPDATE" : ""
    }

    /// Inserts a new transaction, or replaces the stored one when `facts` are a greater ``Version``; the decision
    /// is taken on the stored row under its lock, so that concurrent writers (receipts racing StoreKit 2 data
    /// across processes) cannot both act on what the other is about to change.
    ///
    /// A transaction carrying an `appAccountToken` also looks up, in the statement that stores or reads it, the
    /// token's account and the original's owner (see ``AppAccountTokenLookup``): linking by token then costs no
    /// statement of its own when the token is registered. On PostgreSQL the caller took the token's lock first
    /// (``lockAppAccountTokensShared(of:_:)``). Notes the row it stores, and any token lookup, in `noting`.
    ///
    /// `inserted`: the answer of ``transactionInsert(_:source:notificationUUID:now:)``, when the caller sent it
    /// already.
    @discardableResult
    static func upsert(
        _ facts: TransactionFacts, source: TransactionSource, notificationUUID: String? = nil, now: Int64,
        noting before: OutboxBefore? = nil, inserted answer: [SQLRow]? = nil, _ connection: any SQLConnection
    ) throws(LedgerError) -> AppAccountTokenLookup? {
        let token = facts.appAccountToken?.lowercased()
        let insert = transactionInsert(facts, source: source, notificationUUID: notificationUUID, now: now)
        // A concurrent insert of the same id makes PostgreSQL wait on the insert for it to commit; the read below
        // then sees it.
        let inserted: [SQLRow]
        if let answer {
            inserted = answer
        } else {
            inserted = try connection.query(insert.sql, insert.parameters)
        }
        var tokenLookup = token.flatMap { token in
            inserted.first.map { AppAccountTokenLookup(facts.originalTransactionID, token, $0, from: 1) }
        }
        if token != nil { before?.mayLink() }
        if !inserted.isEmpty { before?.stored(facts, at: now, replacing: false) }
        if inserted.isEmpty {
            let rows = try connection.query(
                """
                SELECT source, signed_date, revocation_date, notification_uuid, payload_json
                """ + lookupColumns(token, placeholder: 2, original: 3) + " FROM transactions WHERE transaction_id = $1"
                    + forUpdate(connection),
                [.text(facts.transactionID)] + (token.map { [.text($0), .text(facts.originalTransactionID)] } ?? [])
            )
            guard let row = rows.first else {
                throw LedgerError(.queryFailed, "a transaction conflicted but cannot be read back")
            }
            tokenLookup = token.map { AppAccountTokenLookup(facts.originalTransactionID, $0, row, from: 5) }
            let stored = Version(
                isStoreKit2: row.string(0) != TransactionSource.receipt.rawValue, signedDate: try row.requiredInt64(1),
                isRevocation: row.int64(2) != nil, notificationUUID: row.string(3),
                payloadJSON: try row.requiredString(4)
            )
            let incoming = Version(
                isStoreKit2: source != .receipt, signedDate: facts.signedDate,
                isRevocation: facts.revocationDate != nil, notificationUUID: notificationUUID,
                payloadJSON: facts.payloadJSON
            )
            if stored < incoming {
                // Its answer is not needed: it goes with the next statement, and fails the write as late as that.
                try connection.executeWithNext(
                    """
                    UPDATE transactions SET original_transaction_id = $2, product_id = $3, bundle_id = $4, type = $5,
                        purchase_date = $6, original_purchase_date = $7, expires_date = $8, revocation_date = $9,
                        revocation_reason = $10, in_app_ownership_type = $11, web_order_line_item_id = $12,
                        environment = $13, signed_date = $14, payload_json = $15, source = $16,
                        notification_uuid = $17, is_upgraded = $18, updated_at = $19, app_account_token = $20
                    WHERE transaction_id = $1
                    """,
                    insert.parameters
                )
                before?.stored(facts, at: now, replacing: true)
            }
        }
        try connection.executeWithNext(
            """
            INSERT INTO transaction_sources (transaction_id, source, first_seen) VALUES ($1, $2, $3)
            ON CONFLICT (transaction_id, source) DO NOTHING
            """,
            [.text(facts.transactionID), .text(source.rawValue), .integer(now)]
        )
        return tokenLookup
    }

    /// Stores the transaction unless its id is stored already; answers its id (and the token lookup, when it carries
    /// a token) when it stored it.
    static func transactionInsert(
        _ facts: TransactionFacts, source: TransactionSource, notificationUUID: String?, now: Int64
    ) -> SQLStatement {
        let token = facts.appAccountToken?.lowercased()
        return SQLStatement(
            """
            INSERT INTO transactions (transaction_id, original_transaction_id, product_id, bundle_id, type,
                purchase_date, original_purchase_date, expires_date, revocation_date, revocation_reason,
                in_app_ownership_type, web_order_line_item_id, environment, signed_date, payload_json,
                source, notification_uuid, is_upgraded, first_seen, updated_at, app_account_token)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $19, $20)
            ON CONFLICT (transaction_id) DO NOTHING
            RETURNING transaction_id
            """ + lookupColumns(token, placeholder: 20, original: 2),
            [
                .text(facts.transactionID), .text(facts.originalTransactionID), .text(facts.productID),
                SQLValue(facts.bundleID), SQLValue(facts.type), SQLValue(facts.purchaseDate),
                SQLValue(facts.originalPurchaseDate), SQLValue(facts.expiresDate), SQLValue(facts.revocationDate),
                SQLValue(facts.revocationReason), SQLValue(facts.inAppOwnershipType),
                SQLValue(facts.webOrderLineItemID), SQLValue(facts.environment), .integer(facts.signedDate),
                .text(facts.payloadJSON), .text(source.rawValue), SQLValue(notificationUUID),
                SQLValue(facts.isUpgraded), .integer(now), SQLValue(token),
            ]
        )
    }

    private static func lookupColumns(_ token: String?, placeholder: Int, original: Int) -> String {
        guard token != nil else { return "" }
        return ", " + AppAccountTokenLookup.columns(token: placeholder, original: original)
    }

    /// Inserts a renewal info, or replaces the stored one when `facts` are a greater ``Version``, decided like a
    /// transaction's. Notes the row it stores in `noting`.
    ///
    /// `answers`: those of ``renewalInsertAndRead(_:source:notificationUUID:now:_:)``, when the caller sent both.
    static func upsert(
        _ facts: RenewalFacts, source: TransactionSource, notificationUUID: String? = nil, now: Int64,
        noting before: OutboxBefore? = nil, answers sent: [[SQLRow]]? = nil, _ connection: any SQLConnection
    ) throws(LedgerError) {
        let (insert, read) = renewalInsertAndRead(
            facts, source: source, notificationUUID: notificationUUID, now: now, connection)
        // A subscription has one renewal info, which each of its notifications but the first replaces: on PostgreSQL
        // the stored one is read in the insert's round trip (the read then waits on the insert as it did after it),
        // on SQLite, with no round trip to save, only after a conflict.
        let readsAlong = connection is PostgresConnection
        let answers: [[SQLRow]]
        if let sent {
            answers = sent
        } else {
            answers = try connection.queries(readsAlong ? [insert, read] : [insert])
        }
        guard answers[0].isEmpty else {
            before?.stored(facts, at: now)
            return
        }
        let rows = readsAlong ? answers[1] : try connection.query(read.sql, read.parameters)
        guard let row = rows.first else {
            throw LedgerError(.queryFailed, "a renewal info conflicted but cannot be read back")
        }
        // Only StoreKit 2 carries renewal infos, and they are never revocations.
        let stored = Version(
            isStoreKit2: true, signedDate: try row.requiredInt64(0), isRevocation: false,
            notificationUUID: row.string(1), payloadJSON: try row.requiredString(2)
        )
        let incoming = Version(
            isStoreKit2: true, signedDate: facts.signedDate, isRevocation: false, notificationUUID: notificationUUID,
            payloadJSON: facts.payloadJSON
        )
        guard stored < incoming else { return }
        // Its answer is not needed: it goes with the next statement, and fails the write as late as that.
        try connection.executeWithNext(
            """
            UPDATE renewal_infos SET product_id = $2, auto_renew_product_id = $3, auto_renew_status = $4,
                expiration_intent = $5, is_in_billing_retry_period = $6, grace_period_expires_date = $7,
                price_increase_status = $8, environment = $9, signed_date = $10, payload_json = $11, source = $12,
                updated_at = $13, notification_uuid = $14
            WHERE original_transaction_id = $1
            """,
            insert.parameters
        )
        before?.stored(facts, at: now)
    }

    /// Stores the renewal info unless its subscription has one already (answering its original id when it stored it),
    /// and reads the stored one, locked on PostgreSQL.
    static func renewalInsertAndRead(
        _ facts: RenewalFacts, source: TransactionSource, notificationUUID: String?, now: Int64,
        _ connection: any SQLConnection
    ) -> (insert: SQLStatement, read: SQLStatement) {
        let values: [SQLValue] = [
            .text(facts.originalTransactionID), SQLValue(facts.productID), SQLValue(facts.autoRenewProductID),
            SQLValue(facts.autoRenewStatus), SQLValue(facts.expirationIntent), SQLValue(facts.isInBillingRetryPeriod),
            SQLValue(facts.gracePeriodExpiresDate), SQLValue(facts.priceIncreaseStatus), SQLValue(facts.environment),
            .integer(facts.signedDate), .text(facts.payloadJSON), .text(source.rawValue), .integer(now),
            SQLValue(notificationUUID),
        ]
        let insert = SQLStatement(
            """
            INSERT INTO renewal_infos (original_transaction_id, product_id, auto_renew_product_id,
                auto_renew_status, expiration_intent, is_in_billing_retry_period, grace_period_expires_date,
                price_increase_status, environment, signed_date, payload_json, source, updated_at, notification_uuid)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
            ON CONFLICT (original_transaction_id) DO NOTHING
            RETURNING original_transaction_id
            """,
            values
        )
        let read = SQLStatement(
            """
            SELECT signed_date, notification_uuid, payload_json FROM renewal_infos WHERE original_transaction_id = $1
            """ + forUpdate(connection),
            [.text(facts.originalTransactionID)]
        )
        return (insert, read)
    }

    /// Insert-or-nothing on the primary key, then read back: of any number of concurrent claims, exactly one inserts.
    static func claim(
        transactionID: String, account: String, at time: Int64, _ connection: any SQLConnection
    ) throws(LedgerError) -> ClaimOutcome {
        let known = try connection.query(
            "SELECT revocation_date, revocation_reason FROM transactions WHERE transaction_id = $1",
            [.text(transactionID)]
        )
        guard let transaction = known.first else { return .unknownTransaction }
        // What Apple took back is granted to nobody; a claim made before stays, so that support can see who had it.
        if let revoked = transaction.int64(0) {
            let claim = try existingClaim(transactionID: transactionID, connection)
            return .revoked(date: revoked, reason: transaction.int(1), claim: claim)
        }
        let inserted = try connection.query(
            """
            INSERT INTO claims (transaction_id, account, claimed_at) VALUES ($1, $2, $3)
            ON CONFLICT (transaction_id) DO NOTHING
            RETURNING claimed_at
            """,
            [.text(transactionID), .text(account), .integer(time)]
        )
        if !inserted.isEmpty { return .granted(first: true, claimedAt: time) }
        guard let existing = try existingClaim(transactionID: transactionID, connection) else {
            throw LedgerError(.queryFailed, "a claim conflicted but cannot be read back")
        }
        if existing.account == account { return .granted(first: false, claimedAt: existing.claimedAt) }
        return .alreadyClaimed(existing)
    }

    /// How many rows each table holds: for the live store and for a ledger inspected without opening it as one.
    static func counts(_ connection: any SQLConnection) throws(LedgerError) -> LedgerCounts {
        func count(_ sql: String) throws(LedgerError) -> Int64 {
            try connection.query(sql, []).first?.requiredInt64(0) ?? 0
        }
        return LedgerCounts(
            transactions: try count("SELECT count(*) FROM transactions"),
            transactionSources: try count("SELECT count(*) FROM transaction_sources"),
            renewalInfos: try count("SELECT count(*) FROM renewal_infos"),
            notifications: try count("SELECT count(*) FROM notifications"),
            claims: try count("SELECT count(*) FROM claims"),
            accounts: try count("SELECT count(*) FROM accounts"),
            accountLinks: try count("SELECT count(*) FROM account_links")
        )
    }

    static func existingClaim(transactionID: String, _ connection: any SQLConnection) throws(LedgerError) -> Claim? {
        let rows = try connection.query(
            "SELECT account, claimed_at FROM claims WHERE transaction_id = $1", [.text(transactionID)]
        )
        guard let row = rows.first else { return nil }
        return Claim(account: try row.requiredString(0), claimedAt: try row.requiredInt64(1))
    }

    static let transactionColumns = """
        transaction_id, original_transaction_id, product_id, bundle_id, type, purchase_date, original_purchase_date, \
        expires_date, revocation_date, revocation_reason, in_app_ownership_type, web_order_line_item_id, \
        environment, signed_date, payload_json, updated_at, is_upgraded, app_account_token
        """
    static let transactionColumnCount = 18

    static func transactionFacts(_ row: SQLRow) throws(LedgerError) -> TransactionFacts {
        TransactionFacts(
            transactionID: try row.requiredString(0),
            originalTransactionID: try row.requiredString(1),
            productID: try row.requiredString(2),
            bundleID: row.string(3),
            type: row.string(4),
            purchaseDate: row.int64(5),
            originalPurchaseDate: row.int64(6),
            expiresDate: row.int64(7),
            revocationDate: row.int64(8),
            revocationReason: row.int(9),
            inAppOwnershipType: row.string(10),
            webOrderLineItemID: row.string(11),
            environment: row.string(12),
            isUpgraded: row.bool(16),
            appAccountToken: row.string(17),
            signedDate: try row.requiredInt64(13),
            payloadJSON: try row.requiredString(14)
        )
    }

    /// Keeps IN lists well under SQLite's bound-parameter limit.
    static let idsPerStatement = 500

    static func transactions(
        originalTransactionIDs ids: [String], _ connection: any SQLConnection
    ) throws(LedgerError) -> [(facts: TransactionFacts, updatedAt: Int64)] {
        try transactions(connection.queries(transactionStatements(ids)).flatMap { $0 })
    }

    static func transactionStatements(_ ids: [String]) -> [SQLStatement] {
        chunks(Array(Set(ids)).sorted()).map { chunk in
            SQLStatement(
                """
                SELECT \(transactionColumns) FROM transactions
                WHERE original_transaction_id IN (\(placeholders(chunk.count)))
                """,
                chunk.map(SQLValue.text)
            )
        }
    }

    static func transactions(_ rows: [SQLRow]) throws(LedgerError) -> [(facts: TransactionFacts, updatedAt: Int64)] {
        var found: [(facts: TransactionFacts, updatedAt: Int64)] = []
        found.reserveCapacity(rows.count)
        for row in rows { found.append((try transactionFacts(row), try row.requiredInt64(15))) }
        // Sorted here, not in SQL: the two databases order NULLs and text differently.
        return found.sorted { isNewer($0.facts, than: $1.facts) }
    }

    /// The order of a subscription's transactions: newest first by purchase date, then expires date, then id.
    static func isNewer(_ lhs: TransactionFacts, than rhs: TransactionFacts) -> Bool {
        (lhs.purchaseDate ?? .min, lhs.expiresDate ?? .min, lhs.transactionID)
            > (rhs.purchaseDate ?? .min, rhs.expiresDate ?? .min, rhs.transactionID)
    }

    static func renewals(
        originalTransactionIDs ids: [String], _ connection: any SQLConnection
    ) throws(LedgerError) -> [(facts: RenewalFacts, updatedAt: Int64)] {
        try renewals(connection.queries(renewalStatements(ids)).flatMap { $0 })
    }

    static func renewalStatements(_ ids: [String]) -> [SQLStatement] {
        chunks(Array(Set(ids)).sorted()).map { chunk in
            SQLStatement(
                """
                SELECT original_transaction_id, product_id, auto_renew_product_id, auto_renew_status, expiration_intent,
                    is_in_billing_retry_period, grace_period_expires_date, price_increase_status, environment,
                    signed_date, payload_json, updated_at
                FROM renewal_infos WHERE original_transaction_id IN (\(placeholders(chunk.count)))
                """,
                chunk.map(SQLValue.text)
            )
        }
    }

    static func renewals(_ rows: [SQLRow]) throws(LedgerError) -> [(facts: RenewalFacts, updatedAt: Int64)] {
        var found: [(facts: RenewalFacts, updatedAt: Int64)] = []
        for row in rows {
            let facts = RenewalFacts(
                originalTransactionID: try row.requiredString(0),
                productID: row.string(1),
                autoRenewProductID: row.string(2),
                autoRenewStatus: row.bool(3),
                expirationIntent: row.int(4),
                isInBillingRetryPeriod: row.bool(5),
                gracePeriodExpiresDate: row.int64(6),
                priceIncreaseStatus: row.int(7),
                environment: row.string(8),
                signedDate: try row.requiredInt64(9),
                payloadJSON: try row.requiredString(10)
            )
            found.append((facts, try row.requiredInt64(11)))
        }
        return found.sorted { $0.facts.originalTransactionID < $1.facts.originalTransactionID }
    }

    /// The stored notifications about each of these original ids, oldest first by signed date; equal signed dates by
    /// uuid, byte by byte, compared in Swift so that both databases agree. With each, when it was received.
    static func notifications(
        originalTransactionIDs ids: [String], _ connection: any SQLConnection
    ) throws(LedgerError) -> [String: [(summary: NotificationSummary, receivedAt: Int64)]] {
        try notifications(connection.queries(notificationStatements(ids)).flatMap { $0 })
    }

    static func notificationStatements(_ ids: [String]) -> [SQLStatement] {
        chunks(Array(Set(ids)).sorted()).map { chunk in
            SQLStatement(
                """
                SELECT original_transaction_id, uuid, type, subtype, signed_date, received_at FROM notifications
                WHERE original_transaction_id IN (\(placeholders(chunk.count)))
                """,
                chunk.map(SQLValue.text)
            )
        }
    }

    static func notifications(
        _ rows: [SQLRow]
    ) throws(LedgerError) -> [String: [(summary: NotificationSummary, receivedAt: Int64)]] {
        var found: [String: [(summary: NotificationSummary, receivedAt: Int64)]] = [:]
        for row in rows {
            let summary = NotificationSummary(
                uuid: try row.requiredString(1),
                type: try row.requiredString(2),
                subtype: row.string(3),
                signedDate: try row.requiredInt64(4)
            )
            found[try row.requiredString(0), default: []].append((summary, try row.requiredInt64(5)))
        }
        return found.mapValues { notifications in notifications.sorted { isEarlier($0.summary, than: $1.summary) } }
    }

    /// The order of a subscription's notifications: oldest first by signed date, then uuid byte by byte.
    static func isEarlier(_ lhs: NotificationSummary, than rhs: NotificationSummary) -> Bool {
        lhs.signedDate != rhs.signedDate
            ? lhs.signedDate < rhs.signedDate : lhs.uuid.utf8.lexicographicallyPrecedes(rhs.uuid.utf8)
    }

    /// All facts about each of these original ids that the ledger holds anything of, read with one statement per
    /// table whatever the number of ids.
    static func subscriptions(
        originalTransactionIDs ids: [String], _ connection: any SQLConnection
    ) throws(LedgerError) -> [String: SubscriptionFacts] {
        try SubscriptionRows.read(ids, connection).facts(ids)
    }

    static func chunks(_ ids: [String]) -> [ArraySlice<String>] {
        stride(from: 0, to: ids.count, by: idsPerStatement).map { ids[$0..<min($0 + idsPerStatement, ids.count)] }
    }

    static func placeholders(_ count: Int) -> String {
        (1...count).map { "$\($0)" }.joined(separator: ", ")
    }
}

/// The ledger's clock in Unix milliseconds; injected so tests control first-seen and updated-at times.
public typealias LedgerClock = @Sendable () -> Int64
