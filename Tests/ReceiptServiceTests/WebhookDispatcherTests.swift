import Foundation
import HTTP1Server
import JSONText
import Ledger
import Prometheus
import Synchronization
import Testing

@testable import ReceiptService

/// The dispatcher against live receivers on 127.0.0.1 (the project's own HTTP server) and an in-memory outbox that
/// keeps the ledger's rules: only the head of a stream is claimable, under a lease, and only when due.
@Suite(.serialized)
struct WebhookDispatcherTests {
    @Test func receiverAnswering500ThenRecovering_getsEveryEventOnce_inOrderPerStream_oneInFlightPerStream() throws {
        let receiver = try WebhookReceiver(answer: { _, _ in 500 })
        defer { receiver.stop() }
        let outbox = MemoryOutbox()
        outbox.add(webhook: "backend", streams: ["acct-a", "acct-b", "otx:1000"], eventsPerStream: 4)
        var settings = Self.fastSettings
        settings.retrySchedule.first = 50
        settings.retrySchedule.longest = 400
        let dispatcher = try WebhookDispatcher(
            webhooks: [receiver.webhook(name: "backend")], outbox: outbox, settings: settings,
            metrics: WebhookMetrics(registry: PrometheusCollectorRegistry()), log: nil, random: { 0.5 })
        defer { dispatcher.stop(within: 2) }

        #expect(waitUntil(seconds: 20) { outbox.attempts(ofHeadsOf: "backend").allSatisfy { $0 >= 2 } })
        #expect(receiver.accepted.isEmpty)
        receiver.setAnswer { _, _ in 200 }

        #expect(waitUntil(seconds: 20) { outbox.pending(webhook: "backend") == 0 })
        receiver.expectEachDeliveredOnce_inOrder(streams: ["acct-a", "acct-b", "otx:1000"], eventsPerStream: 4)
        #expect(receiver.mostInFlightOfOneStream == 1)
        #expect(receiver.badSignatures == 0)
    }

    /// Without `retryNow` each stream would wait out its back-off (about 20 s); with it, once one delivery that had
    /// failed gets through, the whole backlog goes at once.
    @Test func aDeliveryThatGetsThroughAfterFailures_makesTheBacklogDueAtOnce() throws {
        let receiver = try WebhookReceiver(answer: { _, _ in 503 })
        defer { receiver.stop() }
        let outbox = MemoryOutbox()
        let streams = ["acct-a", "acct-b", "acct-c"]
        outbox.add(webhook: "backend", streams: streams, eventsPerStream: 3)
        var settings = Self.fastSettings
        settings.retrySchedule.first = 20_000
        let dispatcher = try WebhookDispatcher(
            webhooks: [receiver.webhook(name: "backend")], outbox: outbox, settings: settings,
            metrics: WebhookMetrics(registry: PrometheusCollectorRegistry()), log: nil, random: { 0.5 })
        defer { dispatcher.stop(within: 2) }

        #expect(waitUntil(seconds: 20) { outbox.attempts(ofHeadsOf: "backend") == [1, 1, 1] })
        receiver.setAnswer { _, _ in 200 }
        outbox.makeDueNow(stream: "acct-a")

        // Well under the 16 to 24 s the other streams' back-off asked for.
        #expect(waitUntil(seconds: 10) { outbox.pending(webhook: "backend") == 0 })
        receiver.expectEachDeliveredOnce_inOrder(streams: streams, eventsPerStream: 3)
        #expect(outbox.retryNowCalls >= 1)
    }

    @Test func receiverHangingPastTheTimeout_isRetried_andEachEventDelivered() throws {
        let seen = Locked<Set<String>>([])
        // Each event's first try hangs past the webhook's timeout (the receiver's late answer reaches nobody); its
        // next one is answered.
        let receiver = try WebhookReceiver(answer: { id, _ in
            guard seen.withLock({ $0.insert(id).inserted }) else { return 200 }
            Thread.sleep(forTimeInterval: 1.5)
            return 500
        })
        defer { receiver.stop() }
        let outbox = MemoryOutbox()
        outbox.add(webhook: "backend", streams: ["acct-a", "acct-b"], eventsPerStream: 2)
        var settings = Self.fastSettings
        settings.retrySchedule.first = 50
        let registry = PrometheusCollectorRegistry()
        let dispatcher = try WebhookDispatcher(
            webhooks: [receiver.webhook(name: "backend", timeout: 0.5)], outbox: outbox, settings: settings,
            metrics: WebhookMetrics(registry: registry), log: nil, random: { 0.5 })
        defer { dispatcher.stop(within: 2) }

        #expect(waitUntil(seconds: 30) { outbox.pending(webhook: "backend") == 0 })
        receiver.expectEachDeliveredOnce_inOrder(streams: ["acct-a", "acct-b"], eventsPerStream: 2)
        let exposition = registry.emitToString()
        #expect(exposition.contains(#"receiptd_webhook_deliveries_total{webhook="backend",outcome="retry"} 4"#))
        #expect(exposition.contains(#"receiptd_webhook_deliveries_total{webhook="backend",outcome="delivered"} 4"#))
    }

