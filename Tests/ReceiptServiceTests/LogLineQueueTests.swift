import Dispatch
import Foundation
import HTTP1Server
import JSONText
import Ledger
import Synchronization
import TestSupport
import Testing

@testable import ReceiptService

/// The server's log never makes a request wait on stdout: a stalled stream costs lines, dropped and counted, in order.
struct LogLineQueueTests {
    /// A stream that takes its first batch and then stalls, as a full pipe does, until `release`.
    final class StallingStream: Sendable {
        private let written = Mutex<[UInt8]>([])
        private let firstWriteStarted = DispatchSemaphore(value: 0)
        private let stall = DispatchSemaphore(value: 0)
        private let dropped = Atomic<Int>(0)

        var text: String { String(decoding: written.withLock { $0 }, as: UTF8.self) }
        var droppedLines: Int { dropped.load(ordering: .relaxed) }

        func queue(_ limits: LogLineQueue.Limits) throws -> LogLineQueue {
            try LogLineQueue(
                limits: limits,
                write: { [self] bytes in
                    let isFirst = written.withLock { written in
                        defer { written += bytes }
                        return written.isEmpty
                    }
                    if isFirst {
                        firstWriteStarted.signal()
                        stall.wait()
                    }
                },
                lineDropped: { [self] in dropped.add(1, ordering: .relaxed) })
        }

        /// Whether the writer reached the stream (and is now stuck in it) within a generous bound.
        func waitUntilStalled() -> Bool {
            firstWriteStarted.wait(timeout: .now() + .seconds(10)) == .success
        }

        func release() { stall.signal() }
    }

    @Test func stalledStream_dropsAndCountsLinesPastTheLineLimit_andWritesTheRestInOrder() throws {
        let stream = StallingStream()
        let queue = try stream.queue(LogLineQueue.Limits(lines: 4, bytes: 1 << 20))
        queue.append("line 0")
        try #require(stream.waitUntilStalled())
        for number in 1...9 { queue.append("line \(number)") }
        // `append` returned nine times while the stream was stuck: nothing waited on it.
        #expect(stream.droppedLines == 5)

        stream.release()
        #expect(queue.flush(timeout: .seconds(10)))
        #expect(stream.text == "line 0\nline 1\nline 2\nline 3\nline 4\n")
        #expect(stream.droppedLines == 5)
    }

    @Test func stalledStream_boundsQueuedBytes() throws {
        let stream = StallingStream()
        let queue = try stream.queue(LogLineQueue.Limits(lines: 1_000, bytes: 64))
        queue.append("first")
        try #require(stream.waitUntilStalled())
        let twentyBytes = String(repeating: "b", count: 20)
        // 21 bytes each with its newline: three fit in 64, the fourth does not; nor does one line over the limit.
        for _ in 0..<4 { queue.append(twentyBytes) }
        queue.append(String(repeating: "c", count: 100))
        #expect(stream.droppedLines == 2)

        stream.release()
        #expect(queue.flush(timeout: .seconds(10)))
        #expect(stream.text == "first\n" + String(repeating: twentyBytes + "\n", count: 3))
    }

    @Test func flush_givesUpWhileTheStreamStalls() throws {
        let stream = StallingStream()
        let queue = try stream.queue(.standard)
        queue.append("stuck")
        try #require(stream.waitUntilStalled())
        queue.append("waiting")
        #expect(!queue.flush(timeout: .milliseconds(50)))
        stream.release()
        #expect(queue.flush(timeout: .seconds(10)))
        #expect(stream.text == "stuck\nwaiting\n")
    }

