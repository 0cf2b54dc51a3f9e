import Foundation
import HTTP1Server
import ReceiptEngine
import ReceiptForge
import TestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import ReceiptService
import JSONText

/// The service's routes behind the real HTTP server on a free port, driven by URLSession and curl as backends and
/// support staff drive it: every endpoint and every status the contract names.
@Suite(.serialized)
final class ServiceOverSocketTests {
    static let device = "3B76A7BD-8F5B-46A4-BCB1-CCE8DBD1B3CD"

    let server: HTTPServer
    let baseURL: String
    let receipt: [UInt8]

    init() throws {
        var configuration = ServiceConfiguration()
        configuration.port = 0
        configuration.maxBodyBytes = 2 * 1024 * 1024
        configuration.trustAnchors = [TestPKI.standard.rootAnchor]
        configuration.apps = [.init(bundleID: "com.example.app", versions: ["1.0"], sharedSecret: "s3cret")]
        configuration.environments = [.production]
        let routes = ReceiptRoutes(
            configuration: configuration, validator: configuration.makeValidator(), metrics: ServiceMetrics(),
            readiness: ServiceReadiness(isReady: true))
        server = HTTPServer(
            configuration: configuration.httpServerConfiguration, handler: { routes.handle($0, on: .main) },
            failureResponse: routes.failureResponse)
        baseURL = "http://127.0.0.1:\(try server.start())"
        var blueprint = ReceiptBlueprint(
            bundleID: "com.example.app", applicationVersion: "1.0", deviceIdentifier: DeviceIdentifier(Self.device))
        blueprint.purchases = [
            try PurchaseBlueprint(
                spec: "product=pro.monthly,transaction=2,original=1,expires=2099-01-01T00:00:00Z",
                defaultDate: blueprint.creationDate)
        ]
        receipt = try blueprint.forge(with: TestPKI.standard)
    }

    deinit {
        server.shutdown()
        server.waitUntilStopped()
    }

