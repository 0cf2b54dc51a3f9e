/// The rows subscriptions' facts are made of, each with when the ledger wrote it, keyed by original id.
///
/// The outbox reads them before a write; on SQLite, whose one writer serializes every transaction, the write then
/// ``store(_:at:)``s its own rows here, which gives the state after it without reading the tables again.
struct SubscriptionRows {
    /// One original's rows: its transactions newest first (``LedgerStatements/isNewer(_:than:)``), its renewal info,
    /// its notifications oldest first (``LedgerStatements/isEarlier(_:than:)``), as the reads order them.
    struct Original: Equatable {
        var transactions: [(facts: TransactionFacts, updatedAt: Int64)] = []
        var renewal: (facts: RenewalFacts, updatedAt: Int64)?
        var notifications: [(summary: NotificationSummary, receivedAt: Int64)] = []

        /// What the memo charges for keeping it, estimated high: the payloads and a few hundred bytes a row.
        var bytes: Int {
            transactions.reduce(256) { $0 + $1.facts.payloadJSON.utf8.count + 320 }
                + (renewal.map { $0.facts.payloadJSON.utf8.count + 256 } ?? 0) + notifications.count * 160
        }

        static func == (lhs: Original, rhs: Original) -> Bool {
            lhs.transactions.elementsEqual(rhs.transactions) { $0.facts == $1.facts && $0.updatedAt == $1.updatedAt }
                && lhs.renewal?.facts == rhs.renewal?.facts && lhs.renewal?.updatedAt == rhs.renewal?.updatedAt
                && lhs.notifications.elementsEqual(rhs.notifications) {
                    $0.summary == $1.summary && $0.receivedAt == $1.receivedAt
                }
        }
    }

    /// Every original read, those without any row included.
    var originals: [String: Original] = [:]
    /// The write stored a row of an original not read, or updated a transaction none of the originals read held
    /// (moving it here from another): rows outside these changed unseen.
    private(set) var changedOriginalNotRead = false

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
        var rows = SubscriptionRows()
        for id in ids { rows.originals[id] = Original() }
        for (id, found) in Dictionary(
            grouping: try LedgerStatements.transactions(take(transactions)), by: \.facts.originalTransactionID)
        {
            rows.originals[id, default: Original()].transactions = found
        }
        for renewal in try LedgerStatements.renewals(take(renewals))
        where rows.originals[renewal.facts.originalTransactionID]?.renewal == nil {
            rows.originals[renewal.facts.originalTransactionID, default: Original()].renewal = renewal
        }
        for (id, found) in try LedgerStatements.notifications(take(notifications)) {
            rows.originals[id, default: Original()].notifications = found
        }
        return (rows, Array(answers))
    }

    /// The facts of each of `ids` the rows hold anything of.
    func facts(_ ids: [String]) -> [String: SubscriptionFacts] {
        var facts: [String: SubscriptionFacts] = [:]
        for id in Set(ids) {
            guard let rows = originals[id],
                !rows.transactions.isEmpty || rows.renewal != nil || !rows.notifications.isEmpty
            else { continue }
            let updatedAt =
                (rows.transactions.map(\.updatedAt) + rows.notifications.map(\.receivedAt)
                + [rows.renewal?.updatedAt ?? 0]).max() ?? 0
            facts[id] = SubscriptionFacts(
                originalTransactionID: id,
                transactions: rows.transactions.map(\.facts),
                renewal: rows.renewal?.facts,
                // Equal signed dates: the greatest uuid, as the list is ordered.
                lastNotification: rows.notifications.last?.summary,
                notifications: rows.notifications.map(\.summary),
                updatedAt: updatedAt
            )
        }
        return facts
    }

    /// A transaction as its row now holds it (inserted or replaced at `time`), wherever it was before: an update may
    /// move a transaction to another original id. `replacing`: the row was in the ledger before.
    mutating func store(_ transaction: TransactionFacts, at time: Int64, replacing: Bool) {
        noteChange(of: transaction.originalTransactionID)
        var found = false
        for original in originals.keys {
            guard
                let index = originals[original]?.transactions.firstIndex(where: {
                    $0.facts.transactionID == transaction.transactionID
                })
            else { continue }
            originals[original]?.transactions.remove(at: index)
            found = true
        }
        if replacing && !found { changedOriginalNotRead = true }
        originals[transaction.originalTransactionID, default: Original()].transactions.append((transaction, time))
        originals[transaction.originalTransactionID]?.transactions.sort {
            LedgerStatements.isNewer($0.facts, than: $1.facts)
        }
    }

    mutating func store(_ renewal: RenewalFacts, at time: Int64) {
        noteChange(of: renewal.originalTransactionID)
        originals[renewal.originalTransactionID, default: Original()].renewal = (renewal, time)
    }

    mutating func store(_ notification: NotificationSummary, original: String, receivedAt: Int64) {
        noteChange(of: original)
        originals[original, default: Original()].notifications.append((notification, receivedAt))
        originals[original]?.notifications.sort { LedgerStatements.isEarlier($0.summary, than: $1.summary) }
    }

    private mutating func noteChange(of original: String) {
        if originals[original] == nil { changedOriginalNotRead = true }
    }
}
