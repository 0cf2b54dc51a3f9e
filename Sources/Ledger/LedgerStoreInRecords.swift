/// Both backends answer the store's operations with `LedgerRecords`, the one implementation of the ledger's SQL
/// they share; they differ only in how they own connections (and SQLite's checks and backup).
protocol LedgerStoreInRecords: LedgerStore {
    associatedtype Database: LedgerDatabase
    var records: LedgerRecords<Database> { get }
}

extension SQLiteLedger: LedgerStoreInRecords {}
extension PostgresLedger: LedgerStoreInRecords {}

extension LedgerStoreInRecords {
    public func record(_ notification: NotificationFacts) throws(LedgerError) -> NotificationWrite {
        try records.record(notification)
    }

    public func record(transactions: [TransactionFacts], source: TransactionSource) throws(LedgerError) {
        try records.record(transactions: transactions, source: source)
    }

    public func record(renewal: RenewalFacts, source: TransactionSource) throws(LedgerError) {
        try records.record(renewal: renewal, source: source)
    }

    public func subscription(originalTransactionID: String) throws(LedgerError) -> SubscriptionFacts? {
        try records.subscription(originalTransactionID: originalTransactionID)
    }

    public func transaction(id: String) throws(LedgerError) -> TransactionRecord? {
        try records.transaction(id: id)
    }

    public func claim(transactionID: String, account: String, at time: Int64) throws(LedgerError) -> ClaimOutcome {
        try records.claim(transactionID: transactionID, account: account, at: time)
    }

    public func transactions(originalTransactionIDs: [String]) throws(LedgerError) -> [TransactionFacts] {
        try records.transactions(originalTransactionIDs: originalTransactionIDs)
    }

    public func renewalInfos(originalTransactionIDs: [String]) throws(LedgerError) -> [RenewalFacts] {
        try records.renewalInfos(originalTransactionIDs: originalTransactionIDs)
    }

    public func notification(uuid: String) throws(LedgerError) -> StoredNotification? {
        try records.notification(uuid: uuid)
    }

    public func ping() throws(LedgerError) { try records.ping() }

    public func schemaVersion() throws(LedgerError) -> Int { try records.schemaVersion() }

    public func counts() throws(LedgerError) -> LedgerCounts { try records.counts() }

    public func registerAppAccountToken(_ token: String, account: String, at time: Int64) throws(LedgerError)
        -> AppAccountTokenOutcome
    {
        try records.registerAppAccountToken(token, account: account, at: time)
    }

    public func link(
        originalTransactionIDs: [String], to account: String, source: AccountLinkSource, at time: Int64
    ) throws(LedgerError) -> [String: AccountLinkOutcome] {
        try records.link(originalTransactionIDs: originalTransactionIDs, to: account, source: source, at: time)
    }

    public func account(_ account: String) throws(LedgerError) -> AccountSnapshot? { try records.account(account) }

    public func accountRecord(_ account: String) throws(LedgerError) -> AccountRecord? {
        try records.accountRecord(account)
    }

    public func owner(originalTransactionID: String) throws(LedgerError) -> String? {
        try records.owner(originalTransactionID: originalTransactionID)
    }

    public func deleteAccount(_ account: String) throws(LedgerError) -> Bool { try records.deleteAccount(account) }
}

extension LedgerStoreInRecords {
    public func claimDeliveries(webhook: String, holder: String, now: Int64, leaseUntil: Int64, limit: Int)
        throws(LedgerError) -> [ClaimedDelivery]
    {
        try records.claimDeliveries(webhook: webhook, holder: holder, now: now, leaseUntil: leaseUntil, limit: limit)
    }

    public func finishDelivery(
        eventID: String, webhook: String, holder: String, result: DeliveryResult, at time: Int64
    ) throws(LedgerError) -> Bool {
        try records.finishDelivery(eventID: eventID, webhook: webhook, holder: holder, result: result, at: time)
    }

    public func finishDeliveries(webhook: String, holder: String, _ finishes: [DeliveryFinish], at time: Int64)
        throws(LedgerError) -> [Bool]
    {
        try records.finishDeliveries(webhook: webhook, holder: holder, finishes, at: time)
    }

    public func retryNow(webhook: String, at time: Int64) throws(LedgerError) -> Int {
        try records.retryNow(webhook: webhook, at: time)
    }

    public func releaseStrandedDeliveries(at time: Int64) throws(LedgerError) -> Int {
        try records.releaseStrandedDeliveries(at: time)
    }

    public func events(_ query: OutboxQuery) throws(LedgerError) -> [OutboxEvent] { try records.events(query) }

    public func replay(_ replay: OutboxReplay, at time: Int64) throws(LedgerError) -> Int {
        try records.replay(replay, at: time)
    }

    public func webhookBacklogs() throws(LedgerError) -> [WebhookBacklog] { try records.webhookBacklogs() }

    public func pruneDeliveredEvents(deliveredBefore time: Int64) throws(LedgerError) -> Int {
        try records.pruneDeliveredEvents(deliveredBefore: time)
    }
}
