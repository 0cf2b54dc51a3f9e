internal import CPostgres
internal import Dispatch
internal import Glibc

/// One libpq connection; the only owner of a `PGconn`.
///
/// libpq allows one thread at a time per connection; the pool lends each to one caller, which is what makes the
/// `@unchecked Sendable` sound.
final class PostgresConnection: PooledConnection, @unchecked Sendable {
    private let handle: OpaquePointer
    /// Kept to mask its password in libpq's messages, which may quote parts of a malformed one.
    private let connectionString: String
    /// When the statements of the current borrower must have been answered; set by whoever borrows the connection.
    var deadline = DispatchTime.distantFuture
    /// A statement left unanswered leaves libpq mid-protocol: such a connection is closed, never reused.
    private var abandoned = false
    /// Statements parsed and planned once on this connection, by SQL text: the server otherwise spends more time
    /// parsing and planning the ledger's short statements than running them.
    private var preparedNames: [String: String] = [:]
    /// Statements sent ahead of the next one (``executeWithNext(_:_:)``).
    private var sentWithNext: [SQLStatement] = []
    /// Beyond this many, statements go unnamed: SQL built for a number of ids must not fill the server's memory.
    static let maximumPreparedStatements = 128

    /// Connects within `deadline` (`timeout` from now by default).
    ///
    /// - Parameter timeout: `store_timeout`, sent as the server's `statement_timeout` unless the connection string
    ///   sets one, so the server too stops work nobody waits for any more.
    init(
        connectionString: String, timeout: Double = LedgerConfiguration.defaultTimeout, deadline: DispatchTime? = nil
    ) throws(LedgerError) {
        let deadline = deadline ?? .now() + timeout
        // The caller's string is expanded in the dbname slot: the keywords after it add to it and win over it, the
        // ones before it are defaults it may override. Keepalives find a database host that vanished (a pooled
        // connection would otherwise wait for the operating system's TCP timeout, minutes); they cannot find a
        // server that is frozen but whose kernel still answers, which the deadline on every wait handles.
        var keywords = ["keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout"]
        var values = ["1", "5", "2", "3", "10000"]
        keywords += ["dbname", "client_encoding", "fallback_application_name"]
        values += [connectionString, "UTF8", "receiptd"]
        if let options = Self.options(addingStatementTimeout: timeout, to: connectionString) {
            keywords.append("options")
            values.append(options)
        }
        let started = withCStringArray(keywords) { keywords in
            withCStringArray(values) { values in PQconnectStartParams(keywords, values, 1) }
        }
        guard let started else { throw LedgerError(.unavailable, "PostgreSQL: out of memory") }
        handle = started
        self.connectionString = connectionString
        // CREATE … IF NOT EXISTS and the like send notices, which libpq would print to stderr.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        guard PQstatus(handle) != CONNECTION_BAD else { throw connectionError("connecting") }
        try awaitConnection("connecting", until: deadline) { PQconnectPoll($0) }
    }

    deinit { PQfinish(handle) }

    var isUsable: Bool { !abandoned && PQstatus(handle) == CONNECTION_OK }

    /// Reconnects with the same parameters within `deadline`, after the server went away and came back.
    func reset() throws(LedgerError) {
        // A new session knows none of the old one's prepared statements, nor the old transaction's pending ones.
        preparedNames = [:]
        sentWithNext = []
        guard PQresetStart(handle) == 1 else { throw connectionError("reconnecting") }
        try awaitConnection("reconnecting", until: deadline) { PQresetPoll($0) }
    }

    /// Drives libpq's non-blocking connection state machine: a blocking connect would wait on a frozen server for as
    /// long as it stays frozen.
    private func awaitConnection(
        _ operation: String, until deadline: DispatchTime, _ poll: (OpaquePointer) -> PostgresPollingStatusType
    ) throws(LedgerError) {
        var status = PGRES_POLLING_WRITING
        while status != PGRES_POLLING_OK {
            switch status {
            case PGRES_POLLING_READING:
                guard awaitSocket(POLLIN, until: deadline) else { throw abandon("\(operation): no answer") }
            case PGRES_POLLING_WRITING:
                guard awaitSocket(POLLOUT, until: deadline) else { throw abandon("\(operation): no answer") }
            default:
                throw connectionError(operation)
            }
            status = poll(handle)
        }
        // From here on libpq never blocks: every wait is the deadline-bounded poll below.
        guard PQsetnonblocking(handle, 1) == 0 else { throw connectionError(operation) }
    }

