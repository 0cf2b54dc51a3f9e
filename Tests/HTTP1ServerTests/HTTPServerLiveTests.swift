import Foundation
import HTTP1Server
import TestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite(.timeLimit(.minutes(1)))
struct HTTPServerLiveTests {
    @Test func urlSessionPost_getsItsBodyEchoed_withRequestIdAndLength() async throws {
        let live = try LiveServer()
        var request = URLRequest(url: URL(string: "\(live.url)/echo?device=secret")!)
        request.httpMethod = "POST"
        request.httpBody = Data("ping".utf8)
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self) == "ping")
        let requestID = try #require(http.value(forHTTPHeaderField: "X-Request-Id"))
        #expect(requestID.count == 16)
        #expect(http.value(forHTTPHeaderField: "Content-Length") == "4")
        let records = live.log.all
        #expect(records.count == 1)
        #expect(records.first?.path == "/echo")
        #expect(records.first?.method == "POST")
        #expect(records.first?.status == 200)
        #expect(records.first?.requestID == requestID)
        #expect(records.first?.remoteAddress.hasPrefix("127.0.0.1:") == true)
    }

    @Test func oneMebibyteBody_isEchoedIntact() async throws {
        let live = try LiveServer()
        let body = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        var request = URLRequest(url: URL(string: "\(live.url)/echo")!)
        request.httpMethod = "POST"
        request.httpBody = body
        let (data, response) = try await URLSession.shared.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(data == body)
    }

    @Test func curlWithTwoURLs_reusesOneConnection() throws {
        let live = try LiveServer()
        let result = try runCurl(["-sv", "\(live.url)/a", "\(live.url)/b"])
        #expect(result.status == 0)
        #expect(result.stdout == "hello /ahello /b")
        let records = live.log.all
        #expect(records.count == 2)
        #expect(Set(records.map(\.remoteAddress)).count == 1, "both requests came over one connection")
        #expect(result.stderr.contains("Re-using existing connection") || result.stderr.contains("Reusing existing connection"))
    }

    @Test func expectContinue_isAnsweredAtOnce() throws {
        let live = try LiveServer()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("http1server-\(UUID().uuidString)")
        try Data(repeating: 0x61, count: 2 << 20).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let started = Date()
        let result = try runCurl([
            "-sv", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Expect: 100-continue",
            "--data-binary", "@\(file.path)", "\(live.url)/upload",
        ])
        let elapsed = Date().timeIntervalSince(started)
        #expect(result.stdout == "200")
        #expect(result.stderr.contains("HTTP/1.1 100 Continue"))
        #expect(elapsed < 0.9, "curl waits 1 s when no 100 Continue comes")
    }

    @Test func expectContinueOverTheBodyLimit_gets413WithoutTheBody() throws {
        let live = try LiveServer { $0.maxBodyBytes = 1000 }
        let client = try RawClient(port: live.port)
        try client.send("POST /upload HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == 413)
        #expect(response.header("Connection") == "close")
        #expect(live.log.failures.map(\.status) == [.contentTooLarge])
        #expect(client.isClosedByServer())
    }

    @Test(arguments: [
        ("GET / HTTP/1.1\r\nHost: a\r\nX-Big: \(String(repeating: "x", count: 2000))\r\n\r\n", 431),
        ("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
    ])
    func badRequest_isWordedByTheApplicationAndClosed(request: String, status: Int) throws {
        let live = try LiveServer { $0.maxHeaderBytes = 1024 }
        let client = try RawClient(port: live.port)
        try client.send(request)
        let response = try client.readResponse()
        #expect(response.status == status)
        #expect(live.log.failures.map(\.status.code) == [status])
        #expect(response.header("X-Request-Id")?.count == 16)
        #expect(response.header("Connection") == "close")
        #expect(client.isClosedByServer())
        #expect(live.log.all.first?.status.code == status)
    }

    @Test func pipelinedRequests_areAnsweredInOrder() throws {
        let live = try LiveServer()
        let client = try RawClient(port: live.port)
        try client.send(
            "GET /slow?ms=150 HTTP/1.1\r\nHost: a\r\n\r\nPOST /fast HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
                + "GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        let first = try client.readResponse()
        let second = try client.readResponse()
        let third = try client.readResponse()
        #expect(first.header("X-Path") == "/slow")
        #expect(second.bodyText == "abc")
        #expect(third.header("X-Path") == "/last")
        #expect(third.header("Connection") == "close")
        #expect(client.isClosedByServer())
    }

    @Test func pipelinedRequests_handledInlineAndOnTheHandlerQueue_areAnsweredInOrder() throws {
        // Bodies of at most 4 bytes are handled where they were read; the slow first request is not.
        let live = try LiveServer { $0.inlineHandlingMaxBodyBytes = 4 }
        let client = try RawClient(port: live.port)
        try client.send(
            "POST /slow?ms=150 HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789"
                + "GET /fast HTTP/1.1\r\nHost: a\r\n\r\n"
                + "POST /small HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
                + "GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        let responses = try (0..<4).map { _ in try client.readResponse() }
        #expect(responses.map { $0.header("X-Path") } == ["/slow", "/fast", "/small", "/last"])
        #expect(responses[0].bodyText == "0123456789")
        #expect(responses[2].bodyText == "abc")
        #expect(responses[3].header("Connection") == "close")
        #expect(client.isClosedByServer())
        #expect(Set(responses.compactMap { $0.header("X-Request-Id") }).count == 4)
    }

    @Test func pipelinedLargeAnswers_queuedPastOneSendsPieces_arriveWholeAndInOrder() throws {
        // 16 answers of 1 MB, each a head and a body cut in five pieces (slices of one array, as an account's kept
        // texts are), wait as 96 pieces while the client reads nothing: more than one `sendmsg` takes and more than
        // the socket holds, so sends stop inside pieces and resume where they stopped.
        @Sendable func body(_ number: Int) -> [UInt8] {
            var bytes = [UInt8](repeating: UInt8(65 + number), count: 1_000_000)
            // Marks every 4 KiB, so that a piece sent twice, skipped or out of place changes the body.
            for offset in stride(from: 0, to: bytes.count, by: 4096) {
                bytes[offset] = UInt8(truncatingIfNeeded: offset >> 12)
            }
            return bytes
        }
        let live = try LiveServer(handler: { request in
            let whole = body(Int(request.path.dropFirst("/big/".count)) ?? -1)
            let cuts = [0, 1, 4_099, 65_536, 700_001, whole.count]
            return HTTPResponse(status: 200, bodyPieces: zip(cuts, cuts.dropFirst()).map { whole[$0..<$1] })
        })
        let client = try RawClient(port: live.port)
        try client.send((0..<16).map { "GET /big/\($0) HTTP/1.1\r\nHost: a\r\n\r\n" }.joined())
        #expect(eventually { live.log.all.count == 16 }, "every answer is made before the client reads")
        let responses = try (0..<16).map { _ in try client.readResponse() }
        #expect(responses.map(\.status) == Array(repeating: 200, count: 16))
        for (number, response) in responses.enumerated() {
            // Compared as a verdict: a failure printing two megabytes of bytes would help no one.
            let arrivedWhole = response.body == body(number)
            #expect(arrivedWhole, "answer \(number) arrived changed or out of order")
        }
    }

    @Test func http10KeepAlive_isEchoedAndHonoured() throws {
        let live = try LiveServer()
        let client = try RawClient(port: live.port)
        try client.send("GET /one HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        let first = try client.readResponse()
        #expect(first.header("Connection") == "keep-alive")
        try client.send("GET /two HTTP/1.0\r\n\r\n")
        let second = try client.readResponse()
        #expect(second.bodyText == "hello /two")
        #expect(second.header("Connection") == "close")
        #expect(client.isClosedByServer())
    }

    @Test func headRequest_hasLengthButNoBody_andHandlerRequestIdIsKept() throws {
        let live = try LiveServer()
        let client = try RawClient(port: live.port)
        try client.send("HEAD /own-id HTTP/1.1\r\nHost: a\r\n\r\nGET /after HTTP/1.1\r\nHost: a\r\n\r\n")
        let head = try client.readResponse(toHEAD: true)
        #expect(head.header("Content-Length") == "13")
        #expect(head.body.isEmpty)
        #expect(head.header("X-Request-Id") == "handler-chosen")
        let after = try client.readResponse()
        #expect(after.bodyText == "hello /after")
    }

    @Test func chunkedUpload_isDechunked() throws {
        let live = try LiveServer()
        let client = try RawClient(port: live.port)
        try client.send("POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nWiki\r\n5\r\npedia\r\n0\r\nT: v\r\n\r\n")
        #expect(try client.readResponse().bodyText == "Wikipedia")
    }

    @Test func connectionsOverTheLimit_get503AndClose() throws {
        let live = try LiveServer { $0.maxConnections = 2 }
        let first = try RawClient(port: live.port)
        let second = try RawClient(port: live.port)
        #expect(eventually { live.server.openConnections == 2 })
        let third = try RawClient(port: live.port)
        let response = try third.readResponse()
        #expect(response.status == 503)
        #expect(response.header("Connection") == "close")
        #expect(live.log.failures.map(\.status) == [.serviceUnavailable])
        #expect(third.isClosedByServer())
        try first.send("GET /still-served HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(try first.readResponse().status == 200)
        withExtendedLifetime(second) {}
        #expect(live.server.openConnections == 2)
    }

    @Test func openConnections_tracksClosedClients() throws {
        let live = try LiveServer()
        var client: RawClient? = try RawClient(port: live.port)
        #expect(eventually { live.server.openConnections == 1 })
        _ = client
        client = nil
        #expect(eventually { live.server.openConnections == 0 })
    }

    @Test func slowLorisClient_isDroppedWhileOthersAreServed() throws {
        let live = try LiveServer { $0.headerReadTimeout = 0.5 }
        let slow = try RawClient(port: live.port)
        try slow.send("GET /slow-loris HTTP/1.1\r\nHost: a\r\nX-Half")
        let started = Date()
        let other = try RawClient(port: live.port)
        try other.send("GET /other HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(try other.readResponse().status == 200)
        #expect(Date().timeIntervalSince(started) < 0.4)
        let dropped = try slow.readResponse()
        #expect(dropped.status == 408)
        #expect(slow.isClosedByServer())
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed > 0.4 && elapsed < 1.5)
    }

    @Test func stalledBody_gets408AfterBodyReadTimeout() throws {
        let live = try LiveServer { $0.bodyReadTimeout = 0.3 }
        let client = try RawClient(port: live.port)
        let started = Date()
        try client.send("POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc")
        let response = try client.readResponse()
        #expect(response.status == 408)
        #expect(live.log.failures.map(\.status) == [.requestTimeout])
        #expect(client.isClosedByServer())
        #expect(Date().timeIntervalSince(started) < 1.5)
        #expect(live.log.all.first?.path == "/upload")
    }

    @Test func idleKeepAliveConnection_isClosedAfterIdleTimeout() throws {
        let live = try LiveServer { $0.idleTimeout = 0.3 }
        let client = try RawClient(port: live.port)
        try client.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(try client.readResponse().status == 200)
        let started = Date()
        #expect(client.isClosedByServer())
        #expect(Date().timeIntervalSince(started) < 1.5)
    }

    @Test func shutdown_finishesInFlightRequestThenStops() throws {
        let live = try LiveServer()
        let busy = try RawClient(port: live.port)
        let idle = try RawClient(port: live.port)
        try busy.send("GET /slow?ms=300 HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(eventually { live.server.openConnections == 2 })
        usleep(50_000)
        live.server.shutdown()
        #expect(idle.isClosedByServer())
        let response = try busy.readResponse()
        #expect(response.status == 200)
        #expect(response.header("Connection") == "close")
        live.server.waitUntilStopped()
        #expect(live.server.openConnections == 0)
        #expect(throws: (any Error).self) { _ = try RawClient(port: live.port) }
        live.server.shutdown()
    }

    @Test func bindingATakenPort_failsWithOneLine() throws {
        let live = try LiveServer()
        var configuration = HTTPServerConfiguration()
        configuration.port = live.port
        let second = HTTPServer(configuration: configuration, handler: echoHandler)
        #expect {
            _ = try second.start()
        } throws: { error in
            "\(error)" == "bind 127.0.0.1:\(live.port): Address already in use"
        }
    }

    @Test func cpuBoundHandlers_runInParallel() throws {
        let live = try LiveServer()
        let started = Date()
        let clients = try (0..<2).map { _ in try RawClient(port: live.port) }
        for client in clients { try client.send("GET /slow?ms=300 HTTP/1.1\r\nHost: a\r\n\r\n") }
        for client in clients { #expect(try client.readResponse().status == 200) }
        #expect(Date().timeIntervalSince(started) < 0.55)
    }
}
