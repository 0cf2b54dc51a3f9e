import Foundation
@testable import HTTP1Server
import ReceiptEngine
import Synchronization
import TestSupport
import Testing

@testable import ReceiptService
@testable import receiptd
import JSONText

/// `/healthz`, `/readyz`, `/metrics` and `/`.
struct OperationsRouteTests {
    @Test func health_isOKJSON_namingVersionAndStartTime() {
        let response = makeRoutes().handle(get("/healthz"), on: .main)
        #expect(response.status == 200)
        #expect(
            response.text == #"{"status":"ok","version":"\#(ReceiptdVersion.current)","started_at":"2024-05-01T12:00:00Z"}"#)
        #expect(response.headers["Content-Type"] == "application/json")
    }

    @Test func readiness_followsTheReadinessState() {
        let readiness = ServiceReadiness(isReady: false)
        let routes = makeRoutes(readiness: readiness)
        #expect(routes.handle(get("/readyz"), on: .main).status == 503)
        readiness.markReady()
        #expect(routes.handle(get("/readyz"), on: .main).status == 200)
        readiness.markShuttingDown()
        let draining = routes.handle(get("/readyz"), on: .main)
        #expect(draining.status == 503)
        #expect(draining.json?["status"] == .string("shutting_down"))
    }

    @Test func supportPage_isServedAsHTML() {
        let response = makeRoutes().handle(get("/"), on: .main)
        #expect(response.status == 200)
        #expect(response.headers["Content-Type"] == "text/html; charset=utf-8")
        #expect(response.text == SupportPage.html)
    }

    @Test(arguments: [
        (HTTPStatus.badRequest, "bad_request"), (.requestTimeout, "request_timeout"),
        (.contentTooLarge, "payload_too_large"), (.headerFieldsTooLarge, "header_too_large"),
        (.notImplemented, "not_implemented"), (.serviceUnavailable, "service_unavailable"),
        (.httpVersionNotSupported, "http_version_not_supported"),
    ])
    func refusalBeforeRouting_isWordedAsEveryErrorAndCounted(status: HTTPStatus, code: String) {
        let metrics = ServiceMetrics()
        let routes = makeRoutes(metrics: metrics)
        let response = routes.failureResponse(HTTPFailure(status: status, message: "refused"))
        #expect(response.status == status)
        #expect(response.headers["Content-Type"] == "application/json")
        #expect(response.json?["error"]?["code"]?.stringValue == code)
        let counted = #"receiptd_http_requests_total{route="unrouted",status="\#(status.code)"} 1"#
        #expect(metrics.exposition().split(separator: "\n").contains { $0 == counted })
    }

    @Test func metrics_countRequestsValidationsAndDurations() {
        let metrics = ServiceMetrics()
        metrics.observeOpenConnections { 3 }
        let routes = makeRoutes(metrics: metrics)
        _ = routes.handle(get("/healthz"), on: .main)
        _ = routes.handle(get("/healthz"), on: .main)
        _ = routes.handle(get("/secret-path-from-a-scanner"), on: .main)
        _ = routes.handle(post("/v1/validate", contentType: "application/octet-stream", body: junkDER), on: .main)
        _ = routes.handle(post("/verifyReceipt", contentType: nil, text: "{\"receipt-data\": \"\(base64(junkDER))\"}"), on: .main)

        let response = routes.handle(get("/metrics"), on: .main)
        #expect(response.status == 200)
        #expect(response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8")
        let lines = Set(response.text.split(separator: "\n").map(String.init))
        for expected in [
            #"receiptd_http_requests_total{route="/healthz",status="200"} 2"#,
            #"receiptd_http_requests_total{route="unmatched",status="404"} 1"#,
            #"receiptd_http_requests_total{route="/v1/validate",status="422"} 1"#,
            #"receiptd_http_requests_total{route="/verifyReceipt",status="200"} 1"#,
            #"receiptd_validations_total{result="malformed_receipt"} 2"#,
            #"receiptd_validations_total{result="valid"} 0"#,
            #"receiptd_validations_total{result="device_hash_mismatch"} 0"#,
            #"receiptd_request_duration_seconds_bucket{le="+Inf"} 5"#,
            #"receiptd_request_duration_seconds_count 5"#,
            "# TYPE receiptd_request_duration_seconds histogram",
            "# TYPE receiptd_open_connections gauge",
            "receiptd_open_connections 3.0",
        ] {
            #expect(lines.contains(expected), "missing \(expected)")
        }
        // The raw path never becomes a label: scanners cannot grow the series without bound.
        #expect(!response.text.contains("secret-path"))
        #expect(lines.contains { $0.hasPrefix("receiptd_request_duration_seconds_sum ") })
    }

    @Test func histogramBuckets_areCumulative() {
        let metrics = ServiceMetrics()
        metrics.recordRequest(route: "/healthz", status: 200, seconds: 0.0001)
        metrics.recordRequest(route: "/healthz", status: 200, seconds: 0.003)
        metrics.recordRequest(route: "/healthz", status: 200, seconds: 20)
        let text = metrics.exposition()
        #expect(text.contains("receiptd_request_duration_seconds_bucket{le=\"0.0005\"} 1\n"))
        #expect(text.contains("receiptd_request_duration_seconds_bucket{le=\"0.005\"} 2\n"))
        #expect(text.contains("receiptd_request_duration_seconds_bucket{le=\"10.0\"} 2\n"))
        #expect(text.contains("receiptd_request_duration_seconds_bucket{le=\"+Inf\"} 3\n"))
        let sum = sampleValue(text, "receiptd_request_duration_seconds_sum")
        #expect(sum.map { abs($0 - 20.0031) < 1e-9 } == true, "sum \(String(describing: sum))")
    }

