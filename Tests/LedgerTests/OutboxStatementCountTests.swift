import TestSupport
import Testing

@testable import Ledger

/// What a notification's write costs in statements once events are on (issue 25's ingest speed): the outbox adds the
/// reads its rules need and the rows it stores, nothing more. SQLite only: on PostgreSQL the after-state is read
/// again under the streams' lock (see `LedgerStatements.recordEvents`), and a wrapped connection would hide which
/// database it is.
struct OutboxStatementCountTests {
    typealias E = AppleEvents

    /// Every statement the ledger runs on one SQLite connection, transaction control included.
    final class CountingConnection: SQLConnection {
        let base: any SQLConnection
        var statements: [String] = []

        init(_ base: any SQLConnection) { self.base = base }

        func query(_ sql: String, _ parameters: [SQLValue]) throws(LedgerError) -> [SQLRow] {
            statements.append(sql)
            return try base.query(sql, parameters)
        }
    }

    /// One connection, one transaction at a time: each test uses it from its one thread only, which is what makes the
    /// `@unchecked Sendable` sound.
    final class CountingDatabase: LedgerDatabase, @unchecked Sendable {
        let connection: CountingConnection

        init(_ connection: CountingConnection) { self.connection = connection }

        func write<Result: Sendable>(
            _ body: @escaping @Sendable (any SQLConnection) throws(LedgerError) -> Result
        ) throws(LedgerError) -> Result {
            try connection.inTransaction(begin: "BEGIN IMMEDIATE") { () throws(LedgerError) in try body(connection) }
        }

        func read<Result>(
            _ body: (any SQLConnection) throws(LedgerError) -> Result
        ) throws(LedgerError) -> Result {
            try connection.inTransaction(begin: "BEGIN") { () throws(LedgerError) in try body(connection) }
        }

        /// The statements run since the last call.
        func takeStatements() -> [String] {
            defer { connection.statements = [] }
            return connection.statements
        }
    }

    /// One event per change of an original, as the webhook rules give for a renewal.
    static let oneEventPerChange = OutboxRules(
        events: { change in
            [
                EventDraft(
                    type: "CHANGED", dedupeKey: "CHANGED:\(change.originalTransactionID):\(change.time)",
                    account: change.accountAfter, originalTransactionID: change.originalTransactionID,
                    bundleID: "com.example.app", environment: "Sandbox", bodyMembers: ""
                )
            ]
        },
        subscribers: { _ in ["backend"] },
        formatTime: { String($0) }
    )

    static func records(_ outbox: OutboxRules, clock: @escaping LedgerClock) throws -> (
        LedgerRecords<CountingDatabase>, CountingDatabase
    ) {
        let location = try DatabaseLocation.fresh(.sqlite)
        _ = try location.open()
        let database = CountingDatabase(CountingConnection(try location.rawConnection()))
        return (LedgerRecords(database: database, clock: clock, linkRules: .transferAlways, outbox: outbox), database)
    }

    /// BEGIN and COMMIT, the notification, its transaction and source, its renewal info (read, locked, replaced):
    /// the same with and without events.
    static let statementsWithoutEvents = 8

    @Test
    func aRenewalWithAnEvent_readsTheFactsOnce_andStoresTheEventInThreeStatements() throws {
        let (records, database) = try Self.records(Self.oneEventPerChange, clock: TestClock.counting())
        _ = try records.record(E.subscribed)
        _ = database.takeStatements()
        _ = try records.record(E.didRenew())
        let statements = database.takeStatements()

        let events = try records.events(OutboxQuery(limit: 10))
        #expect(events.map(\.sequence) == [2, 1])
        #expect(events.first?.deliveries.map(\.webhook) == ["backend"])
        // Before: the original's transactions, renewal info, notifications and owner. After: derived from them and
        // the write's own rows. Then the stream's number, the event and its delivery.
        #expect(statements.count == Self.statementsWithoutEvents + 4 + 3, "\(statements.joined(separator: "\n--\n"))")
    }

    @Test
    func aRenewalWithoutWebhooks_runsOnlyItsOwnStatements() throws {
        let (records, database) = try Self.records(.none, clock: TestClock.fixed)
        _ = try records.record(E.subscribed)
        _ = database.takeStatements()
        _ = try records.record(E.didRenew())
        #expect(database.takeStatements().count == Self.statementsWithoutEvents)
    }
}
