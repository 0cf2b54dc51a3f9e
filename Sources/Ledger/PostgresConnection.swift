internal import CPostgres
internal import Glibc

/// One libpq connection; the only owner of a `PGconn`.
///
/// libpq allows one thread at a time per connection; the pool lends each to one caller, which is what makes the
/// `@unchecked Sendable` sound.
final class PostgresConnection: PooledConnection, @unchecked Sendable {
    private let handle: OpaquePointer

    init(connectionString: String) throws(LedgerError) {
        // The caller's string is expanded in the dbname slot: the keywords after it add to it and win over it, the
        // one before it is a default it may override. Without a connect timeout, a database host that drops packets
        // would hold every request that waits for the ledger for the operating system's TCP timeout (minutes).
        let keywords = ["connect_timeout", "dbname", "client_encoding", "fallback_application_name"]
        let values = ["5", connectionString, "UTF8", "receiptd"]
        let opened = withCStringArray(keywords) { keywords in
            withCStringArray(values) { values in PQconnectdbParams(keywords, values, 1) }
        }
        guard let opened else { throw LedgerError(.unavailable, "PostgreSQL: out of memory") }
        handle = opened
        // CREATE … IF NOT EXISTS and the like send notices, which libpq would print to stderr.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        guard PQstatus(handle) == CONNECTION_OK else { throw connectionError("connecting") }
    }

    deinit { PQfinish(handle) }

    var isUsable: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Reconnects with the same parameters, after the server went away and came back.
    func reset() throws(LedgerError) {
        PQreset(handle)
        guard PQstatus(handle) == CONNECTION_OK else { throw connectionError("reconnecting") }
    }

    func query(_ sql: String, _ parameters: [SQLValue]) throws(LedgerError) -> [SQLRow] {
        var texts: [String?] = []
        texts.reserveCapacity(parameters.count)
        for parameter in parameters {
            switch parameter {
            case .null: texts.append(nil)
            case .integer(let number): texts.append(String(number))
            case .text(let text):
                try checkStorable(text)
                texts.append(text)
            }
        }
        // Parameters travel apart from the SQL text, in text format, typed by the server from their context.
        let sent = withOptionalCStringArray(texts) { values in
            PQexecParams(handle, sql, Int32(texts.count), nil, values, nil, nil, 0)
        }
        guard let result = sent else { throw connectionError("sending a statement") }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK:
            return []
        case PGRES_TUPLES_OK:
            let rowCount = PQntuples(result)
            let columnCount = PQnfields(result)
            var rows: [SQLRow] = []
            rows.reserveCapacity(Int(rowCount))
            for row in 0..<rowCount {
                var values: [SQLValue] = []
                values.reserveCapacity(Int(columnCount))
                for column in 0..<columnCount {
                    if PQgetisnull(result, row, column) != 0 {
                        values.append(.null)
                    } else {
                        values.append(.text(String(cString: PQgetvalue(result, row, column))))
                    }
                }
                rows.append(SQLRow(values: values))
            }
            return rows
        default:
            throw statementError(result)
        }
    }

    private func connectionError(_ operation: String) -> LedgerError {
        LedgerError(.unavailable, "PostgreSQL \(operation): \(Self.firstLine(String(cString: PQerrorMessage(handle))))")
    }

    private func statementError(_ result: OpaquePointer) -> LedgerError {
        let state = PQresultErrorField(result, receiptd_pg_diag_sqlstate).map { String(cString: $0) } ?? ""
        // The primary message only: DETAIL lines can quote the values of a row.
        let reason = PQresultErrorField(result, receiptd_pg_diag_message_primary).map { String(cString: $0) }
            ?? Self.firstLine(String(cString: PQerrorMessage(handle)))
        let code: LedgerError.Code
        if PQstatus(handle) != CONNECTION_OK || state.isEmpty
            || ["08", "53", "57", "58", "40"].contains(where: state.hasPrefix)
        {
            // Lost connection, shutdown, out of resources, deadlock or serialization failure: the store, not the call.
            code = .unavailable
        } else if state.hasPrefix("22") || state.hasPrefix("23") {
            code = .invalidData
        } else {
            code = .queryFailed
        }
        return LedgerError(code, "PostgreSQL: \(reason)" + (state.isEmpty ? "" : " (SQLSTATE \(state))"))
    }

    private static func firstLine(_ message: String) -> String {
        message.split(whereSeparator: \.isNewline).first.map(String.init) ?? "unknown error"
    }
}

/// Lends `body` a NULL-terminated array of C strings copied from `strings`.
private func withCStringArray<Result>(
    _ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> Result
) -> Result {
    withOptionalCStringArray(strings.map(Optional.some)) { body($0) }
}

/// Lends `body` an array of C strings (nil stays a null pointer) followed by one null pointer.
private func withOptionalCStringArray<Result>(
    _ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> Result
) -> Result {
    let copies: [UnsafeMutablePointer<CChar>?] = strings.map { string in
        guard let string else { return nil }
        guard let copy = strdup(string) else { fatalError("strdup: out of memory") }
        return copy
    }
    defer { for copy in copies { free(copy) } }
    let pointers = copies.map { UnsafePointer($0) } + [nil]
    return pointers.withUnsafeBufferPointer { buffer in body(buffer.baseAddress!) }
}