    @Test func metrics_countConcurrentRequestsExactly() async {
        let metrics = ServiceMetrics()
        let routes = makeRoutes(metrics: metrics)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<200 {
                group.addTask { _ = routes.handle(get("/healthz"), on: .main) }
            }
        }
        #expect(metrics.exposition().contains(#"receiptd_http_requests_total{route="/healthz",status="200"} 200"#))
    }
}

/// A sink that keeps lines for assertions.
final class CapturedLines: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    var sink: LogSink { { line in self.lines.withLock { $0.append(line) } } }
}

struct ServiceLogTests {
    let record = HTTPAccessRecord(
        method: "POST", path: "/v1/validate?device_id=3B76A7BD-8F5B-46A4-BCB1-CCE8DBD1B3CD", status: 422,
        responseBytes: 512, microseconds: 1234, requestID: "r-42", remoteAddress: "10.1.2.3:5555")

    @Test func textAccessLine_hasFieldsButNoQuery() {
        let lines = CapturedLines()
        ServiceLog(format: .text, clock: { fixedNow }, sink: lines.sink).access(record)
        #expect(lines.all == ["2024-05-01T12:00:00Z POST /v1/validate 422 512B 1234us id=r-42"])
    }

    @Test func jsonAccessLine_isOneParsableObjectWithoutQuery() throws {
        let lines = CapturedLines()
        ServiceLog(format: .json, clock: { fixedNow }, sink: lines.sink).access(record)
        let line = try #require(lines.all.first)
        #expect(!line.contains("\n"))
        #expect(!line.contains("3B76A7BD"))
        let json = try JSONValue(parsing: Array(line.utf8))
        #expect(json.keys == ["time", "method", "path", "status", "bytes", "duration_us", "request_id"])
        #expect(json["path"] == .string("/v1/validate"))
        #expect(json["status"] == .integer(422))
        #expect(json["duration_us"] == .integer(1234))
    }

    @Test func textAccessLine_escapesSpacesAndNewlinesInPath() {
        var hostile = record
        hostile.path = "/a b\nFAKE 200"
        let lines = CapturedLines()
        ServiceLog(format: .text, clock: { fixedNow }, sink: lines.sink).access(hostile)
        #expect(lines.all.first?.contains("/a%20b%0AFAKE%20200") == true)
    }

    @Test func event_writesFieldsInOrder() {
        let lines = CapturedLines()
        ServiceLog(format: .text, clock: { fixedNow }, sink: lines.sink).event("listening", [("apps", "2")])
        #expect(lines.all == ["2024-05-01T12:00:00Z listening apps=2"])
    }
}

struct ServeCommandTests {
    @Test func badConfig_returnsNonZeroWithOneLineError() throws {
        let folder = try ScratchFolder()
        let file = try folder.write("bad.json", "{\"apps\": [{\"bundle_id\": 5}]}")
        let output = CapturedLines()
        let errors = CapturedLines()
        let status = runServe(
            arguments: ["--config", file], environment: [:], output: output.sink, errors: errors.sink)
        #expect(status == 1)
        #expect(errors.all == ["receiptd: config \(file): apps[0].bundle_id: expected a string"])
        #expect(output.all.isEmpty)
    }

    @Test func missingServerAPIKey_stopsServeAtStart_namingTheFile() throws {
        let folder = try ScratchFolder()
        let file = try folder.write(
            "receiptd.json",
            #"{"port": 0, "apps": [{"bundle_id": "com.example.app", "server_api": {"key_id": "K", "issuer_id": "I", "private_key_file": "AuthKey_K.p8"}}]}"#)
        let output = CapturedLines()
        let errors = CapturedLines()
        let status = runServe(arguments: ["--config", file], environment: [:], output: output.sink, errors: errors.sink)
        #expect(status == 1)
        #expect(errors.all.count == 1)
        #expect(errors.all.first?.contains("AuthKey_K.p8") == true)
        #expect(output.all.isEmpty)
    }

    @Test func unknownFlag_returnsUsageError() {
        let errors = CapturedLines()
        let status = runServe(arguments: ["--bogus"], environment: [:], output: CapturedLines().sink, errors: errors.sink)
        #expect(status == 2)
        #expect(errors.all.first?.hasPrefix("Error: Unknown option '--bogus'") == true)
    }

    @Test func help_printsUsageAndSucceeds() {
        let output = CapturedLines()
        let status = runServe(arguments: ["--help"], environment: [:], output: output.sink, errors: CapturedLines().sink)
        #expect(status == 0)
        #expect(output.all.first?.contains("USAGE: serve") == true)
        #expect(output.all.first?.contains("RECEIPTD_PORT") == true)
    }
}

struct LogfmtQuotingTests {
    @Test(arguments: [
        ("plain", "plain"),
        ("no apps configured: accepts any bundle id", "\"no apps configured: accepts any bundle id\""),
        ("a\"b\nc", "\"a\\\"b\\nc\""),
        ("", "\"\""),
        ("k=v", "\"k=v\""),
    ])
    func eventValue_isBareOrQuoted(value: String, expected: String) {
        #expect(ServiceLog.quotedIfNeeded(value) == expected)
    }
}
