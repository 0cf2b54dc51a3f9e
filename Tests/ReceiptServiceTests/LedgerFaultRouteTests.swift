import Dispatch
import Foundation
import HTTP1Server
import JSONText
@testable import Ledger
import ReceiptEngine
import ReceiptForge
import Synchronization
import TestSupport
import Testing

@testable import ReceiptService

/// A store that counts the calls requests make (the background task's pings aside) and can hold notification writes
/// until told to go on: what shows that requests stop touching a database known to be gone, and that ledger work
/// takes a bounded number of threads.
final class ObservedStore: LedgerStore {
    let base: any LedgerStore
    let requestCalls = Atomic<Int>(0)
    let heldWrites = Mutex<DispatchSemaphore?>(nil)

    init(_ base: any LedgerStore) { self.base = base }

    private func count() { requestCalls.add(1, ordering: .relaxed) }

    func record(_ notification: NotificationFacts) throws(LedgerError) -> NotificationWrite {
        count()
        if let gate = heldWrites.withLock({ $0 }) {
            gate.wait()
            gate.signal()
        }
        return try base.record(notification)
    }
    func record(transactions: [TransactionFacts], source: TransactionSource) throws(LedgerError) {
        count()
        try base.record(transactions: transactions, source: source)
    }
    func record(renewal: RenewalFacts, source: TransactionSource) throws(LedgerError) {
        count()
        try base.record(renewal: renewal, source: source)
    }
    func subscription(originalTransactionID: String) throws(LedgerError) -> SubscriptionFacts? {
        count()
        return try base.subscription(originalTransactionID: originalTransactionID)
    }
    func transaction(id: String) throws(LedgerError) -> TransactionRecord? {
        count()
        return try base.transaction(id: id)
    }
    func claim(transactionID: String, account: String, at time: Int64) throws(LedgerError) -> ClaimOutcome {
        count()
        return try base.claim(transactionID: transactionID, account: account, at: time)
    }
    func transactions(originalTransactionIDs: [String]) throws(LedgerError) -> [TransactionFacts] {
        count()
        return try base.transactions(originalTransactionIDs: originalTransactionIDs)
    }
    func renewalInfos(originalTransactionIDs: [String]) throws(LedgerError) -> [RenewalFacts] {
        count()
        return try base.renewalInfos(originalTransactionIDs: originalTransactionIDs)
    }
    func notification(uuid: String) throws(LedgerError) -> StoredNotification? {
        count()
        return try base.notification(uuid: uuid)
    }
    func ping() throws(LedgerError) { try base.ping() }
    func checkWritable() throws(LedgerError) { try base.checkWritable() }
    func checkIntegrity() throws(LedgerError) { try base.checkIntegrity() }
    func close() throws(LedgerError) { try base.close() }
    func syncCursor(bundleID: String, environment: String) throws(LedgerError) -> ServerAPISyncCursor? {
        try base.syncCursor(bundleID: bundleID, environment: environment)
    }
    func syncCursors() throws(LedgerError) -> [ServerAPISyncCursor] { try base.syncCursors() }
    func record(syncCursor cursor: ServerAPISyncCursor) throws(LedgerError) { try base.record(syncCursor: cursor) }
    func acquireSyncLease(bundleID: String, environment: String, holder: String, now: Int64, until: Int64)
        throws(LedgerError) -> Bool
    {
        try base.acquireSyncLease(bundleID: bundleID, environment: environment, holder: holder, now: now, until: until)
    }
    func releaseSyncLease(bundleID: String, environment: String, holder: String) throws(LedgerError) {
        try base.releaseSyncLease(bundleID: bundleID, environment: environment, holder: holder)
    }
    func syncLease(bundleID: String, environment: String) throws(LedgerError) -> ServerAPISyncLease? {
        try base.syncLease(bundleID: bundleID, environment: environment)
    }
    func schemaVersion() throws(LedgerError) -> Int { try base.schemaVersion() }
    func counts() throws(LedgerError) -> LedgerCounts { try base.counts() }
    func registerAppAccountToken(_ token: String, account: String, at time: Int64) throws(LedgerError)
        -> AppAccountTokenOutcome
    {
        count()
        return try base.registerAppAccountToken(token, account: account, at: time)
    }
    func link(originalTransactionIDs: [String], to account: String, source: AccountLinkSource, at time: Int64)
        throws(LedgerError) -> [String: AccountLinkOutcome]
    {
        count()
        return try base.link(originalTransactionIDs: originalTransactionIDs, to: account, source: source, at: time)
    }
    func account(_ account: String) throws(LedgerError) -> AccountSnapshot? {
        count()
        return try base.account(account)
    }
    func accountRecord(_ account: String) throws(LedgerError) -> AccountRecord? {
        count()
        return try base.accountRecord(account)
    }
    func owner(originalTransactionID: String) throws(LedgerError) -> String? {
        count()
        return try base.owner(originalTransactionID: originalTransactionID)
    }
    func deleteAccount(_ account: String) throws(LedgerError) -> Bool {
        count()
        return try base.deleteAccount(account)
    }
    func subscriptionGroup(productID: String, bundleID: String) throws(LedgerError) -> String? {
        count()
        return try base.subscriptionGroup(productID: productID, bundleID: bundleID)
    }
    // The outbox is the dispatcher's, never a request's: not counted.
    func claimDeliveries(webhook: String, holder: String, now: Int64, leaseUntil: Int64, limit: Int)
        throws(LedgerError) -> [ClaimedDelivery]
    {
        try base.claimDeliveries(webhook: webhook, holder: holder, now: now, leaseUntil: leaseUntil, limit: limit)
    }
    func finishDelivery(
        eventID: String, webhook: String, holder: String, result: DeliveryResult, at time: Int64
    ) throws(LedgerError) -> Bool {
        try base.finishDelivery(eventID: eventID, webhook: webhook, holder: holder, result: result, at: time)
    }
    func retryNow(webhook: String, at time: Int64) throws(LedgerError) -> Int {
        try base.retryNow(webhook: webhook, at: time)
    }
    func releaseStrandedDeliveries(at time: Int64) throws(LedgerError) -> Int {
        try base.releaseStrandedDeliveries(at: time)
    }
    func events(_ query: OutboxQuery) throws(LedgerError) -> [OutboxEvent] { try base.events(query) }
    func replay(_ replay: OutboxReplay, at time: Int64) throws(LedgerError) -> Int { try base.replay(replay, at: time) }
    func webhookBacklogs() throws(LedgerError) -> [WebhookBacklog] { try base.webhookBacklogs() }
    func pruneDeliveredEvents(deliveredBefore time: Int64) throws(LedgerError) -> Int {
        try base.pruneDeliveredEvents(deliveredBefore: time)
    }
}

