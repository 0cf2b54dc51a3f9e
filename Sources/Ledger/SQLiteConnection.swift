internal import CSQLite
internal import Glibc

/// One SQLite connection and its prepared statements; the only owner of a `sqlite3` handle.
///
/// Opened without SQLite's own mutex (`SQLITE_OPEN_NOMUTEX`): the ledger hands each connection to one thread at a
/// time (the writer queue or the reader pool), which is what makes the `@unchecked Sendable` sound.
final class SQLiteConnection: SQLConnection, @unchecked Sendable {
    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]
    private(set) var isClosed = false
    /// The writer's connection only: what its writes left of subscriptions' rows.
    var subscriptionRowsMemo: SubscriptionRowsMemo?

    /// - Parameter timeout: how long a statement waits for another connection's lock (`busy_timeout`), in seconds.
    init(path: String, timeout: Double = LedgerConfiguration.defaultTimeout) throws(LedgerError) {
        var opened: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &opened, flags, nil)
        guard status == SQLITE_OK, let opened else {
            let reason = opened.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            let systemError = opened.map { sqlite3_system_errno($0) } ?? 0
            sqlite3_close_v2(opened)
            throw LedgerError(
                .unavailable, "cannot open the SQLite database at \(path): \(reason) (\(status))",
                reason: Self.reason(status, systemError: systemError))
        }
        handle = opened
        sqlite3_extended_result_codes(handle, 1)
        // SQLite quietly opens a file it may not write read-only; the ledger would then fail every write.
        guard sqlite3_db_readonly(handle, "main") != 1 else {
            throw LedgerError(
                .unavailable,
                "the SQLite database at \(path) is read-only: make the file and its folder writable by the user "
                    + "receiptd runs as, on a volume mounted read-write", reason: .readOnly)
        }
        // Other processes (a second receiptd, a backup, sqlite3 by hand) may hold the write lock for a moment.
        // Bounded by store_timeout like every other wait, so a lock held elsewhere costs a request at most that.
        try execute("PRAGMA busy_timeout = \(Int64((timeout * 1000).rounded(.up)))")
        let mode = try query("PRAGMA journal_mode = WAL", []).first?.string(0)
        guard mode?.lowercased() == "wal" else {
            throw LedgerError(
                .unavailable, "the SQLite database at \(path) cannot use write-ahead logging", reason: .error)
        }
        // In WAL mode NORMAL may lose the last commits on power loss; a recorded notification must survive it.
        try execute("PRAGMA synchronous = FULL")
    }

    deinit { close() }

    /// Closes the handle now rather than whenever the last reference goes; later statements fail `unavailable`. The
    /// last connection to a WAL database to close checkpoints it and deletes its `-wal` and `-shm`.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        for statement in statements.values { sqlite3_finalize(statement) }
        statements = [:]
        sqlite3_close_v2(handle)
    }

    func query(_ sql: String, _ parameters: [SQLValue]) throws(LedgerError) -> [SQLRow] {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (index, value) in parameters.enumerated() {
            let position = Int32(index + 1)
            let status: Int32
            switch value {
            case .null:
                status = sqlite3_bind_null(statement, position)
            case .integer(let number):
                status = sqlite3_bind_int64(statement, position, number)
            case .text(let text):
                try checkStorable(text)
                status = sqlite3_bind_text(statement, position, text, -1, receiptd_sqlite_transient())
            }
            guard status == SQLITE_OK else { throw error(status, "binding parameter \(position)") }
        }
        var rows: [SQLRow] = []
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { break }
            guard status == SQLITE_ROW else { throw error(status, "running a statement") }
            let columns = sqlite3_column_count(statement)
            var values: [SQLValue] = []
            values.reserveCapacity(Int(columns))
            for column in 0..<columns {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_NULL:
                    values.append(.null)
                case SQLITE_INTEGER:
                    values.append(.integer(sqlite3_column_int64(statement, column)))
                default:
                    let bytes = sqlite3_column_text(statement, column)
                    let count = Int(sqlite3_column_bytes(statement, column))
                    if let bytes {
                        let text = UnsafeBufferPointer(start: bytes, count: count)
                        values.append(.text(String(decoding: text, as: UTF8.self)))
                    } else {
                        values.append(.null)
                    }
                }
            }
            rows.append(SQLRow(values: values))
        }
        return rows
    }

    private func prepared(_ sql: String) throws(LedgerError) -> OpaquePointer {
        guard !isClosed else { throw LedgerError(.unavailable, "SQLite: the connection is closed") }
        if let cached = statements[sql] { return cached }
        var statement: OpaquePointer?
        let status = sqlite3_prepare_v2(handle, Self.sqliteParameters(sql), -1, &statement, nil)
        guard status == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            throw error(status, "preparing a statement")
        }
        statements[sql] = statement
        return statement
    }

    /// `$1` in SQLite names a parameter whose index is its order of first appearance; `?1` is positional, like
    /// PostgreSQL's `$1`.
    static func sqliteParameters(_ sql: String) -> String {
        var result = ""
        result.reserveCapacity(sql.utf8.count)
        var previous: Character = " "
        for character in sql {
            if previous == "$", character.isNumber {
                result.removeLast()
                result.append("?")
            }
            result.append(character)
            previous = character
        }
        return result
    }

    private func error(_ status: Int32, _ operation: String) -> LedgerError {
        let reason = String(cString: sqlite3_errmsg(handle))
        let code: LedgerError.Code
        switch status & 0xff {
        case SQLITE_CONSTRAINT, SQLITE_MISMATCH, SQLITE_TOOBIG, SQLITE_RANGE:
            code = .invalidData
        case SQLITE_ERROR, SQLITE_MISUSE, SQLITE_INTERNAL, SQLITE_SCHEMA, SQLITE_AUTH:
            code = .queryFailed
        default:
            // BUSY, LOCKED, IOERR, FULL, CANTOPEN, READONLY, CORRUPT, NOTADB, NOMEM, PERM: the store, not the call.
            code = .unavailable
        }
        // The extended code (e.g. 1032 SQLITE_READONLY_DBMOVED) is what tells an operator which of its kind it is.
        return LedgerError(
            code, "SQLite \(operation): \(reason) (\(status))",
            reason: Self.reason(status, systemError: sqlite3_system_errno(handle)))
    }

    /// What an (extended) result code says about the database; a statement's own fault (a constraint, a bad value)
    /// counts too, since the ledger's statements only fail so when the schema or the data is damaged.
    ///
    /// SQLite reports a volume remounted read-only, or one that filled up mid-write, as an I/O error
    /// (`SQLITE_IOERR_WRITE`, `_FSYNC`…); the operating system's `errno` behind it tells which.
    static func reason(_ status: Int32, systemError: Int32 = 0) -> LedgerError.Reason {
        switch (status & 0xff, systemError) {
        case (SQLITE_IOERR, EROFS), (SQLITE_IOERR, EACCES), (SQLITE_IOERR, EPERM), (SQLITE_CANTOPEN, EROFS):
            return .readOnly
        case (SQLITE_IOERR, ENOSPC), (SQLITE_IOERR, EDQUOT): return .diskFull
        default: break
        }
        return switch status & 0xff {
        case SQLITE_FULL: .diskFull
        case SQLITE_READONLY, SQLITE_PERM: .readOnly
        case SQLITE_CORRUPT, SQLITE_NOTADB: .corrupt
        case SQLITE_BUSY, SQLITE_LOCKED: .locked
        case SQLITE_CANTOPEN: .unreachable
        default: .error
        }
    }
}