    @Test func aHungWebhook_doesNotDelayAnother() throws {
        let slow = try WebhookReceiver(answer: { _, _ in
            Thread.sleep(forTimeInterval: 6)
            return 200
        })
        defer { slow.stop() }
        let fast = try WebhookReceiver(answer: { _, _ in 200 })
        defer { fast.stop() }
        let outbox = MemoryOutbox()
        let streams = (0..<10).map { "acct-\($0)" }
        outbox.add(webhook: "slow", streams: streams, eventsPerStream: 2)
        outbox.add(webhook: "fast", streams: streams, eventsPerStream: 2)
        let dispatcher = try WebhookDispatcher(
            webhooks: [slow.webhook(name: "slow", timeout: 5), fast.webhook(name: "fast")], outbox: outbox,
            settings: Self.fastSettings, metrics: WebhookMetrics(registry: PrometheusCollectorRegistry()), log: nil)
        defer { dispatcher.stop(within: 0.5) }

        #expect(waitUntil(seconds: 20) { outbox.pending(webhook: "fast") == 0 })
        // Every one of the slow receiver's tries is still hanging: none has been answered or timed out.
        #expect(slow.answered == 0)
        #expect(outbox.pending(webhook: "slow") == 20)
        fast.expectEachDeliveredOnce_inOrder(streams: streams, eventsPerStream: 2)
    }

    @Test func failingPastTheRetryWindow_marksTheDeliveryFailed_andFreesItsStream() throws {
        let receiver = try WebhookReceiver(answer: { id, _ in id == "evt-acct-a-1" ? 500 : 200 })
        defer { receiver.stop() }
        let outbox = MemoryOutbox()
        outbox.add(webhook: "backend", streams: ["acct-a"], eventsPerStream: 2)
        var settings = Self.fastSettings
        settings.retrySchedule.first = 20
        settings.retrySchedule.window = 300
        let registry = PrometheusCollectorRegistry()
        let dispatcher = try WebhookDispatcher(
            webhooks: [receiver.webhook(name: "backend")], outbox: outbox, settings: settings,
            metrics: WebhookMetrics(registry: registry), log: nil, random: { 0.5 })
        defer { dispatcher.stop(within: 2) }

        #expect(waitUntil(seconds: 20) { outbox.pending(webhook: "backend") == 0 })
        #expect(outbox.state(of: "evt-acct-a-1", webhook: "backend") == .failed)
        #expect(outbox.state(of: "evt-acct-a-2", webhook: "backend") == .delivered)
        #expect(registry.emitToString().contains(#"receiptd_webhook_deliveries_total{webhook="backend",outcome="failed"} 1"#))
    }

    @Test func anUnavailableLedger_pausesDeliveries_whichResumeWhenItAnswers() throws {
        let receiver = try WebhookReceiver(answer: { _, _ in 200 })
        defer { receiver.stop() }
        let outbox = MemoryOutbox()
        outbox.add(webhook: "backend", streams: ["acct-a", "acct-b"], eventsPerStream: 2)
        outbox.isUnavailable = true
        let lines = Locked<[String]>([])
        let dispatcher = try WebhookDispatcher(
            webhooks: [receiver.webhook(name: "backend")], outbox: outbox, settings: Self.fastSettings,
            metrics: WebhookMetrics(registry: PrometheusCollectorRegistry()),
            log: ServiceLog(format: .text, sink: { line in lines.withLock { $0.append(line) } }))
        defer { dispatcher.stop(within: 2) }

        #expect(waitUntil(seconds: 10) { lines.withLock { $0.contains { $0.contains("webhook deliveries paused") } } })
        #expect(receiver.requests.isEmpty)
        outbox.isUnavailable = false
        #expect(waitUntil(seconds: 20) { outbox.pending(webhook: "backend") == 0 })
        receiver.expectEachDeliveredOnce_inOrder(streams: ["acct-a", "acct-b"], eventsPerStream: 2)
        #expect(lines.withLock { $0.contains { $0.contains("webhook deliveries resumed") } })
    }