/// Log lines, captured.
final class CapturedLog: Sendable {
    let lines = Mutex<[String]>([])
    var log: ServiceLog { ServiceLog(format: .text) { line in self.lines.withLock { $0.append(line) } } }

    func count(_ event: String) -> Int { lines.withLock { $0.filter { $0.contains(" \(event)") }.count } }
    func first(_ event: String) -> String? { lines.withLock { $0.first { $0.contains(" \(event)") } } }
}

/// What the service answers while its database hangs or refuses writes, and that one fault costs one wait.
struct LedgerFaultRouteTests {
    typealias E = SignedEvents

    /// A distinct notification per number, so that each delivery is a real write.
    static func renewal(_ number: Int) throws -> String {
        try E.notification(
            "DID_RENEW", signed: -9 + Double(number) / 1000, uuid: "fault-\(number)",
            transaction: E.transaction("7001", purchased: -9, expires: 21, signed: -9 + Double(number) / 1000))
    }

    static func verifyReceipt(_ validate: HTTPRequest) -> HTTPRequest {
        post("/sandbox/verifyReceipt", contentType: nil, text: "{\"receipt-data\": \"\(base64(validate.body))\"}")
    }

    /// Waits for the ledger's background task to reach a state (it tries the database with back-off).
    static func await(_ condition: () -> Bool) {
        for _ in 0..<1000 where !condition() { usleep(10_000) }
    }

