import Foundation
import HTTP1Server
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

@testable import ReceiptService
@testable import receiptd
import JSONText

/// `runServe` with a real socket: the one place the service is tested through the network.
@Suite(.serialized)
struct ServeLiveTests {
    /// Polls captured lines until one matches, for up to ten seconds.
    private func waitForLine(in lines: CapturedLines, containing text: String) async -> String? {
        for _ in 0..<200 {
            if let line = lines.all.first(where: { $0.contains(text) }) { return line }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    @Test func takenPort_returnsNonZeroWithOneLineError() throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        let occupant = HTTPServer(configuration: configuration, handler: { _ in HTTPResponse(status: 200) })
        let port = try occupant.start()
        defer {
            occupant.shutdown()
            occupant.waitUntilStopped()
        }
        let errors = CapturedLines()
        let status = runServe(
            arguments: ["--port", String(port)], environment: ["RECEIPTD_CONFIG": ""], output: CapturedLines().sink,
            errors: errors.sink)
        #expect(status == 1)
        #expect(errors.all.count == 1)
        #expect(errors.all.first?.hasPrefix("receiptd: cannot listen on 127.0.0.1:\(port)") == true)
    }

    @Test func sigterm_drainsAndReturnsZero_afterServingRequests() async throws {
        let folder = try ScratchFolder()
        let config = try folder.write("receiptd.json", "{\"port\": 0, \"log_format\": \"json\"}")
        let output = CapturedLines()
        let finished = CapturedLines()
        Thread.detachNewThread {
            let status = runServe(
                arguments: ["--config", config], environment: [:], output: output.sink, errors: output.sink)
            finished.sink("\(status)")
        }
        let listening = try #require(await waitForLine(in: output, containing: "\"event\":\"listening\""))
        let json = try JSONValue(parsing: Array(listening.utf8))
        let address = try #require(json["address"]?.stringValue)

        let (body, response) = try await URLSession.shared.data(from: URL(string: address + "/readyz")!)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: body, as: UTF8.self) == #"{"status":"ready"}"#)
        let accessLine = try #require(await waitForLine(in: output, containing: "\"path\":\"/readyz\""))
        #expect(try JSONValue(parsing: Array(accessLine.utf8))["status"] == .integer(200))

        kill(getpid(), SIGTERM)
        let status = await waitForLine(in: finished, containing: "0")
        #expect(status == "0")
        #expect(output.all.contains { $0.contains("\"event\":\"shutting down\"") })
        #expect(output.all.last?.contains("\"event\":\"stopped\"") == true)
    }
}
