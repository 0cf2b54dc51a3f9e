import Testing

@testable import HTTP1Server

@Suite struct HTTPResponseEncoderTests {
    private func text(_ response: HTTPResponse, headOnly: Bool = false,
                      _ persistence: HTTPResponseEncoder.Persistence = .keepAlive) -> String {
        let (head, body) = HTTPResponseEncoder.encode(response, headOnly: headOnly, persistence: persistence)
        return String(decoding: head + body.joined(), as: UTF8.self)
    }

    @Test func response_hasStatusLineHeadersLengthAndBody() {
        let response = HTTPResponse(status: 200, headers: HTTPHeaders([("Content-Type", "text/plain")]), body: Array("hi".utf8))
        #expect(text(response) == "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi")
    }

    @Test func handlerFraming_isReplacedAndSplittingHeadersDropped() {
        let response = HTTPResponse(status: 404, headers: HTTPHeaders([
            ("Content-Length", "99"), ("Transfer-Encoding", "chunked"), ("X-Evil", "a\r\nSet-Cookie: x"),
            ("Bad Name", "v"), ("X-Fine", "ok"),
        ]))
        #expect(text(response, .close) == "HTTP/1.1 404 Not Found\r\nX-Fine: ok\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    }

    @Test func headResponse_keepsLengthWithoutBody_andHTTP10KeepAliveIsEchoed() {
        let response = HTTPResponse(status: 200, body: Array("hello".utf8))
        #expect(text(response, headOnly: true, .keepAliveEchoed)
            == "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\n")
    }

    @Test func noContent_hasNeitherBodyNorLength() {
        #expect(text(HTTPResponse(status: 204, body: [1, 2])) == "HTTP/1.1 204 No Content\r\n\r\n")
    }

    @Test func refusalWithoutApplicationWording_isPlainText() {
        let response = HTTPServer.plainTextResponse(to: HTTPFailure(status: .headerFieldsTooLarge, message: "too big"))
        #expect(response.status == .headerFieldsTooLarge)
        #expect(response.headers[.contentType] == "text/plain; charset=utf-8")
        #expect(response.body == Array("too big\n".utf8))
    }
}