    /// Whether the socket became ready for `events` before `deadline`.
    private func awaitSocket(_ events: Int32, until deadline: DispatchTime) -> Bool {
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(events), revents: 0)
        while true {
            let now = DispatchTime.now()
            guard now < deadline else { return false }
            let remaining = (deadline.uptimeNanoseconds - now.uptimeNanoseconds) / 1_000_000
            let ready = Glibc.poll(&descriptor, 1, Int32(clamping: max(1, remaining)))
            if ready > 0 { return true }
            if ready < 0 && errno != EINTR { return true }  // libpq's next call reports what is wrong
        }
    }

    /// The connection gives up on the server: nothing more may be sent on it.
    private func abandon(_ what: String) -> LedgerError {
        abandoned = true
        return LedgerError(.unavailable, "PostgreSQL \(what) within store_timeout", reason: .timeout)
    }

    func query(_ sql: String, _ parameters: [SQLValue]) throws(LedgerError) -> [SQLRow] {
        try queries([SQLStatement(sql, parameters)]).first ?? []
    }

    func executeWithNext(_ sql: String, _ parameters: [SQLValue]) throws(LedgerError) {
        guard !abandoned else { throw LedgerError(.unavailable, "PostgreSQL: connection abandoned", reason: .timeout) }
        sentWithNext.append(SQLStatement(sql, parameters))
    }

    func queries(_ statements: [SQLStatement]) throws(LedgerError) -> [[SQLRow]] {
        guard !abandoned else { throw LedgerError(.unavailable, "PostgreSQL: connection abandoned", reason: .timeout) }
        var waiting = sentWithNext
        sentWithNext = []
        if !waiting.isEmpty, let first = statements.first, Self.isRollback(first.sql) {
            // A pipeline skips everything after a failure up to its end: a rollback sent behind a failing statement
            // would not run, and the transaction would stay open and aborted. What it undoes goes first, on its own,
            // and its failure, undone with it, does not matter.
            _ = try? pipeline(waiting)
            waiting = []
        }
        guard waiting.isEmpty && statements.count == 1 else {
            return Array(try pipeline(waiting + statements).suffix(statements.count))
        }
        let statement = statements[0]
        let (name, texts) = try prepare(statement)
        let sent = send(statement, name: name, texts: texts)
        guard sent == 1 else { throw connectionError("sending a statement") }
        try flush()
        let result = try awaitResult()
        defer { PQclear(result) }
        return [try rows(of: result)]
    }

    /// Runs `statements` in libpq's pipeline mode: all sent, one sync, then every answer read.
    private func pipeline(_ statements: [SQLStatement]) throws(LedgerError) -> [[SQLRow]] {
        // Statements are prepared first, each in its own round trip, once per connection: a prepare inside the
        // pipeline would need its name before its answer says whether it exists.
        var prepared: [(name: String?, texts: [String?])] = []
        prepared.reserveCapacity(statements.count)
        for statement in statements { prepared.append(try prepare(statement)) }
        guard PQenterPipelineMode(handle) == 1 else { throw connectionError("entering pipeline mode") }
        do throws(LedgerError) {
            return try exchange(statements, prepared)
        } catch where PQpipelineStatus(handle) != PQ_PIPELINE_OFF {
            // Left mid-pipeline, libpq still owes answers nobody will read.
            abandoned = true
            throw error
        }
    }

    private func exchange(
        _ statements: [SQLStatement], _ prepared: [(name: String?, texts: [String?])]
    ) throws(LedgerError) -> [[SQLRow]] {
        for (statement, (name, texts)) in zip(statements, prepared) {
            guard send(statement, name: name, texts: texts) == 1 else { throw connectionError("sending a statement") }
        }
        guard PQpipelineSync(handle) == 1 else { throw connectionError("sending a statement") }
        try flush()
        var results: [[SQLRow]] = []
        results.reserveCapacity(statements.count)
        var failure: LedgerError?
        for _ in statements {
            let result = try awaitResult()
            defer { PQclear(result) }
            // The statements after a failed one come back aborted, unrun.
            guard failure == nil else {
                results.append([])
                continue
            }
            do throws(LedgerError) {
                results.append(try rows(of: result))
            } catch {
                failure = error
                results.append([])
            }
        }
        let sync = try awaitResult(expectingMore: false)
        let synced = PQresultStatus(sync) == PGRES_PIPELINE_SYNC
        PQclear(sync)
        guard synced, PQexitPipelineMode(handle) == 1 else { throw connectionError("ending a pipeline") }
        if let failure { throw failure }
        return results
    }

    /// The statement's prepared name (nil to send it unnamed) and its parameters as text.
    private func prepare(_ statement: SQLStatement) throws(LedgerError) -> (name: String?, texts: [String?]) {
        var texts: [String?] = []
        texts.reserveCapacity(statement.parameters.count)
        for parameter in statement.parameters {
            switch parameter {
            case .null: texts.append(nil)
            case .integer(let number): texts.append(String(number))
            case .text(let text):
                try checkStorable(text)
                texts.append(text)
            }
        }
        return (try preparedName(statement.sql, parameterCount: texts.count), texts)
    }

    /// Queues the statement in libpq; 1 when it was accepted.
    private func send(_ statement: SQLStatement, name: String?, texts: [String?]) -> Int32 {
        // Parameters travel apart from the SQL text, in text format, typed by the server from their context.
        withOptionalCStringArray(texts) { values in
            if let name {
                PQsendQueryPrepared(handle, name, Int32(texts.count), values, nil, nil, 0)
            } else {
                PQsendQueryParams(handle, statement.sql, Int32(texts.count), nil, values, nil, nil, 0)
            }
        }
    }

    private func rows(of result: OpaquePointer) throws(LedgerError) -> [SQLRow] {
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

    private static func isRollback(_ sql: String) -> Bool { sql.prefix(8).uppercased() == "ROLLBACK" }

    /// The name `sql` is prepared under on this connection, preparing it first; nil for statements sent unnamed:
    /// transaction control (which may have to run in an aborted transaction, where the server refuses to prepare
    /// anything) and any beyond ``maximumPreparedStatements``.
    private func preparedName(_ sql: String, parameterCount: Int) throws(LedgerError) -> String? {
        if let name = preparedNames[sql] { return name }
        guard preparedNames.count < Self.maximumPreparedStatements,
            ["SELECT", "INSERT", "UPDATE", "DELETE", "WITH"].contains(
                where: sql.drop(while: \.isWhitespace).prefix(6).uppercased().hasPrefix)
        else { return nil }
        let name = "receiptd_\(preparedNames.count)"
        guard PQsendPrepare(handle, name, sql, Int32(parameterCount), nil) == 1 else {
            throw connectionError("preparing a statement")
        }
        let result = try awaitResult()
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COMMAND_OK else { throw statementError(result) }
        preparedNames[sql] = name
        return name
    }

    /// Sends what libpq buffered, waiting on the socket until `deadline`.
    private func flush() throws(LedgerError) {
        while true {
            let flushed = PQflush(handle)
            if flushed == 0 { return }
            guard flushed == 1 else { throw connectionError("sending a statement") }
            guard awaitSocket(POLLIN | POLLOUT, until: deadline) else {
                throw abandon("sending a statement: no answer")
            }
            guard PQconsumeInput(handle) == 1 else { throw connectionError("sending a statement") }
        }
    }

    /// Collects one statement's result, waiting on the socket until `deadline`; with `expectingMore` (every result but
    /// a pipeline's sync) also reads up to the null result that ends it.
    private func awaitResult(expectingMore: Bool = true) throws(LedgerError) -> OpaquePointer {
        var first: OpaquePointer?
        while true {
            while PQisBusy(handle) == 1 {
                guard awaitSocket(POLLIN, until: deadline) else {
                    if let first { PQclear(first) }
                    throw abandon("statement: no answer")
                }
                guard PQconsumeInput(handle) == 1 else {
                    if let first { PQclear(first) }
                    throw connectionError("reading an answer")
                }
            }
            guard let next = PQgetResult(handle) else { break }
            if first == nil { first = next } else { PQclear(next) }
            if !expectingMore { break }
        }
        guard let first else { throw connectionError("reading an answer") }
        return first
    }

    /// Fails `invalid_configuration` with libpq's own words about the bad part (any password masked) when libpq
    /// cannot parse the connection string: no amount of retrying would connect with it. A plain word (no `=`, not a
    /// URI) is a database name, as libpq takes it.
    static func checkParses(_ connectionString: String) throws(LedgerError) {
        let isURI = connectionString.hasPrefix("postgresql://") || connectionString.hasPrefix("postgres://")
        guard isURI || connectionString.contains("=") else { return }
        var message: UnsafeMutablePointer<CChar>?
        guard let parsed = PQconninfoParse(connectionString, &message) else {
            defer { if let message { PQfreemem(message) } }
            let reason = message.map { firstLine(String(cString: $0)) } ?? "out of memory"
            throw LedgerError(
                .invalidConfiguration,
                "libpq cannot parse the PostgreSQL connection string: "
                    + "\(redactingSecrets(of: connectionString, in: reason)); fix the store's \"postgres\" value (or "
                    + "RECEIPTD_STORE_POSTGRES)")
        }
        PQconninfoFree(parsed)
    }

    /// The connection string's `options` with `statement_timeout` added, or nil when it sets its own: that `options`
    /// keyword comes after the connection string and so replaces what it says.
    static func options(addingStatementTimeout timeout: Double, to connectionString: String) -> String? {
        let setting = "-c statement_timeout=\(Int64((timeout * 1000).rounded(.up)))"
        guard let parsed = PQconninfoParse(connectionString, nil) else { return setting }
        defer { PQconninfoFree(parsed) }
        var option = parsed
        while let keyword = option.pointee.keyword {
            if String(cString: keyword) == "options", let value = option.pointee.val {
                let existing = String(cString: value)
                return existing.contains("statement_timeout") ? nil : existing + " " + setting
            }
            option += 1
        }
        return setting
    }

    private func connectionError(_ operation: String) -> LedgerError {
        let message = redactingSecrets(
            of: connectionString, in: Self.firstLine(String(cString: PQerrorMessage(handle))))
        return LedgerError(.unavailable, "PostgreSQL \(operation): \(message)", reason: .unreachable)
    }

    private func statementError(_ result: OpaquePointer) -> LedgerError {
        let state = PQresultErrorField(result, receiptd_pg_diag_sqlstate).map { String(cString: $0) } ?? ""
        // The primary message only: DETAIL lines can quote the values of a row.
        let reason = PQresultErrorField(result, receiptd_pg_diag_message_primary).map { String(cString: $0) }
            ?? redactingSecrets(of: connectionString, in: Self.firstLine(String(cString: PQerrorMessage(handle))))
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
        return LedgerError(
            code, "PostgreSQL: \(reason)" + (state.isEmpty ? "" : " (SQLSTATE \(state))"),
            reason: PQstatus(handle) != CONNECTION_OK || state.isEmpty ? .unreachable : Self.reason(sqlState: state))
    }

    /// What a SQLSTATE says about the database (PostgreSQL's appendix A, "Error Codes").
    static func reason(sqlState state: String) -> LedgerError.Reason {
        switch state {
        case "53100": .diskFull
        case "25006": .readOnly
        case "XX001", "XX002": .corrupt
        case "57014": .timeout
        case "55P03", "40001", "40P01": .locked
        case _ where state.hasPrefix("08") || state.hasPrefix("57P"): .unreachable
        default: .error
        }
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
