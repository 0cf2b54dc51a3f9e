import Dispatch
import Foundation
import HTTP1Server
import TestSupport
import Testing

/// Requests in a waiting lane hold their own threads, never the handler queue's, and past the lane's limit get the
/// busy answer at once.
@Suite(.timeLimit(.minutes(1)))
struct HandlerLaneTests {
    @Test func fullLane_answersBusyAtOnce_whileOtherRoutesStillAnswer() throws {
        let gate = DispatchSemaphore(value: 0)
        let threads = BoundedThreads(limit: 2)
        let live = try LiveServer({ configuration in
            configuration.inlineHandlingMaxBodyBytes = 0
            configuration.waitingLanes = [HandlerLane(
                threads: threads, accepts: { $0.path == "/wait" },
                busyHandler: { _ in HTTPResponse(status: .serviceUnavailable, headers: HTTPHeaders([("X-Lane", "busy")])) })]
        }) { request in
            if request.path == "/wait" { gate.wait() }
            return echoHandler(request)
        }
        let waiting = try (0..<2).map { _ in try RawClient(port: live.port) }
        for client in waiting { try client.send("GET /wait HTTP/1.1\r\nHost: a\r\n\r\n") }
        #expect(eventually { threads.count == 2 })

        let third = try RawClient(port: live.port)
        try third.send("GET /wait HTTP/1.1\r\nHost: a\r\n\r\n")
        let busy = try third.readResponse()
        #expect(busy.status == 503 && busy.header("X-Lane") == "busy")

        let other = try RawClient(port: live.port)
        try other.send("GET /other HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(try other.readResponse().header("X-Path") == "/other")

        gate.signal()
        gate.signal()
        for client in waiting { #expect(try client.readResponse().header("X-Path") == "/wait") }
        #expect(eventually { threads.count == 0 })
    }

    @Test func threadsAreKeptForTheNextPieceOfWork_andTheLimitStillHolds() throws {
        let threads = BoundedThreads(limit: 3)
        let seen = LockedThreadIDs()
        for _ in 0..<20 {
            let done = DispatchSemaphore(value: 0)
            #expect(threads.tryRun {
                seen.insert(currentThreadID())
                done.signal()
            })
            done.wait()
            #expect(eventually { threads.count == 0 })
        }
        #expect(seen.count == 1)

        let gate = DispatchSemaphore(value: 0)
        for _ in 0..<3 { #expect(threads.tryRun { gate.wait() }) }
        #expect(threads.count == 3)
        #expect(!threads.tryRun {})
        for _ in 0..<3 { gate.signal() }
        #expect(eventually { threads.count == 0 })
        let ran = DispatchSemaphore(value: 0)
        #expect(threads.tryRun { ran.signal() })
        #expect(ran.wait(timeout: .now() + 10) == .success)
    }
}

private final class LockedThreadIDs: @unchecked Sendable {
    private let lock = NSLock()
    private var ids: Set<UInt> = []
    func insert(_ id: UInt) { lock.withLock { _ = ids.insert(id) } }
    var count: Int { lock.withLock { ids.count } }
}

private func currentThreadID() -> UInt { UInt(pthread_self()) }