    @Test func sendTest_postsASignedTestEvent_andReturnsTheAnswer() throws {
        let receiver = try WebhookReceiver(answer: { _, _ in 202 })
        defer { receiver.stop() }
        let answer = receiver.webhook(name: "backend").sendTest(at: 1_764_216_636_000)
        #expect(answer.status == 202)
        #expect(answer.error == nil)
        let request = try #require(receiver.requests.first)
        #expect(request.headers["Content-Type"] == "application/json")
        #expect(request.headers["User-Agent"] == "receiptd/\(ReceiptdVersion.current)")
        #expect(request.headers["Receiptd-Event-Id"]?.hasPrefix("evt_test_") == true)
        #expect(request.headers["Receiptd-Signature"]?.hasPrefix("t=1764216636,v1=") == true)
        #expect(receiver.badSignatures == 0)
        let body = try JSONValue(parsing: request.body)
        #expect(body["type"] == .string("TEST"))
        #expect(body["sequence"] == .integer(0))
    }

    @Test func sendTest_toNobody_saysWhyThereIsNoAnswer() throws {
        let receiver = try WebhookReceiver(answer: { _, _ in 200 })
        let webhook = receiver.webhook(name: "backend")
        receiver.stop()
        let answer = webhook.sendTest(at: 0)
        #expect(answer.status == nil)
        #expect(answer.error?.isEmpty == false)
    }

    static var fastSettings: WebhookDispatcher.Settings {
        var settings = WebhookDispatcher.Settings()
        settings.concurrency = 8
        settings.idlePoll = 0.02
        settings.backlogInterval = 0.2
        return settings
    }
}

/// A value behind a lock that escaping closures can share (a `Mutex` cannot be captured).
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<Result>(_ body: (inout Value) -> Result) -> Result { mutex.withLock { body(&$0) } }
}

/// Polls `condition` until it holds or `seconds` have passed.
func waitUntil(seconds: Double, _ condition: () -> Bool) -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        if condition() { return true }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return condition()
}

/// A webhook receiver on 127.0.0.1: answers each POST with what `answer` says for its event id and stream, checks
/// its signature, and records what it accepted (2xx) in order.
final class WebhookReceiver: Sendable {
    struct Request: Sendable {
        var headers: HTTPHeaders
        var body: [UInt8]
    }

    private struct State {
        var answer: @Sendable (_ eventID: String, _ stream: String) -> Int
        var requests: [Request] = []
        var accepted: [(stream: String, sequence: Int64, id: String)] = []
        var inFlight: [String: Int] = [:]
        var mostInFlight = 0
        var badSignatures = 0
        var answered = 0
    }

    static let secret = WebhookSecret(Array("whsec_receiver-test".utf8))
    private let state: Locked<State>
    private let server: HTTPServer
    let port: Int

    init(answer: @escaping @Sendable (_ eventID: String, _ stream: String) -> Int) throws {
        let state = Locked(State(answer: answer))
        self.state = state
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.shutdownGracePeriod = 0.2
        // Each request on a thread of its own: a receiver that hangs must not starve Dispatch's few threads, which
        // would hold up its other answers (and the other receivers') past the dispatcher's timeout.
        configuration.waitingLanes = [HandlerLane(
            threads: BoundedThreads(limit: 256), accepts: { _ in true },
            busyHandler: { _ in HTTPResponse(status: .serviceUnavailable) })]
        server = HTTPServer(configuration: configuration) { request in
            let body = (try? JSONValue(parsing: request.body)) ?? .null
            let id = request.headers["Receiptd-Event-Id"] ?? ""
            let stream = body["stream"]?.stringValue ?? "-"
            let answer = state.withLock { state in
                state.requests.append(Request(headers: request.headers, body: request.body))
                state.inFlight[stream, default: 0] += 1
                state.mostInFlight = max(state.mostInFlight, state.inFlight[stream] ?? 0)
                if !Self.isSigned(request) { state.badSignatures += 1 }
                return state.answer
            }
            let status = answer(id, stream)
            state.withLock { state in
                state.inFlight[stream, default: 0] -= 1
                state.answered += 1
                if (200...299).contains(status), case .integer(let sequence)? = body["sequence"] {
                    state.accepted.append((stream, sequence, id))
                }
            }
            return HTTPResponse(status: HTTPStatus(rawValue: status), body: Array("ok".utf8))
        }
        port = try server.start()
    }