    @Test(.enabled(if: !Backend.skipPostgres))
    func frozenPostgres_answersWithoutTheLedger_oneWaitForAll_andRecoversAfterThaw() throws {
        // Its own cluster: freezing the shared one would hang the tests running beside this one.
        let cluster = try PostgresCluster()
        defer {
            try? cluster.thaw()
            PostgresCluster.stopPostmaster(directory: cluster.directory)
        }
        let connection = try cluster.newDatabase()
        let opened = Mutex<ObservedStore?>(nil)
        let ledger = PurchaseLedger(opening: { () throws(LedgerError) in
            let store = ObservedStore(
                try PostgresLedger(connectionString: connection, timeout: 1, clock: TestClock.fixed))
            opened.withLock { $0 = store }
            return store
        })
        let captured = CapturedLog()
        ledger.observeHealth(captured.log.ledgerHealth)
        try ledger.openNow()
        let store = try #require(opened.withLock { $0 })
        let routes = LedgerService.routes(ledger)
        #expect(routes.deliver(try E.subscribed()).status == 200)
        let receipt = try ReceiptLedgerRouteTests.receipt()

        try cluster.freeze()
        // The first request (or the background heartbeat) waits store_timeout and finds the database frozen.
        let first = routes.deliver(try Self.renewal(1))
        #expect(first.status == 503)
        #expect(first.errorCode == "store_unavailable")
        Self.await { ledger.health.reason != nil }
        #expect(ledger.health.reason == .timeout)
        let callsWhenKnown = store.requestCalls.load(ordering: .relaxed)

        let ready = routes.handle(get("/readyz"), on: .main)
        #expect(ready.status == 503)
        #expect(ready.json?["status"] == .string("not_ready"))
        #expect(ready.json?["store"] == .string("unavailable"))
        #expect(ready.json?["reason"] == .string("timeout"))
        let validated = routes.handle(receipt, on: .main)
        #expect(validated.status == 200)
        #expect(validated.json?["ledger"] == .string("unavailable"))
        #expect(routes.handle(Self.verifyReceipt(receipt), on: .main).json?["status"] == .integer(21005))
        #expect(routes.deliver(try Self.renewal(2)).errorCode == "store_unavailable")
        for path in ["/v1/subscriptions/7000", "/v1/transactions/7000"] {
            #expect(routes.handle(get(path), on: .main).errorCode == "store_unavailable", "\(path)")
        }
        #expect(routes.claim("7000", account: "alice").errorCode == "store_unavailable")
        // Known unavailable: none of those requests went to the database (each would have waited store_timeout).
        #expect(store.requestCalls.load(ordering: .relaxed) == callsWhenKnown)

        try cluster.thaw()
        Self.await { routes.handle(get("/readyz"), on: .main).status == 200 }
        #expect(routes.handle(get("/readyz"), on: .main).json?["status"] == .string("ready"))
        #expect(routes.deliver(try Self.renewal(2)).status == 200)
        #expect(routes.handle(receipt, on: .main).json?["ledger"] == .string("available"))
        #expect(captured.count("ledger unavailable") == 1)
        #expect(captured.first("ledger unavailable")?.contains("reason=timeout") == true)
        #expect(captured.count("ledger available") == 1)
    }

