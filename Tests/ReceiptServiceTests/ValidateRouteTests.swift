import Foundation
import HTTP1Server
import ReceiptEngine
import Testing

@testable import ReceiptService
import JSONText

/// `POST /v1/validate` through the router, without sockets.
struct ValidateRouteTests {
    let routes = makeRoutes()

    // MARK: Body forms that reach the engine

    @Test(arguments: [
        ("application/octet-stream", junkDER),
        ("application/pkcs7-mime", junkDER),
        ("application/octet-stream; charset=binary", junkDER),
        ("application/octet-stream", Array(base64(junkDER).utf8)),
        ("text/plain", Array(base64(junkDER).utf8)),
        ("text/plain; charset=utf-8", Array("  \(base64(junkDER).prefix(4))\r\n\(base64(junkDER).dropFirst(4))\n".utf8)),
        ("application/json", Array("{\"receipt\": \"\(base64(junkDER))\"}".utf8)),
        ("APPLICATION/JSON; charset=UTF-8", Array("{\"receipt\": \"\(base64(junkDER))\"}".utf8)),
    ])
    func acceptedBodyForm_reachesEngineAndAnswers422(contentType: String, body: [UInt8]) {
        let response = routes.handle(post("/v1/validate", contentType: contentType, body: body), on: .main)
        #expect(response.status == 422)
        #expect(response.headers["Content-Type"] == "application/json")
        #expect(response.json?["valid"] == .bool(false))
        #expect(response.errorCode == "malformed_receipt")
    }

    @Test func missingContentType_readsBodyAsRawReceipt() {
        let response = routes.handle(post("/v1/validate", contentType: nil, body: junkDER), on: .main)
        #expect(response.status == 422)
        #expect(response.errorCode == "malformed_receipt")
    }

    @Test func multipartReceiptFile_reachesEngine() {
        let boundary = "------------------------d74496d66958873e"
        let body = multipartBody(boundary: boundary, parts: [("receipt", "r.der", junkDER)])
        let response = routes.handle(
            post("/v1/validate", contentType: "multipart/form-data; boundary=\(boundary)", body: body), on: .main)
        #expect(response.status == 422)
        #expect(response.errorCode == "malformed_receipt")
    }

    @Test func multipartBase64Field_andQuotedBoundary_reachEngine() {
        let boundary = "WebKitFormBoundary7MA4YWxkTrZu0gW"
        let body = multipartBody(
            boundary: boundary, parts: [("device_id", nil, []), ("receipt", nil, Array(base64(junkDER).utf8))])
        let response = routes.handle(
            post("/v1/validate", contentType: "multipart/form-data; boundary=\"\(boundary)\"", body: body), on: .main)
        #expect(response.status == 422)
        #expect(response.errorCode == "malformed_receipt")
    }

    // MARK: Bad requests

    @Test(arguments: [
        ("application/json", "{\"receipt\": ", "body_not_json"),
        ("application/json", "[1, 2]", "not_a_json_object"),
        ("application/json", "{\"device_id\": \"x\"}", "missing_receipt"),
        ("application/json", "{\"receipt\": 42}", "member_not_a_string"),
        ("application/json", "{\"receipt\": \"!!!not base64!!!\"}", "not_base64"),
        ("application/json", "{\"receipt\": \"\(base64(junkDER))\", \"device_id\": 7}", "member_not_a_string"),
        ("text/plain", "abc*def", "not_base64"),
        ("text/plain", "abcde", "not_base64"),
        ("text/plain", "", "missing_receipt"),
        ("application/octet-stream", "", "missing_receipt"),
        ("application/octet-stream", "QUJD=RA==", "not_base64"),
    ])
    func badBody_is400WithBadRequestCode(contentType: String, body: String, detail: String) {
        let response = routes.handle(post("/v1/validate", contentType: contentType, text: body), on: .main)
        #expect(response.status == 400)
        #expect(response.errorCode == "bad_request")
        #expect(response.errorDetail == detail, "\(response.text)")
    }

    @Test(arguments: [
        "application/x-www-form-urlencoded", "image/png", "application/xml", "nonsense",
    ])
    func otherContentType_is415(contentType: String) {
        let response = routes.handle(post("/v1/validate", contentType: contentType, body: junkDER), on: .main)
        #expect(response.status == 415)
        #expect(response.errorCode == "unsupported_media_type")
    }

