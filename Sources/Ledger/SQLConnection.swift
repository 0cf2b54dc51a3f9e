/// A value bound to or read from a statement. Booleans are stored as integers 0 and 1 on both databases.
enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case text(String)

    init(_ value: String?) { self = value.map(SQLValue.text) ?? .null }
    init(_ value: Int64?) { self = value.map(SQLValue.integer) ?? .null }
    init(_ value: Int?) { self = value.map { .integer(Int64($0)) } ?? .null }
    init(_ value: Bool?) { self = value.map { .integer($0 ? 1 : 0) } ?? .null }
}

/// One result row. PostgreSQL answers in text, SQLite in typed values: the accessors accept both.
struct SQLRow: Sendable {
    var values: [SQLValue]

    func string(_ column: Int) -> String? {
        switch values[column] {
        case .null: nil
        case .text(let text): text
        case .integer(let number): String(number)
        }
    }

    func int64(_ column: Int) -> Int64? {
        switch values[column] {
        case .null: nil
        case .integer(let number): number
        case .text(let text): Int64(text)
        }
    }

    func int(_ column: Int) -> Int? { int64(column).map { Int($0) } }
    func bool(_ column: Int) -> Bool? { int64(column).map { $0 != 0 } }

    func requiredString(_ column: Int) throws(LedgerError) -> String {
        guard let value = string(column) else {
            throw LedgerError(.queryFailed, "column \(column) is unexpectedly NULL")
        }
        return value
    }

    func requiredInt64(_ column: Int) throws(LedgerError) -> Int64 {
        guard let value = int64(column) else {
            throw LedgerError(.queryFailed, "column \(column) is unexpectedly NULL or not an integer")
        }
        return value
    }
}

/// One open database connection, used by one thread at a time.
///
/// SQL is written once for both databases with PostgreSQL's `$1` placeholders; the SQLite connection maps them to
/// `?1`. Only placeholders carry values: no value is ever spliced into SQL text.
protocol SQLConnection: AnyObject {
    /// Runs one statement and returns its rows (none for statements without a result).
    func query(_ sql: String, _ parameters: [SQLValue]) throws(LedgerError) -> [SQLRow]

    /// Runs statements in order, none of whose parameters depend on another's answer, and returns each one's rows.
    /// PostgreSQL sends them together and waits once: each statement is otherwise a round trip, and the round trips,
    /// not the statements, were most of a write's time there. The first failure fails the call; the statements after
    /// it do not run.
    func queries(_ statements: [SQLStatement]) throws(LedgerError) -> [[SQLRow]]

    /// Runs a statement whose answer the caller does not need. PostgreSQL sends it with the connection's next
    /// statement, in its round trip, and that statement reports its failure; a rollback drops the failure with the
    /// work it undoes. The statements sent with it are prepared before it runs: it must not create what they use.
    func executeWithNext(_ sql: String, _ parameters: [SQLValue]) throws(LedgerError)
}

/// A statement and its parameters, for ``SQLConnection/queries(_:)``.
struct SQLStatement {
    var sql: String
    var parameters: [SQLValue]

    init(_ sql: String, _ parameters: [SQLValue] = []) {
        self.sql = sql
        self.parameters = parameters
    }
}

extension SQLConnection {
    func execute(_ sql: String, _ parameters: [SQLValue] = []) throws(LedgerError) {
        _ = try query(sql, parameters)
    }

    /// One after the other: SQLite answers in the calling thread, with no round trip to save.
    func queries(_ statements: [SQLStatement]) throws(LedgerError) -> [[SQLRow]] {
        var results: [[SQLRow]] = []
        results.reserveCapacity(statements.count)
        for statement in statements { results.append(try query(statement.sql, statement.parameters)) }
        return results
    }

    func executeWithNext(_ sql: String, _ parameters: [SQLValue]) throws(LedgerError) {
        try execute(sql, parameters)
    }

    /// Runs `body` between `begin` and COMMIT; rolls back if `body` or the commit fails.
    func inTransaction<Result>(
        begin: String, _ body: () throws(LedgerError) -> Result
    ) throws(LedgerError) -> Result {
        try execute(begin)
        return try inTransactionAlreadyBegun(body)
    }

    /// Runs `body` in the transaction the caller began, then COMMIT; rolls back if either fails.
    func inTransactionAlreadyBegun<Result>(_ body: () throws(LedgerError) -> Result) throws(LedgerError) -> Result {
        do throws(LedgerError) {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            // A failed COMMIT may already have ended the transaction; a ROLLBACK error then says nothing new.
            try? execute("ROLLBACK")
            throw error
        }
    }
}

/// Strings with NUL cannot be stored as PostgreSQL text and would be cut short by SQLite's C API.
///
/// Every text bound is checked, kilobytes of signed payload per notification: walking the UTF-8 view a byte at a time
/// was 4% of an ingest's CPU, all of it on SQLite's one writer thread; a native string's bytes read through a span cost
/// next to nothing, and need no unsafe pointer outside the files that own C objects. The smallest byte is taken over
/// the whole text rather than stopping at the first NUL: a loop without an early exit is one the compiler vectorizes
/// (32 bytes a step), and a NUL is the rare case, so reading past it costs nothing that matters.
func checkStorable(_ text: String) throws(LedgerError) {
    let bytes = text.utf8.span
    var smallest: UInt8 = .max
    for index in bytes.indices { smallest = min(smallest, bytes[index]) }
    if smallest == 0 { throw LedgerError(.invalidData, "text contains a NUL character") }
}
