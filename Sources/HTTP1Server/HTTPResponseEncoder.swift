/// Serializes responses: status line, headers, `Content-Length`, then the body.
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

    /// The response's head, and the body's pieces to send after it (none when none is sent): the connection writes
    /// them with one `sendmsg`, so that an answer of hundreds of kilobytes (an account's) is not copied behind its
    /// head.
    /// `Content-Length`, `Transfer-Encoding` and `Connection` set by the handler are replaced; header fields that could
    /// split the response (bad names, CR/LF/NUL in values) are dropped. `headOnly` (HEAD) keeps `Content-Length` of
    /// the body it leaves out.
    public static func encode(
        _ response: HTTPResponse, headOnly: Bool = false, persistence: Persistence
    ) -> (head: [UInt8], body: [ArraySlice<UInt8>]) {
        let status = (100...999).contains(response.status.code) ? response.status : .internalServerError
        // RFC 9110 §6.4.1: these never carry content, nor (1xx, 204) a Content-Length.
        let forbidsContent = status.code < 200 || status.code == 204 || status.code == 304
        // Built as bytes, not by string interpolation: this runs once per response.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128 + response.headers.fields.count * 48)
        func append(_ text: String) { bytes.append(contentsOf: text.utf8) }
        append("HTTP/1.1 ")
        append(String(status.code))
        bytes.append(UInt8(ascii: " "))
        append(status.reasonPhrase)
        append("\r\n")
        for (name, value) in response.headers.fields {
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
        if status.code >= 200, status.code != 204 {
            append("Content-Length: ")
            append(String(forbidsContent ? 0 : response.bodyCount))
            append("\r\n")
        }
        switch persistence {
        case .keepAlive: break
        case .keepAliveEchoed: append("Connection: keep-alive\r\n")
        case .close: append("Connection: close\r\n")
        }
        append("\r\n")
        return (bytes, headOnly || forbidsContent ? [] : response.bodyPieces)
    }
}
