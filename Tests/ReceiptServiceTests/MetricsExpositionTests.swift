import HTTP1Server
import ReceiptEngine
import Testing

@testable import ReceiptService

/// `/metrics` as swift-prometheus renders it: every metric receiptd has exposed keeps its name, type and label names,
/// and recording keeps exact counts however it is spread over scrapes and threads.
struct MetricsExpositionTests {
    /// The families `/metrics` had when it was written by hand, with their label names (`le` aside).
    static let families: [(name: String, type: String, labels: [String])] = [
        ("receiptd_http_requests_total", "counter", ["route", "status"]),
        ("receiptd_validations_total", "counter", ["result"]),
        ("receiptd_verdicts_total", "counter", ["kind", "result"]),
        ("receiptd_request_duration_seconds", "histogram", []),
        ("receiptd_notification_conflicts_total", "counter", []),
        ("receiptd_open_connections", "gauge", []),
        ("receiptd_server_api_requests_total", "counter", ["endpoint", "outcome"]),
        ("receiptd_server_api_last_sync_age_seconds", "gauge", ["app", "environment"]),
        ("receiptd_log_lines_dropped_total", "counter", []),
        ("receiptd_server_api_waiting_requests", "gauge", []),
        ("receiptd_webhook_deliveries_total", "counter", ["webhook", "outcome"]),
        ("receiptd_webhook_pending", "gauge", ["webhook"]),
        ("receiptd_webhook_oldest_pending_seconds", "gauge", ["webhook"]),
        ("receiptd_webhook_delivery_seconds", "histogram", []),
        ("receiptd_apple_calls", "gauge", ["kind", "state"]),
    ]

    @Test func exposition_keepsEveryFamilyWithItsTypeHelpAndLabelNames() throws {
        let metrics = ServiceMetrics()
        metrics.observeOpenConnections { 2 }
        let routes = makeRoutes(metrics: metrics)
        _ = routes.handle(get("/healthz"), on: .main)
        _ = routes.handle(post("/v1/validate", contentType: "application/octet-stream", body: junkDER), on: .main)
        _ = routes.handle(post("/v1/validate", contentType: "text/plain", text: "eyJhbGciOiJFUzI1NiJ9.e30.c2ln"), on: .main)
        metrics.recordNotificationConflict()
        metrics.serverAPI.recordRequest(endpoint: "get_notification_history", outcome: "ok")
        metrics.serverAPI.recordSync(app: "com.example.app", environment: "Production", at: 0)
        metrics.webhooks.register(webhook: "backend")
        metrics.webhooks.recordTry(webhook: "backend", outcome: .retry, seconds: 0.2)
        metrics.appleCalls.publish([])
        let response = routes.handle(get("/metrics"), on: .main)
        #expect(response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8")

        let exposition = try Exposition(response.text)
        for family in Self.families {
            #expect(exposition.types[family.name] == family.type, "\(family.name)")
            #expect(exposition.helps[family.name]?.isEmpty == false, "\(family.name) has no HELP")
            #expect(exposition.labelNames[family.name] == [family.labels], "\(family.name)")
        }
        #expect(Set(exposition.types.keys) == Set(Self.families.map(\.name)))
        #expect(exposition.samples[#"receiptd_verdicts_total{kind="unknown",result="malformed_jws"}"#] == 1)
        #expect(exposition.samples[#"receiptd_verdicts_total{kind="receipt",result="malformed_receipt"}"#] == 1)
        #expect(exposition.samples["receiptd_open_connections"] == 2)
        #expect(exposition.samples["receiptd_notification_conflicts_total"] == 1)
        #expect(exposition.samples[#"receiptd_webhook_deliveries_total{webhook="backend",outcome="retry"}"#] == 1)
        #expect(exposition.samples[#"receiptd_webhook_deliveries_total{webhook="backend",outcome="delivered"}"#] == 0)
        #expect(exposition.samples[#"receiptd_webhook_pending{webhook="backend"}"#] == 0)
    }

    @Test func everyFamilyIsNamed_beforeItsFirstSample() throws {
        let metrics = ServiceMetrics()
        _ = makeRoutes(metrics: metrics)
        let exposition = try Exposition(metrics.exposition())
        for family in Self.families {
            #expect(exposition.types[family.name] == family.type, "\(family.name)")
        }
        #expect(!exposition.samples.keys.contains { $0.hasPrefix("receiptd_server_api_requests_total") })
    }

