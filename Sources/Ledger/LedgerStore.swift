internal import Glibc

/// The purchase ledger: everything that verified, kept so that subscription answers stay true later.
///
/// Every call blocks until done and is safe from any thread. Writes return only after a durable commit. State for one
/// transaction or one subscription only moves forward in signed date, so repeated and out-of-order deliveries
/// converge. Failures are ``LedgerError``s; `unavailable` means the database cannot be reached right now.
public protocol LedgerStore:
    LedgerOutbox, LedgerConsumption, LedgerAppleCalls, LedgerRenewalExtensions, LedgerSubscriptionGroups,
    LedgerCustomers
{
    /// Stores a verified notification and merges its transaction and renewal info; `.duplicate` (and no other
    /// effect) if its uuid was stored before.
    func record(_ notification: NotificationFacts) throws(LedgerError) -> NotificationWrite

    /// Stores verified transactions; each replaces the stored version of its id only if it orders after it (StoreKit 2
    /// over a receipt's entry, then a newer signed date, then the tie-breaks of docs/ledger.md). The source is added
    /// to each transaction's sources either way. Receipt entries carry the receipt's creation date as their
    /// `signedDate`.
    func record(transactions: [TransactionFacts], source: TransactionSource) throws(LedgerError)

    /// Stores a verified renewal info; it replaces the stored one of its original transaction only if it orders after
    /// it (a newer signed date, then the tie-breaks of docs/ledger.md).
    func record(renewal: RenewalFacts, source: TransactionSource) throws(LedgerError)

    /// All facts about one subscription, or nil if the ledger has none.
    func subscription(originalTransactionID: String) throws(LedgerError) -> SubscriptionFacts?

    /// One transaction with its sources and claim, or nil if never recorded.
    func transaction(id: String) throws(LedgerError) -> TransactionRecord?

    /// Grants a recorded transaction to one account, once; concurrent claims (from any number of processes sharing
    /// the database) have exactly one winner. A revoked transaction is granted to nobody.
    func claim(transactionID: String, account: String, at time: Int64) throws(LedgerError) -> ClaimOutcome

    /// All transactions of these original ids, newest first by purchase date.
    func transactions(originalTransactionIDs: [String]) throws(LedgerError) -> [TransactionFacts]

    /// The latest renewal info of each of these original ids that has one.
    func renewalInfos(originalTransactionIDs: [String]) throws(LedgerError) -> [RenewalFacts]

    /// One stored notification by uuid.
    func notification(uuid: String) throws(LedgerError) -> StoredNotification?

    /// Succeeds when the database answers a trivial query: for readiness checks.
    func ping() throws(LedgerError)

    /// Succeeds when the database commits a real write (a heartbeat that changes no ledger data) and has room for
    /// more, within `store_timeout`: the only thing that makes a ledger ready.
    func checkWritable() throws(LedgerError)

    /// Succeeds when the database shows no damage (SQLite's `quick_check`): asked before a ledger once found corrupt
    /// is called ready again, since writes may still succeed on a damaged file.
    func checkIntegrity() throws(LedgerError)

    /// The schema version the database is at.
    func schemaVersion() throws(LedgerError) -> Int

    /// Rows per table.
    func counts() throws(LedgerError) -> LedgerCounts

    /// Releases the database at shutdown, after the writes already under way finished; later calls fail
    /// `unavailable`. SQLite folds its write-ahead log into the database file first, so that the file alone is whole.
    func close() throws(LedgerError)

    /// Where `receiptd store sync` stopped reading Apple's notification history for an app and environment.
    func syncCursor(bundleID: String, environment: String) throws(LedgerError) -> ServerAPISyncCursor?
    /// Every app and environment's sync cursor.
    func syncCursors() throws(LedgerError) -> [ServerAPISyncCursor]
    /// Moves a sync cursor forward (never back).
    func record(syncCursor cursor: ServerAPISyncCursor) throws(LedgerError)
    /// Takes the sync lease of an app and environment unless another holder's is still running; true when taken.
    func acquireSyncLease(bundleID: String, environment: String, holder: String, now: Int64, until: Int64)
        throws(LedgerError) -> Bool
    /// Gives the lease back, if `holder` still has it.
    func releaseSyncLease(bundleID: String, environment: String, holder: String) throws(LedgerError)
    /// Who holds the sync lease of an app and environment, and until when; nil when nobody has ever held it.
    func syncLease(bundleID: String, environment: String) throws(LedgerError) -> ServerAPISyncLease?

    // Accounts (see Accounts.swift). Every write that stores a transaction carrying a registered `appAccountToken`
    // (record, in every form) links its original transaction in the same database transaction, and a granted claim
    // links the claimed transaction's original, both under the ``AccountLinkRules`` the ledger was opened with.

    /// Registers `token` (a UUID, stored lowercase) to `account` and links every original transaction the ledger
    /// already holds with a transaction carrying it.
    func registerAppAccountToken(_ token: String, account: String, at time: Int64) throws(LedgerError)
        -> AppAccountTokenOutcome

    /// Links these original transactions to `account` under the app's restore behavior; one outcome per id.
    func link(originalTransactionIDs: [String], to account: String, source: AccountLinkSource, at time: Int64)
        throws(LedgerError) -> [String: AccountLinkOutcome]

    /// The account's links, tokens and transfers, with the facts of every original transaction it owns or
    /// transferred away, read in one snapshot; nil when the ledger holds nothing of it.
    func account(_ account: String) throws(LedgerError) -> AccountSnapshot?

    /// ``account(_:)`` without the facts: for a reader that already holds them (``AccountRecord/
    /// originalTransactionIDsWithFacts`` names which it needs).
    func accountRecord(_ account: String) throws(LedgerError) -> AccountRecord?

    /// The account owning this original transaction, if any.
    func owner(originalTransactionID: String) throws(LedgerError) -> String?

    /// Forgets an account: its links, tokens and transfer records. Apple's facts stay, unlinked. False when the
    /// ledger held nothing of it.
    func deleteAccount(_ account: String) throws(LedgerError) -> Bool
}

