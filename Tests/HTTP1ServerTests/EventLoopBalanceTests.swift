import Foundation
@testable import HTTP1Server
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(1)))
struct EventLoopBalanceTests {
    @Test(arguments: [
        // (this loop's wait in ms and busy connections, the other loops', which one takes a connection)
        ((6.0, 32), [(4.0, 32)], 0 as Int?),
        ((6.0, 32), [(5.8, 32)], nil),
        ((6.0, 32), [(3.0, 32), (1.0, 32)], 1),
        ((6.0, 2), [(4.0, 2)], nil),  // with two, a third would make the taker wait 6 ms: it would only come back
        ((6.0, 1), [(0.0, 0)], nil),
        ((0.4, 8), [(0.0, 0)], nil),
        ((1.0, 8), [(0.0, 0)], 0),
        ((2.0, 8), [], nil),
    ] as [((Double, Int), [(Double, Int)], Int?)])
    func loopWhoseRequestsWaitClearlyLonger_givesAConnectionToTheLeastWaitingLoop(
        mine: (Double, Int), others: [(Double, Int)], expected: Int?
    ) {
        func load(_ figures: (Double, Int)) -> LoopLoad { LoopLoad(wait: figures.0 / 1000, activeConnections: figures.1) }
        #expect(EventLoopGroup.target(for: load(mine), among: others.map(load)) == expected)
    }

    @Test func connectionsOfALoopHeldBySlowRequests_moveToTheOtherLoop_andStayAnsweredInOrder() throws {
        // Requests without a body run inline, so a slow one holds its loop: the two connections dealt to the first
        // loop wait far longer than the two on the second, and the first loop hands one of them over.
        let live = try LiveServer {
            $0.eventLoopThreads = 2
            $0.inlineHandlingMaxBodyBytes = 0
        }
        // Connected one after another, so the server deals them to its loops in turn: 0 and 2 to the first.
        let clients = OneClientPerThread(try (0..<4).map { _ in try RawClient(port: live.port) })
        let server = live.server
        let wrongAnswers = LockedCount()
        let deadline = Date().addingTimeInterval(5)
        let finished = DispatchGroup()
        // A thread each (not concurrentPerform, which runs as many at once as there are cores): all four connections
        // must be busy at once.
        for index in clients.all.indices {
            finished.enter()
            Thread {
                defer { finished.leave() }
                let client = clients.all[index]
                var afterMove = 0
                var sequence = 0
                while afterMove < 20, Date() < deadline {
                    sequence += 1
                    let isSlow = index % 2 == 0
                    let path = isSlow ? "/slow" : "/fast/\(index)/\(sequence)"
                    do {
                        try client.send("GET \(isSlow ? "/slow?ms=2" : path) HTTP/1.1\r\nHost: a\r\n\r\n")
                        let response = try client.readResponse()
                        if response.status != 200 || response.header("X-Path") != path
                            || (!isSlow && response.bodyText != "hello \(path)")
                        {
                            wrongAnswers.add()
                        }
                    } catch {
                        wrongAnswers.add()
                        return
                    }
                    if server.movedConnections > 0 { afterMove += 1 }
                }
            }.start()
        }
        finished.wait()
        #expect(server.movedConnections > 0)
        #expect(wrongAnswers.value == 0)
    }
}

/// Each thread uses only the client at its own index.
private final class OneClientPerThread: @unchecked Sendable {
    let all: [RawClient]
    init(_ all: [RawClient]) { self.all = all }
}

private final class LockedCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func add() { lock.withLock { count += 1 } }
}