    @Test func everyVerdictIsExposedAtZero_beforeItHappens() throws {
        let exposition = try Exposition(ServiceMetrics().exposition())
        for code in ["valid"] + ValidationError.Code.all.map(\.rawValue) {
            #expect(exposition.samples[#"receiptd_validations_total{result="\#(code)"}"#] == 0, "\(code)")
            for kind in SignedDataKind.allCases {
                #expect(
                    exposition.samples[#"receiptd_verdicts_total{kind="\#(kind.rawValue)",result="\#(code)"}"#] == 0)
            }
        }
        // A request counter shows only what happened: no zero series for every route and status.
        #expect(!exposition.samples.keys.contains { $0.hasPrefix("receiptd_http_requests_total") })
    }

    @Test func durations_keepBucketsCountAndSum_acrossScrapes() throws {
        let metrics = ServiceMetrics()
        for seconds in [0.0002, 0.0004, 0.0005, 0.7] { metrics.recordRequest(route: "/healthz", status: 200, seconds: seconds) }
        _ = metrics.exposition()
        for seconds in [0.0003, 12.0] { metrics.recordRequest(route: "/healthz", status: 200, seconds: seconds) }
        let exposition = try Exposition(metrics.exposition())
        let bucket = { (le: String) in exposition.samples[#"receiptd_request_duration_seconds_bucket{le="\#(le)"}"#] }
        #expect(bucket("0.0005") == 4)
        #expect(bucket("0.5") == 4)
        #expect(bucket("1.0") == 5)
        #expect(bucket("10.0") == 5)
        #expect(bucket("+Inf") == 6)
        #expect(exposition.samples["receiptd_request_duration_seconds_count"] == 6)
        let sum = try #require(exposition.samples["receiptd_request_duration_seconds_sum"])
        #expect(abs(sum - 12.7014) < 1e-9, "sum \(sum)")
        // Bounds as they were, spelled as Prometheus 3 normalizes them (1.0, not 1).
        let bounds = exposition.samples.keys.compactMap { key -> Double? in
            guard key.hasPrefix("receiptd_request_duration_seconds_bucket{le=\""), !key.contains("+Inf") else { return nil }
            return Double(key.dropFirst("receiptd_request_duration_seconds_bucket{le=\"".count).dropLast(2))
        }
        #expect(bounds.sorted() == ServiceMetrics.durationBuckets)
    }

    @Test(arguments: [-1.0, Double.nan, Double.infinity, 1e300])
    func aDurationFromABrokenClock_isCountedWithoutTrapping(seconds: Double) throws {
        let metrics = ServiceMetrics()
        metrics.recordRequest(route: "/healthz", status: 200, seconds: seconds)
        let exposition = try Exposition(metrics.exposition())
        #expect(exposition.samples["receiptd_request_duration_seconds_count"] == 1)
    }

    @Test func statusesAndRoutesOutsideTheTables_areCountedToo() throws {
        let metrics = ServiceMetrics()
        metrics.recordRequest(route: "/healthz", status: 418, seconds: 0)
        metrics.recordRequest(route: "/healthz", status: 418, seconds: 0)
        metrics.recordRequest(route: "/elsewhere", status: 200, seconds: 0)
        metrics.recordVerdict(kind: .transaction, error: ValidationError(.init(rawValue: "new_code"), "new"))
        let exposition = try Exposition(metrics.exposition())
        #expect(exposition.samples[#"receiptd_http_requests_total{route="/healthz",status="418"}"#] == 2)
        #expect(exposition.samples[#"receiptd_http_requests_total{route="/elsewhere",status="200"}"#] == 1)
        #expect(exposition.samples[#"receiptd_verdicts_total{kind="transaction",result="new_code"}"#] == 1)
    }

    @Test func droppedLogLines_areCounted() throws {
        let metrics = ServiceMetrics()
        metrics.recordLogLinesDropped()
        metrics.recordLogLinesDropped(4)
        metrics.recordLogLinesDropped(-3)
        #expect(try Exposition(metrics.exposition()).samples["receiptd_log_lines_dropped_total"] == 5)
    }

    @Test func eachInstance_hasItsOwnRegistry() throws {
        let first = ServiceMetrics()
        let second = ServiceMetrics()
        first.recordNotificationConflict()
        #expect(try Exposition(second.exposition()).samples["receiptd_notification_conflicts_total"] == 0)
        #expect(try Exposition(first.exposition()).samples["receiptd_notification_conflicts_total"] == 1)
    }

    @Test func recordingFromManyThreads_whileScraping_losesNothing() async throws {
        let metrics = ServiceMetrics()
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<500 {
                        metrics.recordRequest(route: "/v1/validate", status: 200, seconds: Double(index % 7) * 0.001)
                        if task == 0, index % 50 == 0 { _ = metrics.exposition() }
                    }
                }
            }
        }
        let exposition = try Exposition(metrics.exposition())
        #expect(exposition.samples[#"receiptd_http_requests_total{route="/v1/validate",status="200"}"#] == 4000)
        #expect(exposition.samples["receiptd_request_duration_seconds_count"] == 4000)
        #expect(exposition.samples[#"receiptd_request_duration_seconds_bucket{le="+Inf"}"#] == 4000)
        // 8 tasks × 500 durations of (index % 7) ms.
        let expectedSum = (0..<500).reduce(0.0) { $0 + Double($1 % 7) * 0.001 } * 8
        let sum = try #require(exposition.samples["receiptd_request_duration_seconds_sum"])
        #expect(abs(sum - expectedSum) < 1e-6, "sum \(sum), expected \(expectedSum)")
    }