/// Where the ledger lives: `"store": {"sqlite": "PATH"}` or `"store": {"postgres": "CONNINFO"}`.
public enum LedgerConfiguration: Sendable, Hashable {
    /// A SQLite database file, created if missing.
    case sqlite(path: String)
    /// A PostgreSQL database, as a libpq connection string (`host=… dbname=…` or a `postgresql://` URI).
    case postgres(connectionString: String)
}

extension LedgerConfiguration {
    /// `store_timeout`'s default, in seconds.
    public static let defaultTimeout: Double = 2
}

/// Opens the configured ledger and migrates its schema forward.
///
/// - Parameter timeout: `store_timeout`, in seconds: the longest any call waits for a connection, a lock or one
///   statement's answer before it fails with `unavailable` (reason `timeout` or `locked`).
/// - Parameter linkRules: the apps' restore behaviors and entitlement rule, which decide an explicit link to an
///   account when another account owns the purchase (see Accounts.swift).
/// - Parameter outbox: which events each write implies and which webhooks want them (see Outbox.swift).
/// - Parameter appleCalls: what a granted claim owes Apple, per app (see AppleCalls.swift).
public func openLedger(
    _ configuration: LedgerConfiguration, timeout: Double = LedgerConfiguration.defaultTimeout,
    clock: @escaping LedgerClock = unixMillisecondsNow, linkRules: AccountLinkRules = .transferAlways,
    outbox: OutboxRules = .none, appleCalls: AppleCallRules = .none
) throws(LedgerError) -> any LedgerStore {
    switch configuration {
    case .sqlite(let path):
        try SQLiteLedger(
            path: path, timeout: timeout, clock: clock, linkRules: linkRules, outbox: outbox, appleCalls: appleCalls)
    case .postgres(let connectionString):
        try PostgresLedger(
            connectionString: connectionString, timeout: timeout, clock: clock, linkRules: linkRules, outbox: outbox,
            appleCalls: appleCalls)
    }
}

/// The wall clock in Unix milliseconds: the default ``LedgerClock``.
public func unixMillisecondsNow() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
}
