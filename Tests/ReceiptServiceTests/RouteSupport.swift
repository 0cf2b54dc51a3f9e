import Foundation
import HTTP1Server
import ReceiptEngine
import TestSupport
import Testing

@testable import ReceiptService
import JSONText

func makeRoutes(
    _ configuration: ServiceConfiguration = ServiceConfiguration(), metrics: ServiceMetrics = ServiceMetrics(),
    readiness: ServiceReadiness = ServiceReadiness()
) -> ReceiptRoutes {
    ReceiptRoutes(
        configuration: configuration, validator: configuration.makeValidator(), metrics: metrics,
        readiness: readiness, clock: { fixedNow })
}

func post(
    _ target: String, contentType: String?, body: [UInt8], headers: [(HTTPHeaderName, String)] = []
) -> HTTPRequest {
    var fields = headers
    if let contentType { fields.append(("Content-Type", contentType)) }
    return HTTPRequest(
        method: "POST", target: target, headers: HTTPHeaders(fields), body: body, peer: .loopbackClient,
        listener: .loopback)
}

func post(_ target: String, contentType: String?, text: String, headers: [(HTTPHeaderName, String)] = []) -> HTTPRequest {
    post(target, contentType: contentType, body: Array(text.utf8), headers: headers)
}

func get(_ target: String, headers: [(HTTPHeaderName, String)] = []) -> HTTPRequest {
    request(.get, target, headers: headers)
}

/// A request from a client on this machine to receiptd bound to loopback, as in the default configuration.
func request(_ method: HTTPMethod, _ target: String, headers: [(HTTPHeaderName, String)] = []) -> HTTPRequest {
    HTTPRequest(
        method: method, target: target, headers: HTTPHeaders(headers), peer: .loopbackClient, listener: .loopback)
}

extension HTTPResponse {
    var json: JSONValue? { try? JSONValue(parsing: body) }
    var text: String { String(decoding: body, as: UTF8.self) }
    var errorCode: String? {
        if case .string(let code)? = json?["error"]?["code"] { return code }
        return nil
    }

    /// `error.detail`: which part of a malformed request failed.
    var errorDetail: String? { json?["error"]?["detail"]?.stringValue }
}

extension JSONValue {
    var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }
    var integerValue: Int64? {
        if case .integer(let number) = self { return number }
        return nil
    }
    var boolValue: Bool? {
        if case .bool(let flag) = self { return flag }
        return nil
    }
    var arrayValue: [JSONValue]? {
        if case .array(let values) = self { return values }
        return nil
    }
    var keys: [String] {
        if case .object(let members) = self { return members.map(\.key) }
        return []
    }
}

func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

/// A multipart/form-data body as curl -F writes it.
func multipartBody(boundary: String, parts: [(name: String, filename: String?, content: [UInt8])]) -> [UInt8] {
    var body: [UInt8] = []
    for part in parts {
        body += Array("--\(boundary)\r\n".utf8)
        var disposition = "Content-Disposition: form-data; name=\"\(part.name)\""
        if let filename = part.filename { disposition += "; filename=\"\(filename)\"" }
        body += Array("\(disposition)\r\n".utf8)
        if part.filename != nil { body += Array("Content-Type: application/octet-stream\r\n".utf8) }
        body += Array("\r\n".utf8)
        body += part.content
        body += Array("\r\n".utf8)
    }
    body += Array("--\(boundary)--\r\n".utf8)
    return body
}

/// Bytes that are certainly not a receipt but are not base64 text either.
let junkDER: [UInt8] = [0x30, 0x82, 0x01, 0x00, 0xFF, 0xFE, 0x00, 0x01]
