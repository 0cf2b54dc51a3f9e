/// The rows subscriptions' facts are made of, each with when the ledger wrote it, keyed by original id.
///
/// The outbox reads them before a write; on SQLite, whose one writer serializes every transaction, the write then
/// ``store(_:at:)``s its own rows here, which gives the state after it without reading the tables again.
struct SubscriptionRows {
    var transactions: [String: [(facts: TransactionFacts, updatedAt: Int64)]] = [:]
    var renewals: [String: (facts: RenewalFacts, updatedAt: Int64)] = [:]
    var notifications: [String: [(summary: NotificationSummary, receivedAt: Int64)]] = [:]

    /// One statement per table whatever the number of ids, sent together.
    static func read(_ ids: [String], _ connection: any SQLConnection) throws(LedgerError) -> SubscriptionRows {
        try read(ids, connection, with: []).rows
    }

    /// Also runs `others` after the reads, in the same round trip on PostgreSQL, and returns their answers.
    static func read(
        _ ids: [String], _ connection: any SQLConnection, with others: [SQLStatement]
    ) throws(LedgerError) -> (rows: SubscriptionRows, others: [[SQLRow]]) {
        let transactions = LedgerStatements.transactionStatements(ids)
        let renewals = LedgerStatements.renewalStatements(ids)
        let notifications = LedgerStatements.notificationStatements(ids)
        guard !(ids.isEmpty && others.isEmpty) else { return (SubscriptionRows(), []) }
        var answers = try connection.queries(transactions + renewals + notifications + others)[...]
        func take(_ statements: [SQLStatement]) -> [SQLRow] {
            defer { answers = answers.dropFirst(statements.count) }
            return answers.prefix(statements.count).flatMap { $0 }
        }
        let rows = SubscriptionRows(
            transactions: Dictionary(
                grouping: try LedgerStatements.transactions(take(transactions)), by: \.facts.originalTransactionID
            ),
            renewals: Dictionary(
                try LedgerStatements.renewals(take(renewals)).map { ($0.facts.originalTransactionID, $0) },
                uniquingKeysWith: { first, _ in first }
            ),
            notifications: try LedgerStatements.notifications(take(notifications))
        )
        return (rows, Array(answers))
    }

    /// The facts of each of `ids` the rows hold anything of.
    func facts(_ ids: [String]) -> [String: SubscriptionFacts] {
        var facts: [String: SubscriptionFacts] = [:]
        for id in Set(ids) {
            let transactions = transactions[id] ?? []
            let renewal = renewals[id]
            let notifications = notifications[id] ?? []
            guard !transactions.isEmpty || renewal != nil || !notifications.isEmpty else { continue }
            let updatedAt =
                (transactions.map(\.updatedAt) + notifications.map(\.receivedAt) + [renewal?.updatedAt ?? 0]).max() ?? 0
            facts[id] = SubscriptionFacts(
                originalTransactionID: id,
                transactions: transactions.map(\.facts),
                renewal: renewal?.facts,
                // Equal signed dates: the greatest uuid, as the list is ordered.
                lastNotification: notifications.last?.summary,
                notifications: notifications.map(\.summary),
                updatedAt: updatedAt
            )
        }
        return facts
    }

    /// A transaction as its row now holds it (inserted or replaced at `time`), wherever it was before: an update may
    /// move a transaction to another original id.
    mutating func store(_ transaction: TransactionFacts, at time: Int64) {
        for original in transactions.keys {
            transactions[original]?.removeAll { $0.facts.transactionID == transaction.transactionID }
        }
        transactions[transaction.originalTransactionID, default: []].append((transaction, time))
        transactions[transaction.originalTransactionID]?.sort { LedgerStatements.isNewer($0.facts, than: $1.facts) }
    }

    mutating func store(_ renewal: RenewalFacts, at time: Int64) {
        renewals[renewal.originalTransactionID] = (renewal, time)
    }

    mutating func store(_ notification: NotificationSummary, original: String, receivedAt: Int64) {
        notifications[original, default: []].append((notification, receivedAt))
        notifications[original]?.sort { LedgerStatements.isEarlier($0.summary, than: $1.summary) }
    }
}