    func webhook(name: String, timeout: Double = 5) -> Webhook {
        Webhook(
            name: name, url: "http://127.0.0.1:\(port)/hook", secretFile: "/dev/null", secret: Self.secret,
            timeout: timeout, allowHTTP: true)
    }

    func setAnswer(_ answer: @escaping @Sendable (_ eventID: String, _ stream: String) -> Int) {
        state.withLock { $0.answer = answer }
    }

    var requests: [Request] { state.withLock { $0.requests } }
    var accepted: [(stream: String, sequence: Int64, id: String)] { state.withLock { $0.accepted } }
    var mostInFlightOfOneStream: Int { state.withLock { $0.mostInFlight } }
    var badSignatures: Int { state.withLock { $0.badSignatures } }
    var answered: Int { state.withLock { $0.answered } }

    func stop() {
        server.shutdown()
        server.waitUntilStopped()
    }

    /// Each stream's events accepted once each, sequences 1… in order.
    func expectEachDeliveredOnce_inOrder(
        streams: [String], eventsPerStream: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let accepted = self.accepted
        for stream in streams {
            let sequences = accepted.filter { $0.stream == stream }.map(\.sequence)
            #expect(sequences == Array(1...Int64(eventsPerStream)), "\(stream)", sourceLocation: sourceLocation)
        }
        #expect(accepted.count == streams.count * eventsPerStream, sourceLocation: sourceLocation)
    }

    private static func isSigned(_ request: HTTPRequest) -> Bool {
        guard let header = request.headers["Receiptd-Signature"], header.hasPrefix("t="),
            let comma = header.firstIndex(of: ","), let time = Int64(header[header.index(header.startIndex, offsetBy: 2)..<comma])
        else { return false }
        return header[header.index(after: comma)...]
            == "v1=" + WebhookSignature.v1(secret: secret, unixSeconds: time, body: request.body)
    }
}

/// The outbox's rules in memory, as the ledger keeps them: a delivery is claimable when it is pending, due, not under
/// another's unexpired lease, and the lowest pending sequence of its (webhook, stream).
final class MemoryOutbox: LedgerOutbox, WebhookOutbox {
    private struct Row {
        var eventID: String
        var webhook: String
        var stream: String
        var sequence: Int64
        var body: String
        var createdAt: Int64
        var state = DeliveryState.pending
        var attempts = 0
        var dueAt: Int64
        var holder: String?
        var leaseUntil: Int64 = 0
        var deliveredAt: Int64?
    }

    private let rows = Mutex<[Row]>([])
    private let retryNows = Atomic<Int>(0)
    private let unavailable = Atomic<Bool>(false)

    /// While true every call fails as a database that is down does.
    var isUnavailable: Bool {
        get { unavailable.load(ordering: .relaxed) }
        set { unavailable.store(newValue, ordering: .relaxed) }
    }

    func withOutbox<Result>(_ body: (any LedgerOutbox) throws(LedgerError) -> Result) throws(LedgerError) -> Result {
        guard !isUnavailable else { throw LedgerError(.unavailable, "connection refused", reason: .unreachable) }
        return try body(self)
    }

    /// Events `evt-STREAM-N` with sequences 1… for each stream, created now.
    func add(webhook: String, streams: [String], eventsPerStream: Int) {
        let now = unixMillisecondsNow()
        rows.withLock { rows in
            for stream in streams {
                for sequence in 1...eventsPerStream {
                    let id = "evt-\(stream)-\(sequence)"
                    rows.append(
                        Row(
                            eventID: id, webhook: webhook, stream: stream, sequence: Int64(sequence),
                            body: #"{"id":"\#(id)","stream":"\#(stream)","sequence":\#(sequence)}"#, createdAt: now,
                            dueAt: now))
                }
            }
        }
    }