    @Test func linesFromManyThreads_allArriveWhole() async throws {
        let stream = StallingStream()
        stream.release()  // never stalls
        let queue = try stream.queue(.standard)
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask { for number in 0..<250 { queue.append("writer \(writer) line \(number)") } }
            }
        }
        #expect(queue.flush(timeout: .seconds(10)))
        let lines = stream.text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.count == 2_000)
        #expect(stream.droppedLines == 0)
        for writer in 0..<8 {
            // Each thread's own lines keep the order it appended them in.
            let own = lines.filter { $0.hasPrefix("writer \(writer) ") }
            #expect(own == (0..<250).map { "writer \(writer) line \($0)"[...] })
        }
    }

    /// A stream that never stalls and keeps each batch the writer handed it apart.
    final class BatchRecorder: Sendable {
        private let written = Mutex<[String]>([])
        private let batchWritten = DispatchSemaphore(value: 0)

        var batches: [String] { written.withLock { $0 } }

        func queue(_ limits: LogLineQueue.Limits) throws -> LogLineQueue {
            try LogLineQueue(
                limits: limits,
                write: { [self] bytes in
                    written.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) }
                    batchWritten.signal()
                },
                lineDropped: {})
        }

        /// Whether one more batch was written within a generous bound.
        func waitForBatch() -> Bool {
            batchWritten.wait(timeout: .now() + .seconds(10)) == .success
        }
    }

    /// Long enough that a test never sees a nap end by itself.
    static let endlessNap = Duration.seconds(600)

    @Test func firstLineAfterAQuietSpell_isWrittenWithoutWaitingOutTheNap() throws {
        let recorder = BatchRecorder()
        let queue = try recorder.queue(LogLineQueue.Limits(lines: 4_096, bytes: 1 << 20, batchInterval: Self.endlessNap))
        queue.append("alone")
        try #require(recorder.waitForBatch())
        #expect(recorder.batches == ["alone\n"])
    }

    @Test func linesThatComeDuringANap_areWrittenTogether_andFlushEndsTheNap() throws {
        let recorder = BatchRecorder()
        let queue = try recorder.queue(LogLineQueue.Limits(lines: 4_096, bytes: 1 << 20, batchInterval: Self.endlessNap))
        queue.append("first")
        try #require(recorder.waitForBatch())
        for number in 1...50 { queue.append("line \(number)") }
        // The writer naps after every batch, so the fifty lines wait for it (or for a flush), whatever the timing.
        #expect(recorder.batches.count == 1)

        #expect(queue.flush(timeout: .seconds(10)))
        #expect(recorder.batches == ["first\n", (1...50).map { "line \($0)\n" }.joined()])
    }

    @Test func queuePastHalfFull_endsTheNap() throws {
        let recorder = BatchRecorder()
        let queue = try recorder.queue(LogLineQueue.Limits(lines: 8, bytes: 1 << 20, batchInterval: Self.endlessNap))
        queue.append("first")
        try #require(recorder.waitForBatch())
        for number in 1...4 { queue.append("line \(number)") }
        // Four of eight is half: the nap ends without a flush, and the four go in one batch.
        try #require(recorder.waitForBatch())
        #expect(recorder.batches == ["first\n", "line 1\nline 2\nline 3\nline 4\n"])
    }

    @Test func releasingTheQueue_writesWhatWaitsInTheNap() throws {
        let recorder = BatchRecorder()
        var queue: LogLineQueue? = try recorder.queue(
            LogLineQueue.Limits(lines: 4_096, bytes: 1 << 20, batchInterval: Self.endlessNap))
        queue?.append("first")
        try #require(recorder.waitForBatch())
        queue?.append("last")
        queue = nil
        try #require(recorder.waitForBatch())
        #expect(recorder.batches == ["first\n", "last\n"])
    }

    @Test func droppedLines_showInMetrics() {
        let metrics = ServiceMetrics()
        #expect(metrics.exposition().contains("\nreceiptd_log_lines_dropped_total 0\n"))
        metrics.recordLogLinesDropped()
        metrics.recordLogLinesDropped()
        let lines = metrics.exposition().split(separator: "\n")
        #expect(lines.contains("# TYPE receiptd_log_lines_dropped_total counter"))
        #expect(lines.contains("receiptd_log_lines_dropped_total 2"))
    }
}

/// A client-sent value lands in a log line only as a bounded slice, marked as cut.
struct LogValueClippingTests {
    @Test(arguments: [
        ("", ""),
        ("/v1/validate", "/v1/validate"),
        (String(repeating: "x", count: 128), String(repeating: "x", count: 128)),
        (String(repeating: "x", count: 1_000_000), String(repeating: "x", count: 128) + "[...+999872B]"),
        // 201 bytes: byte 128 is the middle of an "é", so the cut falls before it.
        ("a" + String(repeating: "é", count: 100), "a" + String(repeating: "é", count: 63) + "[...+74B]"),
    ])
    func clipped_keepsAtMostTheLimitOnACharacterBoundary(value: String, expected: String) {
        #expect(ServiceLog.clipped(value) == expected)
    }

    @Test(arguments: [ServiceConfiguration.LogFormat.text, .json])
    func accessLine_clipsAHugePathAndRequestID(format: ServiceConfiguration.LogFormat) {
        let huge = String(repeating: "p", count: 1_000_000)
        let record = HTTPAccessRecord(
            method: "GET", path: "/" + huge, status: 404, responseBytes: 10, microseconds: 5, requestID: huge,
            remoteAddress: "127.0.0.1:1")
        let lines = CapturedLines()
        ServiceLog(format: format, clock: { fixedNow }, sink: lines.sink).access(record)
        let line = lines.all.first ?? ""
        #expect(line.utf8.count < 512)
        #expect(line.contains("[...+"))
    }

    @Test func event_clipsEveryFieldToTheFieldBound() {
        let lines = CapturedLines()
        let log = ServiceLog(format: .text, clock: { fixedNow }, sink: lines.sink)
        log.event("note", [("message", String(repeating: "m", count: 100_000))])
        let line = lines.all.first ?? ""
        #expect(line.utf8.count < ServiceLog.maximumFieldBytes + 100)
        #expect(line.hasSuffix("[...+98976B]"))
    }

    @Test func notificationWithAHugeUUID_logsABoundedSliceOfIt() throws {
        let lines = CapturedLines()
        let routes = NotificationLogTests.routes(PurchaseLedger(store: try makeLedger(.sqlite)), lines)
        let uuid = String(repeating: "u", count: 1_000_000)
        let notification = try SignedEvents.notification("SUBSCRIBED", "INITIAL_BUY", signed: -10, uuid: uuid)
        _ = routes.intake.takeNotification(notification)

        let events = lines.all.compactMap { try? JSONValue(parsing: Array($0.utf8)) }
            .filter { $0["event"]?.stringValue?.hasPrefix("notification") == true }
        try #require(events.count == 1)
        #expect(events[0]["uuid"] == .string(String(repeating: "u", count: 128) + "[...+999872B]"))
        #expect(lines.all.allSatisfy { $0.utf8.count < 2_048 })
    }
}
