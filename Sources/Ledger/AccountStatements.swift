/// The accounts half of ``LedgerRecords``: each call is one database transaction.
extension LedgerRecords {
    func registerAppAccountToken(_ token: String, account: String, at time: Int64) throws(LedgerError)
        -> AppAccountTokenOutcome
    {
        let token = token.lowercased()
        let outbox = outbox
        return try database.write { connection throws(LedgerError) in
            try LedgerStatements.lockAppAccountToken(token, connection)
            let inserted = try connection.query(
                """
                INSERT INTO account_tokens (app_account_token, account, registered_at) VALUES ($1, $2, $3)
                ON CONFLICT (app_account_token) DO NOTHING
                RETURNING account
                """,
                [.text(token), .text(account), .integer(time)]
            )
            var changed = ChangedAccounts()
            if inserted.isEmpty {
                let owner = try connection.query(
                    "SELECT account FROM account_tokens WHERE app_account_token = $1", [.text(token)]
                ).first?.string(0)
                guard owner == account else { return .ownedByAnotherAccount }
            } else {
                changed.insert(account)
            }
            // What the ledger stored before the token was registered; later stores link by themselves.
            let originals = try connection.query(
                "SELECT DISTINCT original_transaction_id FROM transactions WHERE app_account_token = $1", [.text(token)]
            ).compactMap { $0.string(0) }
            let before = try LedgerStatements.outboxBefore(originals, outbox, connection)
            var links: [String: AccountLinkOutcome] = [:]
            for original in originals.sorted() {
                links[original] = try LedgerStatements.linkByAppAccountToken(
                    original, to: account, at: time, &changed, connection
                )
            }
            try changed.touch(at: time, connection)
            try LedgerStatements.recordEvents(before, fallback: .link(.appAccountToken), at: time, outbox, connection)
            return .registered(first: !inserted.isEmpty, links: links)
        }
    }

    func link(originalTransactionIDs: [String], to account: String, source: AccountLinkSource, at time: Int64)
        throws(LedgerError) -> [String: AccountLinkOutcome]
    {
        let rules = linkRules
        let outbox = outbox
        // One lock order for every writer, so concurrent PostgreSQL links of several originals cannot deadlock.
        let ids = Array(Set(originalTransactionIDs)).sorted()
        guard !ids.isEmpty else { return [:] }
        return try database.write { connection throws(LedgerError) in
            let before = try LedgerStatements.outboxBefore(ids, outbox, connection)
            var changed = ChangedAccounts()
            var outcomes: [String: AccountLinkOutcome] = [:]
            for id in ids {
                outcomes[id] = try LedgerStatements.link(
                    id, to: account, source: source, at: time, rules: rules, &changed, connection
                )
            }
            try changed.touch(at: time, connection)
            try LedgerStatements.recordEvents(
                before, causes: try LedgerStatements.linkCauses(outcomes, source: source, before, connection),
                fallback: .link(source), at: time, outbox, connection
            )
            return outcomes
        }
    }

    func account(_ account: String) throws(LedgerError) -> AccountSnapshot? {
        try database.read { connection throws(LedgerError) in
            guard let record = try LedgerStatements.accountRecord(account, connection) else { return nil }
            return AccountSnapshot(
                record: record,
                subscriptions: try LedgerStatements.subscriptions(
                    originalTransactionIDs: record.originalTransactionIDsWithFacts, connection))
        }
    }

    func accountRecord(_ account: String) throws(LedgerError) -> AccountRecord? {
        try database.read { connection throws(LedgerError) in
            try LedgerStatements.accountRecord(account, connection)
        }
    }

    func owner(originalTransactionID: String) throws(LedgerError) -> String? {
        try database.read { connection throws(LedgerError) in
            try connection.query(
                "SELECT account FROM account_links WHERE original_transaction_id = $1", [.text(originalTransactionID)]
            ).first?.string(0)
        }
    }

    func deleteAccount(_ account: String) throws(LedgerError) -> Bool {
        try database.write { connection throws(LedgerError) in
            let parameters: [SQLValue] = [.text(account)]
            var deleted = 0
            for statement in [
                "DELETE FROM account_links WHERE account = $1 RETURNING account",
                "DELETE FROM account_tokens WHERE account = $1 RETURNING account",
                "DELETE FROM account_transfers WHERE from_account = $1 OR to_account = $1 RETURNING from_account",
                "DELETE FROM accounts WHERE account = $1 RETURNING account",
            ] {
                deleted += try connection.query(statement, parameters).count
            }
            return deleted > 0
        }
    }
}

