/// Serializes responses to the bytes of one write: status line, headers, `Content-Length`, body.
public enum HTTPResponseEncoder {
    /// What the response says about the connection afterwards.
    public enum Persistence: Sendable, Hashable {
        /// HTTP/1.1 default: no `Connection` header.
        case keepAlive
        /// An HTTP/1.0 client asked for keep-alive: echo `Connection: keep-alive` or it waits for the close.
        case keepAliveEchoed
        /// `Connection: close`; the server closes after this response.
        case close
    }

    /// The interim response that lets a client send the body it announced with `Expect: 100-continue`.
    public static let continueResponse: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    /// The response's bytes. `Content-Length`, `Transfer-Encoding` and `Connection` set by the handler are replaced;
    /// header fields that could split the response (bad names, CR/LF/NUL in values) are dropped. `headOnly` (HEAD)
    /// keeps `Content-Length` of the body it leaves out.
    public static func encode(_ response: HTTPResponse, headOnly: Bool = false, persistence: Persistence) -> [UInt8] {
        let status = (100...999).contains(response.status) ? response.status : 500
        // RFC 9110 §6.4.1: these never carry content, nor (1xx, 204) a Content-Length.
        let forbidsContent = status < 200 || status == 204 || status == 304
        // Built as bytes, not by string interpolation: this runs once per response.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128 + response.headers.fields.count * 48 + (headOnly ? 0 : response.body.count))
        func append(_ text: String) { bytes.append(contentsOf: text.utf8) }
        append("HTTP/1.1 ")
        append(String(status))
        bytes.append(UInt8(ascii: " "))
        append(reasonPhrase(status))
        append("\r\n")
        for (name, value) in response.headers {
            if name.equalsIgnoringASCIICase("content-length") || name.equalsIgnoringASCIICase("transfer-encoding")
                || name.equalsIgnoringASCIICase("connection")
            {
                continue
            }
            guard !name.isEmpty, name.utf8.allSatisfy(\.isTokenCharacter),
                value.utf8.allSatisfy({ $0 == .tab || ($0 >= 0x20 && $0 != 0x7F) })
            else { continue }
            append(name)
            append(": ")
            append(value)
            append("\r\n")
        }
        if status >= 200, status != 204 {
            append("Content-Length: ")
            append(String(forbidsContent ? 0 : response.body.count))
            append("\r\n")
        }
        switch persistence {
        case .keepAlive: break
        case .keepAliveEchoed: append("Connection: keep-alive\r\n")
        case .close: append("Connection: close\r\n")
        }
        append("\r\n")
        if !headOnly, !forbidsContent {
            bytes.append(contentsOf: response.body)
        }
        return bytes
    }

    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 411: "Length Required"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 422: "Unprocessable Content"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status"
        }
    }
}

extension HTTPResponse {
    /// A response the server makes itself: `{"error":{"code":…,"message":…}}`.
    static func serverError(status: Int, message: String) -> HTTPResponse {
        let code =
            switch status {
            case 408: "request_timeout"
            case 413: "payload_too_large"
            case 431: "header_too_large"
            case 501: "not_implemented"
            case 503: "service_unavailable"
            case 505: "http_version_not_supported"
            default: "bad_request"
            }
        let body = #"{"error":{"code":"\#(code)","message":"\#(jsonEscaped(message))"}}"#
        return HTTPResponse(
            status: status,
            headers: HTTPHeaders([("Content-Type", "application/json")]),
            body: Array(body.utf8)
        )
    }
}

private func jsonEscaped(_ text: String) -> String {
    var out = ""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where scalar.value < 0x20:
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out
}