    @Test func metricsRoute_isNotAnsweredOnTheEventLoop() {
        let routes = makeRoutes()
        #expect(!routes.mayAnswerInline(get("/metrics")))
        #expect(routes.mayAnswerInline(get("/healthz")))
    }
}

/// The text exposition format 0.0.4 read strictly enough for the tests: every line a comment (`# HELP`, `# TYPE`) or
/// a sample `name{label="value",...} number`; anything else throws.
struct Exposition {
    struct Malformed: Error, CustomStringConvertible {
        var line: String
        var description: String { "not a line of the exposition format: \(line)" }
    }

    var types: [String: String] = [:]
    var helps: [String: String] = [:]
    /// Per family, each distinct list of label names its samples carry (`le` aside).
    var labelNames: [String: Set<[String]>] = [:]
    /// Each sample's name with its labels as written, to its value.
    var samples: [String: Double] = [:]

    init(_ text: String) throws {
        for line in text.split(separator: "\n").map(String.init) {
            if line.hasPrefix("# ") {
                let parts = line.split(separator: " ", maxSplits: 3).map(String.init)
                guard parts.count >= 3 else { throw Malformed(line: line) }
                switch parts[1] {
                case "TYPE":
                    guard parts.count == 4, types[parts[2]] == nil else { throw Malformed(line: line) }
                    types[parts[2]] = parts[3]
                case "HELP":
                    guard helps[parts[2]] == nil else { throw Malformed(line: line) }
                    helps[parts[2]] = parts.count == 4 ? parts[3] : ""
                default: throw Malformed(line: line)
                }
                continue
            }
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                throw Malformed(line: line)
            }
            let series = String(line[..<space])
            guard samples.updateValue(value, forKey: series) == nil else { throw Malformed(line: line) }
            let name = String(series.prefix { $0 != "{" })
            var names: [String] = []
            if series.contains("{") {
                guard series.hasSuffix("}") else { throw Malformed(line: line) }
                let body = series.dropFirst(name.count + 1).dropLast()
                for pair in try Self.labelPairs(body, line: line) where pair != "le" { names.append(pair) }
            }
            let family = types[name] != nil ? name : Self.histogramFamily(of: name)
            guard types[family] != nil else { throw Malformed(line: line) }
            labelNames[family, default: []].insert(names)
        }
    }

    private static func histogramFamily(of name: String) -> String {
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) { return String(name.dropLast(suffix.count)) }
        return name
    }

    /// The label names of `name="value",...`, values escaped as the format says.
    private static func labelPairs(_ body: Substring, line: String) throws -> [String] {
        var names: [String] = []
        var rest = body[...]
        while !rest.isEmpty {
            guard let equals = rest.firstIndex(of: "="), rest[rest.index(after: equals)...].first == "\"" else {
                throw Malformed(line: line)
            }
            names.append(String(rest[..<equals]))
            var index = rest.index(equals, offsetBy: 2)
            while index < rest.endIndex, rest[index] != "\"" {
                index = rest.index(index, offsetBy: rest[index] == "\\" ? 2 : 1, limitedBy: rest.endIndex) ?? rest.endIndex
            }
            guard index < rest.endIndex else { throw Malformed(line: line) }
            rest = rest[rest.index(after: index)...]
            if rest.first == "," { rest = rest.dropFirst() }
        }
        return names
    }
}

/// The value of the unlabelled sample `name` in `text`.
func sampleValue(_ text: String, _ name: String) -> Double? {
    (try? Exposition(text))?.samples[name]
}