/// The accounts whose links, tokens or transfers one database transaction changed: their `updated_at` moves (and a
/// new account's row appears) once, at the end, in one order for every writer, so that two PostgreSQL transactions
/// moving purchases between the same two accounts in opposite directions cannot deadlock on their rows.
struct ChangedAccounts {
    private var accounts: Set<String> = []

    mutating func insert(_ account: String) { accounts.insert(account) }

    func touch(at time: Int64, _ connection: any SQLConnection) throws(LedgerError) {
        for account in accounts.sorted() {
            try connection.execute(
                """
                INSERT INTO accounts (account, first_seen, updated_at) VALUES ($1, $2, $2)
                ON CONFLICT (account) DO UPDATE SET
                    first_seen = CASE WHEN accounts.first_seen > excluded.first_seen
                        THEN excluded.first_seen ELSE accounts.first_seen END,
                    updated_at = CASE WHEN accounts.updated_at < excluded.updated_at
                        THEN excluded.updated_at ELSE accounts.updated_at END
                """,
                [.text(account), .integer(time)]
            )
        }
    }
}

/// What storing a transaction carrying an `appAccountToken` read in the same statement: the account that registered
/// the token and the owner of the transaction's original, as of that statement.
///
/// On PostgreSQL the write took the token's lock (shared; a registration holds it exclusively) in an earlier statement
/// (``LedgerStatements/lockAppAccountTokensShared(of:_:)``), so this one's snapshot, taken after the lock was granted,
/// holds every registration of the token that committed: of a registration and a purchase committing side by side,
/// the later one sees the earlier. SQLite's one writer serializes them.
struct AppAccountTokenLookup {
    var originalTransactionID: String
    var token: String
    var account: String?
    var owner: String?

    init(_ originalTransactionID: String, _ token: String, _ row: SQLRow, from column: Int) {
        self.originalTransactionID = originalTransactionID
        self.token = token
        account = row.string(column)
        owner = row.string(column + 1)
    }

    /// Result columns reading the token's account and the original's owner from the placeholders `token` and
    /// `original`.
    static func columns(token: Int, original: Int) -> String {
        """
        (SELECT account FROM account_tokens WHERE app_account_token = $\(token)), \
        (SELECT account FROM account_links WHERE original_transaction_id = $\(original))
        """
    }

    /// FNV-1a: stable across processes, unlike Swift's seeded hashing. A collision only makes two tokens wait on each
    /// other.
    static func lockKey(_ token: String) -> Int32 {
        var hash: UInt32 = 2_166_136_261
        for byte in token.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return Int32(bitPattern: hash)
    }
}

extension LedgerStatements {
    /// Links the originals of stored transactions whose token is registered to its account, unless someone owns them
    /// already; run in the transaction that stored them, after every transaction of it (one lock order: by original).
    /// Transactions without a token cost nothing, and those with one no statement of their own unless they link.
    static func linkByAppAccountToken(
        _ lookups: [AppAccountTokenLookup], at time: Int64, _ connection: any SQLConnection
    ) throws(LedgerError) {
        guard !lookups.isEmpty else { return }
        var changed = ChangedAccounts()
        for lookup in lookups.sorted(by: { $0.originalTransactionID < $1.originalTransactionID }) {
            guard let account = lookup.account, lookup.owner == nil else { continue }
            _ = try linkByAppAccountToken(lookup.originalTransactionID, to: account, at: time, &changed, connection)
        }
        try changed.touch(at: time, connection)
    }

    /// The token's lock, exclusive, for its registration (PostgreSQL only; SQLite's single writer already
    /// serializes).
    static func lockAppAccountToken(_ token: String, _ connection: any SQLConnection) throws(LedgerError) {
        guard connection is PostgresConnection else { return }
        // The two-key form: its key space is apart from the migration lock's single key.
        try connection.execute(
            "SELECT pg_advisory_xact_lock($1, $2)",
            [.integer(Int64(appAccountTokenLockClass)), .integer(Int64(AppAccountTokenLookup.lockKey(token)))]
        )
    }