    @Test func ledgerWorkBeyondTheBound_answersStoreBusyAtOnce_withoutATurn_andStaysReady() throws {
        let store = ObservedStore(try makeLedger(.sqlite))
        let ledger = PurchaseLedger(store: store, maximumConcurrentWork: 2)
        let routes = LedgerService.routes(ledger)
        let gate = DispatchSemaphore(value: 0)
        store.heldWrites.withLock { $0 = gate }
        let answers = Mutex<[Int]>([])
        let done = DispatchGroup()
        for number in 1...2 {
            let payload = try Self.renewal(number)
            DispatchQueue.global().async(group: done) {
                let status = Int(routes.deliver(payload).status.code)
                answers.withLock { $0.append(status) }
            }
        }
        Self.await { ledger.workInFlight == 2 }
        #expect(ledger.workInFlight == 2)

        let refused = routes.deliver(try Self.renewal(3))
        #expect(refused.status == 503)
        #expect(refused.errorCode == "store_busy")
        #expect(refused.headers.values(for: .retryAfter) == ["1"])
        #expect(routes.handle(get("/readyz"), on: .main).status == 200)
        #expect(store.requestCalls.load(ordering: .relaxed) == 2)
        // Too much work at once says nothing about the database.
        #expect(ledger.health == .available)

        gate.signal()
        done.wait()
        #expect(answers.withLock { $0 } == [200, 200])
        #expect(routes.deliver(try Self.renewal(3)).status == 200)
    }

    /// How a SQLite database is made to refuse writes as a read-only volume or another process's long transaction
    /// would (tests run as root, which writes through permission bits); each returns what gives it back. A full disk
    /// is the Ledger tests' (`PRAGMA max_page_count` stops new pages, not the rewrite that readiness checks with).
    enum WriteFault: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case readOnly = "read_only"
        case locked = "locked"

        var testDescription: String { rawValue }