    private func send(
        _ method: String, _ path: String, contentType: String? = nil, body: [UInt8]? = nil,
        headers: [String: String] = [:]
    ) async throws -> (status: Int, headers: [AnyHashable: Any], json: JSONValue?) {
        var request = URLRequest(url: URL(string: baseURL + path)!)
        request.httpMethod = method
        if let contentType { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let body { request.httpBody = Data(body) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        return (http.statusCode, http.allHeaderFields, try? JSONValue(parsing: Array(data)))
    }

    private func curl(_ arguments: [String]) throws -> String {
        try runCurl(["-s"] + arguments, maxTime: 10).stdout
    }

    private var base64: [UInt8] { Array(Data(receipt).base64EncodedString(options: .lineLength64Characters).utf8) }

    @Test func rawDER_withDeviceInQuery_is200Valid() async throws {
        let answer = try await send(
            "POST", "/v1/validate?device_id=\(Self.device)", contentType: "application/octet-stream", body: receipt)
        #expect(answer.status == 200)
        #expect(answer.json?["valid"] == .bool(true))
        #expect(answer.json?["checks"]?["device_hash"] == .string("passed"))
        #expect(answer.headers["X-Request-Id"] != nil)
    }

    @Test func pkcs7Mime_base64Text_andJSON_areAccepted() async throws {
        let mime = try await send("POST", "/v1/validate", contentType: "application/pkcs7-mime", body: receipt)
        let text = try await send("POST", "/v1/validate", contentType: "text/plain", body: base64)
        let json = try await send(
            "POST", "/v1/validate", contentType: "application/json",
            body: Array(#"{"receipt": "\#(Data(receipt).base64EncodedString())", "device_id": "\#(Self.device)"}"#.utf8))
        #expect([mime.status, text.status, json.status] as [Int] == [200, 200, 200])
        #expect(json.json?["checks"]?["device_hash"] == .string("passed"))
    }

    @Test func otherDeviceInHeader_is422WithCode() async throws {
        let answer = try await send(
            "POST", "/v1/validate", contentType: "application/octet-stream", body: receipt,
            headers: ["X-Device-Id": "00:11:22:33:44:55"])
        #expect(answer.status == 422)
        #expect(answer.json?["error"]?["code"] == .string("device_hash_mismatch"))
        #expect(answer.json?["receipt"]?["bundle_id"] == .string("com.example.app"))
    }

    @Test func badRequests_are400_otherTypes415_unknownPaths404_wrongMethods405() async throws {
        let badBase64 = try await send("POST", "/v1/validate", contentType: "text/plain", body: Array("@@@".utf8))
        let badJSON = try await send("POST", "/v1/validate", contentType: "application/json", body: Array("{".utf8))
        let badDevice = try await send(
            "POST", "/v1/validate?device_id=nope", contentType: "application/octet-stream", body: receipt)
        let image = try await send("POST", "/v1/validate", contentType: "image/png", body: receipt)
        let missing = try await send("GET", "/nowhere")
        let wrongMethod = try await send("GET", "/v1/validate")
        #expect([badBase64.status, badJSON.status, badDevice.status] as [Int] == [400, 400, 400])
        #expect(badBase64.json?["error"]?["code"] == .string("bad_request"))
        #expect(image.status == 415)
        #expect(missing.status == 404)
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.headers["Allow"] as? String == "POST")
    }

    @Test func bodyOverTheLimit_is413() async throws {
        let answer = try await send(
            "POST", "/v1/validate", contentType: "application/octet-stream", body: [UInt8](repeating: 0x30, count: 3 << 20))
        #expect(answer.status == 413)
        #expect(answer.json?["error"]?["code"] == .string("payload_too_large"))
    }

    @Test func verifyReceipt_answersAppleStatuses() async throws {
        func status(_ path: String, _ body: String) async throws -> JSONValue? {
            try await send("POST", path, body: Array(body.utf8)).json?["status"]
        }
        let data = Data(receipt).base64EncodedString()
        #expect(try await status("/verifyReceipt", #"{"receipt-data": "\#(data)", "password": "s3cret"}"#) == .integer(0))
        #expect(try await status("/verifyReceipt", #"{"receipt-data": "\#(data)", "password": "x"}"#) == .integer(21004))
        #expect(try await status("/verifyReceipt", #"{"receipt-data": "AAAA", "password": "s3cret"}"#) == .integer(21002))
        #expect(try await status("/verifyReceipt", #"{"password": "s3cret"}"#) == .integer(21002))
        #expect(try await status("/sandbox/verifyReceipt", #"{"receipt-data": "\#(data)", "password": "s3cret"}"#) == .integer(21008))
    }

    @Test func operations_healthReadyMetricsAndSupportPage() async throws {
        #expect(try await send("GET", "/healthz").status == 200)
        #expect(try await send("GET", "/readyz").json?["status"] == .string("ready"))
        _ = try await send("POST", "/v1/validate", contentType: "application/octet-stream", body: receipt)
        let metrics = try curl([baseURL + "/metrics"])
        #expect(metrics.contains(#"receiptd_validations_total{result="valid"} 1"#))
        #expect(metrics.contains("receiptd_open_connections"))
        let page = try curl([baseURL + "/"])
        #expect(page.contains("<form"))
    }

    @Test func curlAsStaffTypeIt_fileUpload_base64Pipe_andMultipart() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("receiptd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("receipt.der").path
        _ = FileManager.default.createFile(atPath: file, contents: Data(receipt))
        let binary = try curl([
            "--data-binary", "@" + file, "-H", "Content-Type: application/octet-stream",
            "\(baseURL)/v1/validate?device_id=\(Self.device)",
        ])
        #expect(binary.contains(#""valid":true"#))
        let form = try curl(["-F", "receipt=@" + file, "-F", "device_id=00:11:22:33:44:55", baseURL + "/v1/validate"])
        #expect(form.contains(#""code":"device_hash_mismatch""#))
        let textFile = folder.appendingPathComponent("receipt.b64").path
        _ = FileManager.default.createFile(atPath: textFile, contents: Data(base64))
        let text = try curl(["--data-binary", "@" + textFile, "-H", "Content-Type: text/plain", baseURL + "/v1/validate"])
        #expect(text.contains(#""valid":true"#))
        let html = try curl(["-H", "Accept: text/html", "-F", "receipt=@" + file, baseURL + "/v1/validate"])
        #expect(html.contains("<html"))
        #expect(html.contains("pro.monthly"))
    }
}