    /// Takes the shared lock of each token a write's transactions carry, sent with the connection's next statement,
    /// before anything else of the write: a registration takes its token's lock first and then the streams of the
    /// originals it links (``outboxBefore(_:_:_:followingWrites:then:)``), so a write that took an original's stream
    /// first and then waited on the token would close a cycle with it, broken only by PostgreSQL's deadlock timeout.
    static func lockAppAccountTokensShared(
        of transactions: [TransactionFacts], _ connection: any SQLConnection
    ) throws(LedgerError) {
        guard connection is PostgresConnection else { return }
        let keys = Set(transactions.compactMap { $0.appAccountToken?.lowercased() }.map(AppAccountTokenLookup.lockKey))
        for key in keys.sorted() {
            try connection.executeWithNext(
                "SELECT pg_advisory_xact_lock_shared($1, $2)",
                [.integer(Int64(appAccountTokenLockClass)), .integer(Int64(key))]
            )
        }
    }

    /// An arbitrary constant ("acct") naming the token locks among the database's advisory locks.
    static let appAccountTokenLockClass: Int32 = 0x6163_6374

    /// A link by token takes nothing from anyone: after user B restored on A's Apple ID, every renewal still carries
    /// A's token and must not move the purchase back.
    static func linkByAppAccountToken(
        _ original: String, to account: String, at time: Int64, _ changed: inout ChangedAccounts,
        _ connection: any SQLConnection
    ) throws(LedgerError) -> AccountLinkOutcome {
        switch try claimLink(original, to: account, source: .appAccountToken, at: time, connection) {
        case .inserted:
            changed.insert(account)
            return .linked
        case .owned(by: let owner): return owner == account ? .alreadyLinked : .ownedByAnotherAccount
        }
    }

    /// Links `original` to `account` as the account asked (a purchase it posted, a claim it was granted), moving it
    /// from another account when the app's restore behavior allows: `transfer` always, `transfer_if_no_active` when
    /// the purchase, as this transaction sees it, grants the other account nothing at `time`.
    static func link(
        _ original: String, to account: String, source: AccountLinkSource, at time: Int64, rules: AccountLinkRules,
        _ changed: inout ChangedAccounts, _ connection: any SQLConnection
    ) throws(LedgerError) -> AccountLinkOutcome {
        // max() skips NULLs on both databases; ORDER BY would put them first on one and last on the other.
        let known = try connection.query(
            "SELECT count(*), max(bundle_id) FROM transactions WHERE original_transaction_id = $1", [.text(original)]
        )
        guard let transaction = known.first, transaction.int64(0) ?? 0 > 0 else { return .unknownTransaction }
        let previous: String
        switch try claimLink(original, to: account, source: source, at: time, connection, lockingExisting: true) {
        case .inserted:
            changed.insert(account)
            return .linked
        case .owned(by: let owner) where owner == account: return .alreadyLinked
        case .owned(by: let owner): previous = owner
        }
        switch rules.restoreBehavior(transaction.string(1)) {
        case .transfer: break
        case .transferIfNoActive:
            if let facts = try subscriptions(originalTransactionIDs: [original], connection)[original],
                rules.grantsEntitlement(facts, time)
            {
                return .ownedByAnotherAccount
            }
        case .keepWithOriginal: return .ownedByAnotherAccount
        }
        // Compare-and-set: the row is locked on PostgreSQL and SQLite has one writer, so this only guards the
        // invariant that a move starts from the owner it was decided on.
        let moved = try connection.query(
            """
            UPDATE account_links SET account = $2, source = $3, linked_at = $4
            WHERE original_transaction_id = $1 AND account = $5
            RETURNING account
            """,
            [.text(original), .text(account), .text(source.rawValue), .integer(time), .text(previous)]
        )
        guard !moved.isEmpty else {
            throw LedgerError(.queryFailed, "a locked account link changed owner under its transaction")
        }
        try connection.execute(
            """
            INSERT INTO account_transfers (original_transaction_id, from_account, to_account, transferred_at, source,
                transfer_number)
            SELECT $1, $2, $3, $4, $5, COALESCE(max(transfer_number), 0) + 1
            FROM account_transfers WHERE original_transaction_id = $1
            """,
            [.text(original), .text(previous), .text(account), .integer(time), .text(source.rawValue)]
        )
        changed.insert(account)
        changed.insert(previous)
        return .transferred(previousAccount: previous)
    }