        func begin(_ ledger: SQLiteLedger, path: String) throws -> () throws -> Void {
            switch self {
            case .readOnly:
                try ledger.executeOnWriter("PRAGMA query_only = 1")
                return { try ledger.executeOnWriter("PRAGMA query_only = 0") }
            case .locked:
                let other = try SQLiteConnection(path: path)
                try other.execute("BEGIN IMMEDIATE")
                return { try other.execute("ROLLBACK") }
            }
        }
    }

    @Test(arguments: WriteFault.allCases)
    func failingWrites_turnReadinessAway_withTheReasonLoggedOnce_untilWritesWork(_ fault: WriteFault) throws {
        let path = Scratch.newPath("fault.sqlite")
        let sqlite = try SQLiteLedger(path: path, timeout: 0.3, clock: TestClock.fixed)
        let ledger = PurchaseLedger(store: sqlite)
        let captured = CapturedLog()
        ledger.observeHealth(captured.log.ledgerHealth)
        let routes = LedgerService.routes(ledger)
        #expect(routes.deliver(try E.subscribed()).status == 200)

        let end = try fault.begin(sqlite, path: path)
        for number in 1...3 {
            #expect(routes.deliver(try Self.renewal(number)).errorCode == "store_unavailable")
        }
        let ready = routes.handle(get("/readyz"), on: .main)
        #expect(ready.status == 503)
        #expect(ready.json?["reason"] == .string(fault.rawValue))
        #expect(captured.count("ledger unavailable") == 1)
        #expect(captured.first("ledger unavailable")?.contains("reason=\(fault.rawValue)") == true)
        // SQLite's own words and extended result code, for the operator.
        #expect(captured.first("ledger unavailable")?.contains("SQLite") == true)
        // Reads still work, and a successful read does not make the ledger ready again: only a write does.
        #expect(routes.handle(get("/v1/subscriptions/7000"), on: .main).status == 200)
        #expect(routes.handle(get("/readyz"), on: .main).status == 503)

        try end()
        // A server that is not ready gets no traffic: the background task's own write finds that writes work again.
        Self.await { routes.handle(get("/readyz"), on: .main).status == 200 }
        #expect(routes.handle(get("/readyz"), on: .main).status == 200)
        #expect(routes.deliver(try Self.renewal(1000)).status == 200)
        #expect(captured.count("ledger available") == 1)
    }

    @Test func corruptFile_isNotReady_withReasonCorrupt() throws {
        let path = Scratch.newPath("corrupt.sqlite")
        try Data(repeating: 0x5A, count: 16384).write(to: URL(fileURLWithPath: path))
        let ledger = PurchaseLedger(opening: { () throws(LedgerError) in try SQLiteLedger(path: path) })
        let captured = CapturedLog()
        ledger.observeHealth(captured.log.ledgerHealth)
        let routes = LedgerService.routes(ledger)
        Self.await { ledger.health.reason == .corrupt }
        let ready = routes.handle(get("/readyz"), on: .main)
        #expect(ready.status == 503)
        #expect(ready.json?["reason"] == .string("corrupt"))
        #expect(routes.deliver(try E.subscribed()).errorCode == "store_unavailable")
        #expect(captured.count("ledger unavailable") == 1)
    }

    @Test func storeTimeout_isReadFromTheConfiguration_defaultTwoSeconds() throws {
        let parsed = try ServiceConfiguration.parse(
            Array(#"{"store_timeout": 0.5}"#.utf8), path: "x.json", baseDirectory: ".")
        #expect(parsed.storeTimeout == 0.5)
        #expect(ServiceConfiguration().storeTimeout == 2)
        for bad in [#"{"store_timeout": 0}"#, #"{"store_timeout": "2"}"#] {
            #expect(throws: ConfigurationError(.invalidValue, "")) {
                try ServiceConfiguration.parse(Array(bad.utf8), path: "x.json", baseDirectory: ".")
            }
        }
    }

    @Test func postgresDownAtStart_serves_withTheCauseLoggedOnce_andNoPassword() throws {
        var configuration = ServiceConfiguration()
        configuration.store = .postgres(
            connectionString: "host=/nonexistent-socket-directory user=app password=hunter2-secret dbname=x")
        configuration.storeTimeout = 0.5
        let ledger = configuration.makeLedger()
        let captured = CapturedLog()
        ledger.observeHealth(captured.log.ledgerHealth)
        try ledger.openNow()
        let routes = LedgerService.routes(ledger)
        #expect(routes.handle(get("/readyz"), on: .main).json?["reason"] == .string("unreachable"))
        #expect(routes.deliver(try E.subscribed()).errorCode == "store_unavailable")
        #expect(routes.deliver(try E.subscribed()).errorCode == "store_unavailable")
        #expect(captured.count("ledger unavailable") == 1)
        #expect(captured.first("ledger unavailable")?.contains("reason=unreachable") == true)
        #expect(captured.lines.withLock { $0.allSatisfy { !$0.contains("hunter2-secret") } })
    }

    @Test func shuttingDown_staysItsOwnAnswer() throws {
        let readiness = ServiceReadiness()
        readiness.markShuttingDown()
        let configuration = LedgerService.configuration
        let routes = ReceiptRoutes(
            configuration: configuration, validator: configuration.makeValidator(),
            ledger: PurchaseLedger(store: try makeLedger(.sqlite)), metrics: ServiceMetrics(), readiness: readiness)
        let ready = routes.handle(get("/readyz"), on: .main)
        #expect(ready.status == 503)
        #expect(ready.json?["status"] == .string("shutting_down"))
    }

    @Test func unknownIDs_areRememberedWithinABound() throws {
        // What the process's resident memory does is measured on a live server (Tests/e2e/test-ledger-faults.sh):
        // here, every other suite allocates in the same process at the same time.
        let ledger = PurchaseLedger(store: try makeLedger(.sqlite))
        let routes = LedgerService.routes(ledger)
        for number in 0..<50_000 {
            let id = String(repeating: "7", count: 56) + String(format: "%08d", number)
            #expect(routes.handle(get("/v1/subscriptions/\(id)"), on: .main).status == 404)
        }
        #expect(ledger.rememberedSubscriptions == 0)
    }

    @Test func boundedMemory_startsOverBeforeEitherLimit() {
        var memory = BoundedMemory<Int>(entryLimit: 1_000, byteLimit: 64 << 10)
        for number in 0..<10_000 { memory.remember(number, for: String(repeating: "x", count: 60) + "\(number)") }
        #expect(memory.count <= 1_000)
        #expect(memory.count * 64 < 64 << 10)
        var few = BoundedMemory<Int>(entryLimit: 10, byteLimit: 1 << 30)
        for number in 0..<25 { few.remember(number, for: "\(number)") }
        #expect(few.count <= 10)
        #expect(few["24"] == 24)
    }
}