    // MARK: Multipart malformations

    @Test func multipartWithoutBoundaryParameter_is400() {
        let response = routes.handle(post("/v1/validate", contentType: "multipart/form-data", body: junkDER), on: .main)
        #expect(response.status == 400)
        #expect(response.errorDetail == "missing_boundary")
    }

    @Test(arguments: MultipartMalformation.allCases)
    func malformedMultipart_is400(_ malformation: MultipartMalformation) {
        let response = routes.handle(
            post("/v1/validate", contentType: "multipart/form-data; boundary=XyZ", body: malformation.body), on: .main)
        #expect(response.status == 400)
        #expect(response.errorCode == "bad_request")
        #expect(response.errorDetail == malformation.detail, "\(response.text)")
    }

    @Test func multipartWithoutReceiptPart_is400() {
        let body = multipartBody(boundary: "XyZ", parts: [("device_id", nil, Array("x".utf8))])
        let response = routes.handle(post("/v1/validate", contentType: "multipart/form-data; boundary=XyZ", body: body), on: .main)
        #expect(response.status == 400)
        #expect(response.errorDetail == "missing_receipt")
    }

    // MARK: Device id

    @Test(arguments: [
        ("/v1/validate?device_id=not-a-device", [(String, String)]()),
        ("/v1/validate", [("X-Device-Id", "12345")]),
        ("/v1/validate", [("x-device-id", "6c:40:08:b5:94")]),
    ])
    func malformedDeviceID_is400(target: String, headers: [(String, String)]) {
        let response = routes.handle(
            post(target, contentType: "application/octet-stream", body: junkDER, headers: headers.map { (HTTPHeaderName($0.0), $0.1) }), on: .main)
        #expect(response.status == 400)
        #expect(response.errorDetail == "invalid_device_id")
    }

    @Test func malformedDeviceIDInJSON_is400() {
        let body = "{\"receipt\": \"\(base64(junkDER))\", \"device_id\": \"nope\"}"
        let response = routes.handle(post("/v1/validate", contentType: "application/json", text: body), on: .main)
        #expect(response.status == 400)
        #expect(response.errorDetail == "invalid_device_id")
    }

    @Test func malformedDeviceIDInMultipart_is400() {
        let body = multipartBody(
            boundary: "XyZ", parts: [("receipt", "r.der", junkDER), ("device_id", nil, Array("nope".utf8))])
        let response = routes.handle(post("/v1/validate", contentType: "multipart/form-data; boundary=XyZ", body: body), on: .main)
        #expect(response.status == 400)
        #expect(response.errorDetail == "invalid_device_id")
    }

    @Test func deviceID_bodyWinsOverHeaderWhichWinsOverQuery() throws {
        let uuid = "3B76A7BD-8F5B-46A4-BCB1-CCE8DBD1B3CD"
        let mac = "6c:40:08:b5:94:5e"
        let request = post(
            "/v1/validate?device_id=00:00:00:00:00:01", contentType: "application/octet-stream", body: junkDER,
            headers: [("X-Device-Id", mac)])
        let fromBody = try ReceiptRoutes.deviceIdentifier(
            submission: ReceiptSubmission(signedData: .receipt(junkDER), deviceID: uuid), request: request)
        #expect(fromBody == DeviceIdentifier(uuid))
        let fromHeader = try ReceiptRoutes.deviceIdentifier(
            submission: ReceiptSubmission(signedData: .receipt(junkDER), deviceID: ""), request: request)
        #expect(fromHeader == DeviceIdentifier(mac))
        let queryOnly = post("/v1/validate?device_id=00:00:00:00:00:01", contentType: nil, body: junkDER)
        let fromQuery = try ReceiptRoutes.deviceIdentifier(
            submission: ReceiptSubmission(signedData: .receipt(junkDER), deviceID: nil), request: queryOnly)
        #expect(fromQuery == DeviceIdentifier("00:00:00:00:00:01"))
    }

    // MARK: Routing

