import Foundation
import Synchronization
import HTTP1Server
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import ReceiptService
@testable import receiptd
import JSONText

/// In `ServeLiveTests`' serialized suite: `serve` stops on SIGTERM, which reaches every server in the process.
/// In `ServeLiveTests`' serialized suite, so no other `serve` of this process sees its signals; stopped through
/// `runServe`'s `started` hook rather than a signal, since two servers run at once.
extension ServeLiveTests {
    private func startServe(
        config: String, output: CapturedLines, finished: CapturedLines, stops: ShutDownHooks
    ) async throws -> JSONValue {
        Thread.detachNewThread {
            let status = runServe(
                arguments: ["--config", config], environment: [:], output: output.sink, errors: output.sink,
                started: stops.add)
            finished.sink("\(status)")
        }
        var listening: String?
        for _ in 0..<200 where listening == nil {
            listening = output.all.first { $0.contains("\"event\":\"listening\"") }
            if listening == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        return try JSONValue(parsing: Array(try #require(listening).utf8))
    }

    @Test func publicListener_servesOnlyItsTwoRoutes_andTheLogNamesTokensNotThem() async throws {
        let token = "live-test-token-0123456789abcdefghijklmnopqrstu"
        let entry = APIToken(name: "backend", token: token, scopes: [.metrics]).configurationJSON
        let folder = try ScratchFolder()
        let config = try folder.write(
            "receiptd.json",
            #"{"port": 0, "log_format": "json", "public": {"host": "127.0.0.1", "port": 0}, "api_tokens": [\#(entry)]}"#)
        let output = CapturedLines()
        let finished = CapturedLines()
        let stops = ShutDownHooks()
        let json = try await startServe(config: config, output: output, finished: finished, stops: stops)
        // Bound to every address without tokens: the one warning.
        let openConfig = try folder.write("open.json", #"{"host": "0.0.0.0", "port": 0, "log_format": "json"}"#)
        let openOutput = CapturedLines()
        let openJSON = try await startServe(config: openConfig, output: openOutput, finished: finished, stops: stops)
        let openPort = try #require(openJSON["address"]?.stringValue?.split(separator: ":").last)

        let main = try #require(json["address"]?.stringValue)
        let publicAddress = try #require(json["public_address"]?.stringValue)
        #expect(main != publicAddress)
        func status(_ arguments: [String]) throws -> String {
            try runCurl(["-s", "-o", "/dev/null", "-w", "%{http_code}"] + arguments).stdout
        }
        #expect(try status([publicAddress + "/healthz"]) == "200")
        #expect(try status(["-X", "POST", "--data", "{}", publicAddress + "/v1/notifications"]) == "400")
        for path in ["/", "/metrics", "/readyz", "/v1/transactions/1", "/v1/subscriptions/1", "/nothing"] {
            #expect(try status(["-u", ":\(token)", publicAddress + path]) == "404", "\(path)")
        }
        for path in ["/v1/validate", "/v1/transactions/1/claim", "/verifyReceipt", "/healthz"] {
            let answer = try runCurl(["-s", "-i", "-X", "POST", "--data", "{}", publicAddress + path])
            #expect(answer.stdout.hasPrefix("HTTP/1.1 404"), "\(path)")
            #expect(!answer.stdout.lowercased().contains("allow:"))
        }

        // A loopback caller of the server bound to every address is refused like any other: it may be a proxy.
        let refused = try runCurl(["-s", "http://127.0.0.1:\(openPort)/metrics"]).stdout
        #expect(refused.contains(#""code":"auth_not_configured""#), "\(refused)")
        #expect(try status(["http://127.0.0.1:\(openPort)/healthz"]) == "200")

        #expect(try status([main + "/metrics"]) == "401")
        #expect(try status(["-u", ":\(token)", main + "/metrics"]) == "200")
        #expect(try status(["-H", "Authorization: Bearer \(token)", main + "/metrics"]) == "200")
        #expect(try status(["-H", "Authorization: Bearer \(token)", main + "/v1/transactions/1"]) == "403")

        stops.shutDownAll()
        for _ in 0..<200 where finished.all.count < 2 { try await Task.sleep(for: .milliseconds(50)) }
        #expect(finished.all == ["0", "0"])
        let accessLines = output.all.filter { $0.contains("\"request_id\"") }
        // The two 200s of /metrics and the 403: a 401 or 404 names no one.
        #expect(accessLines.filter { $0.contains(#""token":"backend""#) }.count == 3)
        #expect(!output.all.contains { $0.contains(token) })
        #expect(output.all.filter { $0.contains("\"event\":\"warning\"") }.isEmpty)
        let warnings = openOutput.all.filter { $0.contains("\"event\":\"warning\"") }
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("api_tokens") == true)
    }
}

extension ServeLiveTests {
    @Test func takenPublicPort_stopsTheMainListener_andExitsOne() throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        let occupant = HTTPServer(configuration: configuration, handler: { _ in HTTPResponse(status: 200) })
        let port = try occupant.start()
        defer {
            occupant.shutdown()
            occupant.waitUntilStopped()
        }
        let folder = try ScratchFolder()
        let config = try folder.write("receiptd.json", #"{"port": 0, "public": {"host": "127.0.0.1", "port": \#(port)}}"#)
        let errors = CapturedLines()
        let status = runServe(
            arguments: ["--config", config], environment: [:], output: CapturedLines().sink, errors: errors.sink)
        #expect(status == 1)
        #expect(errors.all.count == 1)
        #expect(errors.all.first?.hasPrefix("receiptd: cannot listen on public 127.0.0.1:\(port)") == true)
    }
}

final class ShutDownHooks: Sendable {
    private let hooks = Mutex<[@Sendable () -> Void]>([])
    func add(_ hook: @escaping @Sendable () -> Void) { hooks.withLock { $0.append(hook) } }
    func shutDownAll() { for hook in hooks.withLock({ $0 }) { hook() } }
}