    /// Each moved original's cause: its transfer, with the number this transaction recorded it under. Nothing read
    /// when no webhook is configured or nothing moved.
    static func linkCauses(
        _ outcomes: [String: AccountLinkOutcome], source: AccountLinkSource, _ before: OutboxBefore?,
        _ connection: any SQLConnection
    ) throws(LedgerError) -> [String: LedgerChangeCause] {
        guard before != nil else { return [:] }
        var causes: [String: LedgerChangeCause] = [:]
        for (original, outcome) in outcomes {
            guard case .transferred = outcome,
                let number = try connection.query(
                    "SELECT max(transfer_number) FROM account_transfers WHERE original_transaction_id = $1",
                    [.text(original)]
                ).first?.int64(0)
            else { continue }
            causes[original] = .transfer(source, number: number)
        }
        return causes
    }

    enum LinkClaim {
        case inserted
        case owned(by: String)
    }

    /// Insert-or-nothing on the link's primary key, then read back: of concurrent links of one original, exactly one
    /// inserts, and the others see its owner. `lockingExisting` keeps the existing row locked for a move.
    private static func claimLink(
        _ original: String, to account: String, source: AccountLinkSource, at time: Int64,
        _ connection: any SQLConnection, lockingExisting: Bool = false
    ) throws(LedgerError) -> LinkClaim {
        // An account deleted between the insert and the read back takes its link away; the insert then succeeds.
        for _ in 0..<3 {
            let inserted = try connection.query(
                """
                INSERT INTO account_links (original_transaction_id, account, source, linked_at) VALUES ($1, $2, $3, $4)
                ON CONFLICT (original_transaction_id) DO NOTHING
                RETURNING account
                """,
                [.text(original), .text(account), .text(source.rawValue), .integer(time)]
            )
            if !inserted.isEmpty { return .inserted }
            let owner = try connection.query(
                "SELECT account FROM account_links WHERE original_transaction_id = $1"
                    + (lockingExisting ? forUpdate(connection) : ""),
                [.text(original)]
            ).first?.string(0)
            if let owner { return .owned(by: owner) }
        }
        throw LedgerError(.queryFailed, "the account link of \(original) kept appearing and disappearing")
    }

    /// One account's links, tokens and transfers, with one statement per table.
    static func accountRecord(_ account: String, _ connection: any SQLConnection) throws(LedgerError)
        -> AccountRecord?
    {
        let parameters: [SQLValue] = [.text(account)]
        guard
            let row = try connection.query(
                "SELECT first_seen, updated_at FROM accounts WHERE account = $1", parameters
            ).first
        else { return nil }
        var links: [AccountLink] = []
        for link in try connection.query(
            "SELECT original_transaction_id, linked_at, source FROM account_links WHERE account = $1", parameters
        ) {
            links.append(
                AccountLink(
                    originalTransactionID: try link.requiredString(0), linkedAt: try link.requiredInt64(1),
                    source: try linkSource(link, 2)
                )
            )
        }
        let tokens = try connection.query(
            "SELECT app_account_token FROM account_tokens WHERE account = $1", parameters
        ).compactMap { $0.string(0) }
        var transfers: [(transfer: AccountTransfer, number: Int64)] = []
        for transfer in try connection.query(
            """
            SELECT original_transaction_id, from_account, to_account, transferred_at, source, transfer_number
            FROM account_transfers WHERE from_account = $1 OR to_account = $1
            """,
            parameters
        ) {
            transfers.append(
                (
                    AccountTransfer(
                        originalTransactionID: try transfer.requiredString(0),
                        fromAccount: try transfer.requiredString(1), toAccount: try transfer.requiredString(2),
                        transferredAt: try transfer.requiredInt64(3), source: try linkSource(transfer, 4)
                    ),
                    try transfer.requiredInt64(5)
                )
            )
        }
        // Sorted here, not in SQL: the two databases order text differently.
        transfers.sort { lhs, rhs in
            (lhs.transfer.transferredAt, lhs.transfer.originalTransactionID, lhs.number)
                < (rhs.transfer.transferredAt, rhs.transfer.originalTransactionID, rhs.number)
        }
        links.sort { ($0.linkedAt, $0.originalTransactionID) < ($1.linkedAt, $1.originalTransactionID) }
        return AccountRecord(
            account: account, links: links, appAccountTokens: tokens.sorted(), transfers: transfers.map(\.transfer),
            firstSeen: try row.requiredInt64(0), updatedAt: try row.requiredInt64(1)
        )
    }

    private static func linkSource(_ row: SQLRow, _ column: Int) throws(LedgerError) -> AccountLinkSource {
        let text = try row.requiredString(column)
        guard let source = AccountLinkSource(rawValue: text) else {
            throw LedgerError(.queryFailed, "an account link has the unknown source \(text)")
        }
        return source
    }
}
