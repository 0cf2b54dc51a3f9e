/// Why a ledger call failed: a stable machine code for programs and a sentence for people.
///
/// `unavailable` means the database could not be reached or could not commit (answer 503 and retry later);
/// the other codes mean the call itself or the stored data is at fault. Messages never carry payloads or accounts.
/// Equality compares the code only.
public struct LedgerError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The database cannot be reached, opened, locked or written right now; retrying later may succeed.
        public static let unavailable = Code(rawValue: "unavailable")
        /// Every connection or the writer's queue is taken by other requests right now: this one call was turned away
        /// (answer 503 with `Retry-After: 1`); the database itself is fine, so this says nothing about its health.
        public static let busy = Code(rawValue: "busy")
        /// The store's configuration cannot be used as written (a PostgreSQL connection string libpq cannot parse):
        /// waiting will not help, the configuration must change.
        public static let invalidConfiguration = Code(rawValue: "invalid_configuration")
        /// The database was migrated by a newer receiptd; this binary must not touch it.
        public static let schemaTooNew = Code(rawValue: "schema_too_new")
        /// The database rejected a value (a constraint, a type, a size, a NUL character in text).
        public static let invalidData = Code(rawValue: "invalid_data")
        /// A statement failed for another reason: a damaged schema, or a bug.
        public static let queryFailed = Code(rawValue: "query_failed")
        /// Another process serves this SQLite file (it holds the file's lock); one server per file.
        public static let inUse = Code(rawValue: "in_use")
        /// The SQLite file is not a database, or fails SQLite's integrity check.
        public static let corrupt = Code(rawValue: "corrupt")
        /// The database is sound but holds no ledger (no schema version): not something to restore.
        public static let notALedger = Code(rawValue: "not_a_ledger")
    }

    /// What is wrong with the database when it, not the call, is at fault: the `reason` of `/readyz`.
    public struct Reason: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The database cannot be connected to or opened (down, refusing, wrong address, missing folder).
        public static let unreachable = Reason(rawValue: "unreachable")
        /// The database did not answer within `store_timeout` (frozen, overloaded, a network that drops packets).
        public static let timeout = Reason(rawValue: "timeout")
        /// No space left for the database to grow.
        public static let diskFull = Reason(rawValue: "disk_full")
        /// The database or its volume refuses writes.
        public static let readOnly = Reason(rawValue: "read_only")
        /// The database file or an index is damaged.
        public static let corrupt = Reason(rawValue: "corrupt")
        /// Another writer holds a lock longer than `store_timeout`, or transactions kept conflicting.
        public static let locked = Reason(rawValue: "locked")
        /// Any other failure of the database: a constraint, a damaged schema, out of memory, an I/O error.
        public static let error = Reason(rawValue: "error")
    }

    public let code: Code
    public let message: String
    /// What is wrong with the database; nil when only the call was at fault (a value that can never be stored), so
    /// the ledger stays healthy.
    public let reason: Reason?

    /// `reason` defaults to `unreachable` for `unavailable` and to none otherwise.
    public init(_ code: Code, _ message: String, reason: Reason? = nil) {
        self.code = code
        self.message = message
        self.reason = reason ?? (code == .unavailable ? .unreachable : nil)
    }

    public var description: String { "\(code): \(message)" }

    public static func == (lhs: LedgerError, rhs: LedgerError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
