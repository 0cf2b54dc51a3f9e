/// The renewal extensions' operations (see RenewalExtensions.swift): each call is one database transaction.
extension LedgerRecords {
    func record(renewalExtension record: RenewalExtensionRecord) throws(LedgerError) {
        let outbox = outbox
        try database.write { connection throws(LedgerError) in
            try LedgerStatements.upsert(record, connection)
            guard record.outcome == .extended, let original = record.originalTransactionID,
                let effectiveDate = record.effectiveDate
            else { return }
            try LedgerStatements.recordExtensionEvents(
                original, requestIdentifier: record.requestIdentifier, effectiveDate: effectiveDate,
                at: record.requestedAt, outbox, connection)
        }
    }

    func renewalExtensions(originalTransactionID: String) throws(LedgerError) -> [RenewalExtensionRecord] {
        try database.read { connection throws(LedgerError) in
            try connection.query(
                "SELECT \(LedgerStatements.extensionColumns) FROM renewal_extensions WHERE original_transaction_id = $1 "
                    + "ORDER BY requested_at, request_identifier",
                [.text(originalTransactionID)]
            ).map(LedgerStatements.renewalExtension)
        }
    }

    func renewalExtension(requestIdentifier: String) throws(LedgerError) -> RenewalExtensionRecord? {
        try database.read { connection throws(LedgerError) in
            try connection.query(
                "SELECT \(LedgerStatements.extensionColumns) FROM renewal_extensions WHERE request_identifier = $1",
                [.text(requestIdentifier)]
            ).first.map(LedgerStatements.renewalExtension)
        }
    }
}

extension LedgerStatements {
    static let extensionColumns = """
        request_identifier, original_transaction_id, product_id, bundle_id, environment, days, reason_code, \
        storefronts, requested_by, requested_at, outcome, effective_date, web_order_line_item_id, apple_status, \
        apple_error_code, message, completed_at, succeeded_count, failed_count
        """

    static func upsert(_ record: RenewalExtensionRecord, _ connection: any SQLConnection) throws(LedgerError) {
        let storefronts = record.storefronts.isEmpty ? nil : record.storefronts.joined(separator: ",")
        for text in [record.requestIdentifier, record.bundleID, record.environment] + [
            record.originalTransactionID, record.productID, storefronts, record.requestedBy, record.message,
            record.webOrderLineItemID,
        ].compactMap({ $0 }) {
            try checkStorable(text)
        }
        // The row's request and who asked stay as first written; Apple's answer replaces the earlier one.
        try connection.execute(
            """
            INSERT INTO renewal_extensions (\(extensionColumns))
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
            ON CONFLICT (request_identifier) DO UPDATE SET outcome = excluded.outcome,
                effective_date = excluded.effective_date, web_order_line_item_id = excluded.web_order_line_item_id,
                apple_status = excluded.apple_status, apple_error_code = excluded.apple_error_code,
                message = excluded.message, completed_at = excluded.completed_at,
                succeeded_count = excluded.succeeded_count, failed_count = excluded.failed_count
            """,
            [
                .text(record.requestIdentifier), SQLValue(record.originalTransactionID), SQLValue(record.productID),
                .text(record.bundleID), .text(record.environment), .integer(Int64(record.days)),
                .integer(Int64(record.reasonCode)), SQLValue(storefronts), SQLValue(record.requestedBy),
                .integer(record.requestedAt), .text(record.outcome.rawValue), SQLValue(record.effectiveDate),
                SQLValue(record.webOrderLineItemID), SQLValue(record.appleStatus), SQLValue(record.appleErrorCode),
                SQLValue(record.message), SQLValue(record.completedAt), SQLValue(record.succeededCount),
                SQLValue(record.failedCount),
            ]
        )
    }

    static func renewalExtension(_ row: SQLRow) throws(LedgerError) -> RenewalExtensionRecord {
        let outcome = try row.requiredString(10)
        guard let parsed = RenewalExtensionOutcome(rawValue: outcome) else {
            throw LedgerError(.queryFailed, "renewal_extensions holds an unknown outcome \(outcome)")
        }
        return RenewalExtensionRecord(
            requestIdentifier: try row.requiredString(0), originalTransactionID: row.string(1),
            productID: row.string(2), bundleID: try row.requiredString(3), environment: try row.requiredString(4),
            days: Int(try row.requiredInt64(5)), reasonCode: Int(try row.requiredInt64(6)),
            storefronts: row.string(7).map { $0.split(separator: ",").map(String.init) } ?? [],
            requestedBy: row.string(8), requestedAt: try row.requiredInt64(9), outcome: parsed,
            effectiveDate: row.int64(11), webOrderLineItemID: row.string(12), appleStatus: row.int(13),
            appleErrorCode: row.int64(14), message: row.string(15), completedAt: row.int64(16),
            succeededCount: row.int64(17), failedCount: row.int64(18)
        )
    }

    /// The events of an extension Apple granted: the original's facts are unchanged (Apple's signed renewal comes
    /// later), so the change shows them as they are, before and after, with its owner's originals.
    static func recordExtensionEvents(
        _ original: String, requestIdentifier: String, effectiveDate: Int64, at time: Int64, _ outbox: OutboxRules,
        _ connection: any SQLConnection
    ) throws(LedgerError) {
        guard outbox.isActive,
            let facts = try subscriptions(originalTransactionIDs: [original], connection)[original]
        else { return }
        let owner = try owners([original], connection)[original]
        var accounts: [String: [SubscriptionFacts]] = [:]
        if let owner {
            let owned = try connection.query(
                "SELECT original_transaction_id FROM account_links WHERE account = $1", [.text(owner)]
            ).map { (row) throws(LedgerError) in try row.requiredString(0) }
            accounts[owner] = try subscriptions(originalTransactionIDs: owned, connection).values
                .sorted { $0.originalTransactionID < $1.originalTransactionID }
        }
        let change = LedgerChange(
            cause: .renewalExtension(requestIdentifier: requestIdentifier, effectiveDate: effectiveDate),
            originalTransactionID: original, before: facts, after: facts, accountBefore: owner, accountAfter: owner,
            accountsBefore: accounts, accountsAfter: accounts, time: time
        )
        try store(outbox.events(change), at: time, outbox, connection)
    }
}