    func pending(webhook: String) -> Int { rows.withLock { $0.filter { $0.webhook == webhook && $0.state == .pending }.count } }

    func state(of eventID: String, webhook: String) -> DeliveryState? {
        rows.withLock { $0.first { $0.eventID == eventID && $0.webhook == webhook }?.state }
    }

    /// The attempts of each stream's head, by stream name.
    func attempts(ofHeadsOf webhook: String) -> [Int] {
        rows.withLock { rows in
            let pending = rows.filter { $0.webhook == webhook && $0.state == .pending }
            return Dictionary(grouping: pending, by: \.stream).sorted { $0.key < $1.key }
                .map { $0.value.min { $0.sequence < $1.sequence }!.attempts }
        }
    }

    func makeDueNow(stream: String) {
        let now = unixMillisecondsNow()
        rows.withLock { rows in
            for index in rows.indices where rows[index].stream == stream { rows[index].dueAt = now }
        }
    }

    var retryNowCalls: Int { retryNows.load(ordering: .relaxed) }

    func claimDeliveries(webhook: String, holder: String, now: Int64, leaseUntil: Int64, limit: Int)
        throws(LedgerError) -> [ClaimedDelivery]
    {
        rows.withLock { rows in
            var heads: [String: Int] = [:]
            for (index, row) in rows.enumerated() where row.webhook == webhook && row.state == .pending {
                if let head = heads[row.stream], rows[head].sequence < row.sequence { continue }
                heads[row.stream] = index
            }
            let due = heads.values.filter { rows[$0].dueAt <= now && (rows[$0].holder == nil || rows[$0].leaseUntil <= now) }
                .sorted { rows[$0].dueAt < rows[$1].dueAt }.prefix(limit)
            return due.map { index in
                rows[index].holder = holder
                rows[index].leaseUntil = leaseUntil
                let row = rows[index]
                return ClaimedDelivery(
                    eventID: row.eventID, webhook: webhook, type: "TEST", stream: row.stream, sequence: row.sequence,
                    body: row.body, attempts: row.attempts, createdAt: row.createdAt, leaseUntil: leaseUntil)
            }
        }
    }

    func finishDelivery(eventID: String, webhook: String, holder: String, result: DeliveryResult, at time: Int64)
        throws(LedgerError) -> Bool
    {
        rows.withLock { rows in
            guard let index = rows.firstIndex(where: {
                $0.eventID == eventID && $0.webhook == webhook && $0.state == .pending && $0.holder == holder
            }) else { return false }
            rows[index].attempts += 1
            rows[index].holder = nil
            switch result {
            case .delivered:
                rows[index].state = .delivered
                rows[index].deliveredAt = time
            case .retry(let at, _, _): rows[index].dueAt = at
            case .failed: rows[index].state = .failed
            }
            return true
        }
    }

    /// Nothing waits for its turn here: a delivery is due by its time and claimable when it heads its stream.
    func releaseStrandedDeliveries(at time: Int64) throws(LedgerError) -> Int { 0 }

    func retryNow(webhook: String, at time: Int64) throws(LedgerError) -> Int {
        retryNows.add(1, ordering: .relaxed)
        return rows.withLock { rows in
            var count = 0
            for index in rows.indices where rows[index].webhook == webhook && rows[index].state == .pending {
                rows[index].dueAt = min(rows[index].dueAt, time)
                count += 1
            }
            return count
        }
    }

    func events(_ query: OutboxQuery) throws(LedgerError) -> [OutboxEvent] { [] }

    func replay(_ replay: OutboxReplay, at time: Int64) throws(LedgerError) -> Int { 0 }

    func webhookBacklogs() throws(LedgerError) -> [WebhookBacklog] {
        rows.withLock { rows in
            Dictionary(grouping: rows.filter { $0.state == .pending }, by: \.webhook).map { webhook, pending in
                WebhookBacklog(
                    webhook: webhook, pending: pending.count, oldestPendingCreatedAt: pending.map(\.createdAt).min())
            }
        }
    }

    func pruneDeliveredEvents(deliveredBefore time: Int64) throws(LedgerError) -> Int {
        rows.withLock { rows in
            let before = rows.count
            rows.removeAll { $0.state == .delivered && ($0.deliveredAt ?? .max) < time }
            return before - rows.count
        }
    }
}
