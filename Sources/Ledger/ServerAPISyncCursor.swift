/// How far `receiptd store sync` has read Apple's notification history for one app in one environment: everything
/// Apple attempted to send before `syncedUntil` has been fetched and taken into the ledger.
public struct ServerAPISyncCursor: Sendable, Equatable {
    public var bundleID: String
    /// `Production` or `Sandbox`.
    public var environment: String
    /// Milliseconds since 1970: the end of the last span synced without a gap.
    public var syncedUntil: Int64
    /// Milliseconds since 1970: when that sync finished.
    public var lastSuccessAt: Int64

    public init(bundleID: String, environment: String, syncedUntil: Int64, lastSuccessAt: Int64) {
        self.bundleID = bundleID
        self.environment = environment
        self.syncedUntil = syncedUntil
        self.lastSuccessAt = lastSuccessAt
    }
}

/// A sync lease as the ledger holds it: which receiptd has it, and when it lapses (milliseconds since 1970).
public struct ServerAPISyncLease: Sendable, Equatable {
    public var holder: String
    public var until: Int64
}

extension LedgerRecords {
    func syncCursor(bundleID: String, environment: String) throws(LedgerError) -> ServerAPISyncCursor? {
        guard let row = try syncRow("synced_until, last_success_at", bundleID: bundleID, environment: environment)
        else { return nil }
        return ServerAPISyncCursor(
            bundleID: bundleID, environment: environment, syncedUntil: try row.requiredInt64(0),
            lastSuccessAt: try row.requiredInt64(1))
    }

    /// An app and environment's `columns`, when the first of them is set: cursors and leases share the row.
    private func syncRow(_ columns: String, bundleID: String, environment: String) throws(LedgerError) -> SQLRow? {
        let firstColumn = columns.prefix { $0 != "," }
        return try database.read { connection throws(LedgerError) in
            try connection.query(
                """
                SELECT \(columns) FROM server_api_sync
                WHERE bundle_id = $1 AND environment = $2 AND \(firstColumn) IS NOT NULL
                """,
                [.text(bundleID), .text(environment)]
            ).first
        }
    }

    func syncCursors() throws(LedgerError) -> [ServerAPISyncCursor] {
        try database.read { connection throws(LedgerError) in
            var cursors: [ServerAPISyncCursor] = []
            for row in try connection.query(
                """
                SELECT bundle_id, environment, synced_until, last_success_at FROM server_api_sync
                WHERE synced_until IS NOT NULL ORDER BY bundle_id, environment
                """,
                [])
            {
                cursors.append(
                    ServerAPISyncCursor(
                        bundleID: try row.requiredString(0), environment: try row.requiredString(1),
                        syncedUntil: try row.requiredInt64(2), lastSuccessAt: try row.requiredInt64(3)))
            }
            return cursors
        }
    }

    /// Moves the cursor forward, never back: a sync of an older span (`--since` in the past) leaves it where it is.
    func record(_ cursor: ServerAPISyncCursor) throws(LedgerError) {
        try database.write { connection throws(LedgerError) in
            try connection.execute(
                """
                INSERT INTO server_api_sync (bundle_id, environment, synced_until, last_success_at)
                VALUES ($1, $2, $3, $4)
                ON CONFLICT (bundle_id, environment) DO UPDATE SET
                    synced_until = CASE WHEN server_api_sync.synced_until IS NULL
                        OR excluded.synced_until > server_api_sync.synced_until
                        THEN excluded.synced_until ELSE server_api_sync.synced_until END,
                    last_success_at = excluded.last_success_at
                """,
                [.text(cursor.bundleID), .text(cursor.environment), .integer(cursor.syncedUntil), .integer(cursor.lastSuccessAt)])
        }
    }
}

extension LedgerRecords {
    /// Takes the sync lease of an app and environment for `holder` until `until` (milliseconds), unless another
    /// holder's lease is still running at `now`: replicas sharing a PostgreSQL ledger then never sync one span at
    /// once. True when `holder` has it.
    func acquireSyncLease(
        bundleID: String, environment: String, holder: String, now: Int64, until: Int64
    ) throws(LedgerError) -> Bool {
        try database.write { connection throws(LedgerError) in
            try connection.execute(
                """
                INSERT INTO server_api_sync (bundle_id, environment, lease_holder, lease_until) VALUES ($1, $2, $3, $4)
                ON CONFLICT (bundle_id, environment) DO UPDATE SET
                    lease_holder = excluded.lease_holder, lease_until = excluded.lease_until
                WHERE server_api_sync.lease_until IS NULL OR server_api_sync.lease_until <= $5
                    OR server_api_sync.lease_holder = excluded.lease_holder
                """,
                [.text(bundleID), .text(environment), .text(holder), .integer(until), .integer(now)])
            let rows = try connection.query(
                "SELECT lease_holder FROM server_api_sync WHERE bundle_id = $1 AND environment = $2",
                [.text(bundleID), .text(environment)])
            return rows.first?.string(0) == holder
        }
    }

    func syncLease(bundleID: String, environment: String) throws(LedgerError) -> ServerAPISyncLease? {
        guard let row = try syncRow("lease_holder, lease_until", bundleID: bundleID, environment: environment),
            let holder = row.string(0)
        else { return nil }
        return ServerAPISyncLease(holder: holder, until: try row.requiredInt64(1))
    }

    func releaseSyncLease(bundleID: String, environment: String, holder: String) throws(LedgerError) {
        try database.write { connection throws(LedgerError) in
            try connection.execute(
                """
                UPDATE server_api_sync SET lease_holder = NULL, lease_until = NULL
                WHERE bundle_id = $1 AND environment = $2 AND lease_holder = $3
                """,
                [.text(bundleID), .text(environment), .text(holder)])
        }
    }
}

/// Both backends keep sync cursors and leases in the same table, through their records.
extension LedgerStoreInRecords {
    public func syncLease(bundleID: String, environment: String) throws(LedgerError) -> ServerAPISyncLease? {
        try records.syncLease(bundleID: bundleID, environment: environment)
    }
    public func acquireSyncLease(
        bundleID: String, environment: String, holder: String, now: Int64, until: Int64
    ) throws(LedgerError) -> Bool {
        try records.acquireSyncLease(bundleID: bundleID, environment: environment, holder: holder, now: now, until: until)
    }
    public func releaseSyncLease(bundleID: String, environment: String, holder: String) throws(LedgerError) {
        try records.releaseSyncLease(bundleID: bundleID, environment: environment, holder: holder)
    }
    public func syncCursor(bundleID: String, environment: String) throws(LedgerError) -> ServerAPISyncCursor? {
        try records.syncCursor(bundleID: bundleID, environment: environment)
    }
    public func syncCursors() throws(LedgerError) -> [ServerAPISyncCursor] { try records.syncCursors() }
    public func record(syncCursor cursor: ServerAPISyncCursor) throws(LedgerError) { try records.record(cursor) }
}