    @Test(arguments: ["GET", "PUT", "DELETE"])
    func wrongMethodOnValidate_is405WithAllow(method: String) {
        let response = routes.handle(request(HTTPMethod(rawValue: method), "/v1/validate"), on: .main)
        #expect(response.status == 405)
        #expect(response.headers["Allow"] == "POST")
        #expect(response.errorCode == "method_not_allowed")
    }

    @Test(arguments: ["/healthz", "/readyz", "/metrics", "/"])
    func postToReadOnlyRoute_is405AllowingGet(path: String) {
        let response = routes.handle(post(path, contentType: nil, body: []), on: .main)
        #expect(response.status == 405)
        #expect(response.headers["Allow"] == "GET")
    }

    @Test(arguments: ["/healthz", "/readyz", "/metrics", "/"])
    func headOnReadOnlyRoute_answersAsGet(path: String) {
        let head = routes.handle(request(.head, path), on: .main)
        let get = routes.handle(get(path), on: .main)
        #expect(head.status == get.status)
        #expect(head.headers["Content-Type"] == get.headers["Content-Type"])
    }

    @Test func headOnValidate_is405() {
        let response = routes.handle(request(.head, "/v1/validate"), on: .main)
        #expect(response.status == 405)
        #expect(response.headers["Allow"] == "POST")
    }

    @Test(arguments: ["/nope", "/v1/validate/", "/v2/validate", "/healthz/extra"])
    func unknownPath_is404NotFound(path: String) {
        let response = routes.handle(get(path), on: .main)
        #expect(response.status == 404)
        #expect(response.errorCode == "not_found")
        #expect(response.headers["Content-Type"] == "application/json")
    }

    // MARK: Content negotiation

    @Test func browserAccept_getsHTMLVerdictWithSameStatus() {
        let accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        let response = routes.handle(
            post("/v1/validate", contentType: "application/octet-stream", body: junkDER, headers: [("Accept", accept)]), on: .main)
        #expect(response.status == 422)
        #expect(response.headers["Content-Type"]?.hasPrefix("text/html") == true)
        #expect(response.text.contains("malformed_receipt"))
        #expect(response.text.contains("<table id=\"checks\">"))
    }

    @Test func browserAccept_getsHTMLErrorPageForBadRequest() {
        let response = routes.handle(
            post("/v1/validate", contentType: "text/plain", text: "***", headers: [("Accept", "text/html")]), on: .main)
        #expect(response.status == 400)
        #expect(response.text.contains("<!DOCTYPE html>"))
    }

    @Test(arguments: ["*/*", "application/json", "application/json, text/html;q=0.5", "text/html;q=0.5, */*"])
    func nonBrowserAccept_getsJSON(accept: String) {
        let response = routes.handle(
            post("/v1/validate", contentType: "application/octet-stream", body: junkDER, headers: [("Accept", accept)]), on: .main)
        #expect(response.headers["Content-Type"] == "application/json")
    }
}

/// Broken multipart bodies, each refused with a message that names the problem.
enum MultipartMalformation: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case noBoundaryLine, unterminatedPart, unterminatedHeaders, hugePartHeaders, tooManyParts

    var testDescription: String { rawValue }

    var body: [UInt8] {
        switch self {
        case .noBoundaryLine:
            return Array("just some bytes, no delimiter".utf8)
        case .unterminatedPart:
            return Array("--XyZ\r\nContent-Disposition: form-data; name=\"receipt\"\r\n\r\nMIIB".utf8)
        case .unterminatedHeaders:
            return Array("--XyZ\r\nContent-Disposition: form-data; name=\"receipt\"\r\n".utf8)
        case .hugePartHeaders:
            let filler = String(repeating: "a", count: 9000)
            return Array("--XyZ\r\nX-Filler: \(filler)\r\n\r\nMIIB\r\n--XyZ--\r\n".utf8)
        case .tooManyParts:
            return multipartBody(
                boundary: "XyZ", parts: (0..<17).map { ("field\($0)", nil, Array("v".utf8)) })
        }
    }

    var detail: String {
        switch self {
        case .noBoundaryLine: return "no_boundary_line"
        case .unterminatedPart: return "multipart_unterminated"
        case .unterminatedHeaders: return "part_headers_unterminated"
        case .hugePartHeaders: return "part_headers_too_large"
        case .tooManyParts: return "too_many_parts"
        }
    }
}
