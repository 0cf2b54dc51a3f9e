import TestSupport
import Testing

@testable import HTTP1Server

/// What a decoder run produced, reduced to what a test compares.
enum DecodedEvent: Hashable, CustomStringConvertible {
    case bodyExpected(HTTPBodyFraming, expectsContinue: Bool)
    case request(method: String, target: String, version: HTTPVersion, body: String)
    case failure(status: Int)

    var description: String {
        switch self {
        case .bodyExpected(let framing, let expectsContinue): "bodyExpected(\(framing), continue: \(expectsContinue))"
        case .request(let method, let target, let version, let body): "\(method) \(target) \(version) body=\(body.debugDescription)"
        case .failure(let status): "failure(\(status))"
        }
    }
}

enum FeedMode: CaseIterable, CustomTestStringConvertible {
    case whole, byteByByte
    var testDescription: String { self == .whole ? "whole" : "byte by byte" }
}

func decode(_ input: String, mode: FeedMode, maxHeaderBytes: Int = 1024, maxBodyBytes: Int = 1024) -> [DecodedEvent] {
    var decoder = HTTPRequestDecoder(
        peer: .loopbackClient, listener: .loopback, maxHeaderBytes: maxHeaderBytes, maxBodyBytes: maxBodyBytes)
    var events: [DecodedEvent] = []
    let chunks: [[UInt8]] = mode == .whole ? [Array(input.utf8)] : input.utf8.map { [$0] }
    for chunk in chunks {
        decoder.feed(chunk)
        drain: while true {
            switch decoder.next() {
            case .needMoreData: break drain
            case .bodyExpected(let framing, let expectsContinue):
                events.append(.bodyExpected(framing, expectsContinue: expectsContinue))
            case .request(let request):
                events.append(.request(method: request.method.rawValue, target: request.target, version: request.version,
                                       body: String(decoding: request.body, as: UTF8.self)))
            case .failure(let error):
                events.append(.failure(status: error.status.code))
                return events
            }
        }
    }
    return events
}

struct DecoderCase: CustomTestStringConvertible, Sendable {
    var name: String
    var input: String
    var expected: [DecodedEvent]
    var maxHeaderBytes = 1024
    var maxBodyBytes = 1024
    var testDescription: String { name }
}

private func get(_ target: String = "/", _ version: HTTPVersion = .http1_1, body: String = "") -> DecodedEvent {
    .request(method: "GET", target: target, version: version, body: body)
}

private func post(_ body: String, target: String = "/v") -> DecodedEvent {
    .request(method: "POST", target: target, version: .http1_1, body: body)
}

private let rejects: [DecoderCase] = [
    DecoderCase(name: "Content-Length with Transfer-Encoding is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                expected: [.failure(status: 400)]),
    DecoderCase(name: "Transfer-Encoding then Content-Length is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
                expected: [.failure(status: 400)]),
    DecoderCase(name: "differing repeated Content-Length is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\nab",
                expected: [.failure(status: 400)]),
    DecoderCase(name: "identical repeated Content-Length is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab",
                expected: [.failure(status: 400)]),
    DecoderCase(name: "Content-Length list is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 2, 2\r\n\r\nab",
                expected: [.failure(status: 400)]),
    DecoderCase(name: "signed Content-Length is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: +2\r\n\r\nab", expected: [.failure(status: 400)]),
    DecoderCase(name: "non-numeric Content-Length is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 0x2\r\n\r\nab", expected: [.failure(status: 400)]),
    DecoderCase(name: "Content-Length beyond 2^64 is 400 without overflow",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n",
                expected: [.failure(status: 400)]),
    DecoderCase(name: "chunked not last coding is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
                expected: [.failure(status: 400)]),
    DecoderCase(name: "xchunked is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
                expected: [.failure(status: 400)]),
    DecoderCase(name: "chunked twice is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
                expected: [.failure(status: 400)]),
    DecoderCase(name: "gzip then chunked is 501",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
                expected: [.failure(status: 501)]),
    DecoderCase(name: "Transfer-Encoding in HTTP/1.0 is 400",
                input: "POST /v HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "non-hex chunk size is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 400)]),
    DecoderCase(name: "empty chunk size is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n;a=b\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 400)]),
    DecoderCase(name: "chunk size overflow is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nx\r\n0\r\n\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 400)]),
    DecoderCase(name: "chunk data without CRLF is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 400)]),
    DecoderCase(name: "chunk extension with bare LF is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2;a=b\nab\r\n0\r\n\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 400)]),
    DecoderCase(name: "space before colon is 400",
                input: "GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 0\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "illegal character in header name is 400",
                input: "GET / HTTP/1.1\r\nHost: a\r\nX(A): b\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "empty header name is 400",
                input: "GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "header line without colon is 400",
                input: "GET / HTTP/1.1\r\nHost: a\r\nnocolon\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "NUL in header value is 400",
                input: "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\u{0}b\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "bare CR in header value is 400",
                input: "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\rb\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "DEL in header value is 400",
                input: "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\u{7F}b\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "obs-fold is 400",
                input: "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\r\n b\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "bare LF line endings are 400",
                input: "GET / HTTP/1.1\nHost: a\n\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "bare LF after headers is 400",
                input: "GET / HTTP/1.1\r\nHost: a\r\n\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "leading bare LF is 400", input: "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
                expected: [.failure(status: 400)]),
    DecoderCase(name: "invalid method token is 400",
                input: "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "absolute-form target is 400",
                input: "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "asterisk target is 400",
                input: "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "garbage target is 400",
                input: "GET abc HTTP/1.1\r\nHost: a\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "control byte in target is 400",
                input: "GET /a\u{1}b HTTP/1.1\r\nHost: a\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "double space in request line is 400",
                input: "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "missing version is 400",
                input: "GET /\r\nHost: a\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "extra request line field is 400",
                input: "GET / HTTP/1.1 x\r\nHost: a\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "lowercase protocol name is 400",
                input: "GET / http/1.1\r\nHost: a\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "HTTP/2.0 is 505", input: "GET / HTTP/2.0\r\nHost: a\r\n\r\n", expected: [.failure(status: 505)]),
    DecoderCase(name: "HTTP/0.9 is 505", input: "GET / HTTP/0.9\r\n\r\n", expected: [.failure(status: 505)]),
    DecoderCase(name: "HTTP/1.2 is 505", input: "GET / HTTP/1.2\r\nHost: a\r\n\r\n", expected: [.failure(status: 505)]),
    DecoderCase(name: "HTTP/1.1 without Host is 400",
                input: "GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "repeated Host is 400",
                input: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "request line over the header limit is 431",
                input: "GET /" + String(repeating: "a", count: 2000) + " HTTP/1.1\r\nHost: a\r\n\r\n",
                expected: [.failure(status: 431)]),
    DecoderCase(name: "headers over the header limit are 431",
                input: "GET / HTTP/1.1\r\nHost: a\r\n" + String(repeating: "X-A: 0123456789\r\n", count: 100) + "\r\n",
                expected: [.failure(status: 431)]),
    DecoderCase(name: "endless header line is 431 before it ends",
                input: "GET / HTTP/1.1\r\nHost: a\r\nX-A: " + String(repeating: "a", count: 1100),
                expected: [.failure(status: 431)]),
    DecoderCase(name: "Content-Length over the body limit is 413 at once",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 1025\r\n\r\n", expected: [.failure(status: 413)]),
    DecoderCase(name: "chunked body over the body limit is 413",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n200\r\n"
                    + String(repeating: "a", count: 512) + "\r\n201\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 413)]),
    DecoderCase(name: "trailer with bad name is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX A: b\r\n\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 400)]),
]

private let accepts: [DecoderCase] = [
    DecoderCase(name: "simple GET", input: "GET /a?b=c HTTP/1.1\r\nHost: a\r\n\r\n", expected: [get("/a?b=c")]),
    DecoderCase(name: "two pipelined requests in one buffer",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET /next HTTP/1.1\r\nHost: a\r\n\r\n",
                expected: [.bodyExpected(.contentLength(3), expectsContinue: false), post("abc"), get("/next")]),
    DecoderCase(name: "leading CRLFs are ignored",
                input: "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
                expected: [get(), get("/2")]),
    DecoderCase(name: "HTTP/1.0 without Host", input: "GET / HTTP/1.0\r\n\r\n", expected: [get("/", .http1_0)]),
    DecoderCase(name: "chunked with extensions and trailers",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "3;ext=1;q=\"x\"\r\nabc\r\nA ; e\r\n0123456789\r\n0\r\nX-Trailer: t\r\nX-Other: u\r\n\r\n"
                    + "GET /after HTTP/1.1\r\nHost: a\r\n\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), post("abc0123456789"), get("/after")]),
    DecoderCase(name: "Transfer-Encoding is case-insensitive",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\tChunked \r\n\r\n0\r\n\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), post("")]),
    DecoderCase(name: "Expect 100-continue is reported with the head",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\nok",
                expected: [.bodyExpected(.contentLength(2), expectsContinue: true), post("ok")]),
    DecoderCase(name: "Expect in HTTP/1.0 is ignored",
                input: "POST /v HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok",
                expected: [.bodyExpected(.contentLength(2), expectsContinue: false),
                           .request(method: "POST", target: "/v", version: .http1_0, body: "ok")]),
    DecoderCase(name: "Content-Length 0 has no body event",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", expected: [post("")]),
    DecoderCase(name: "body exactly at the limit",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 1024\r\n\r\n" + String(repeating: "b", count: 1024),
                expected: [.bodyExpected(.contentLength(1024), expectsContinue: false),
                           post(String(repeating: "b", count: 1024))]),
    DecoderCase(name: "head exactly at the limit",
                input: "GET / HTTP/1.1\r\nHost: a\r\nX-Pad: " + String(repeating: "p", count: 1024 - 36) + "\r\n\r\n",
                expected: [get()]),
    DecoderCase(name: "obs-text and tabs in values are kept",
                input: "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\tb\u{E9}\r\n\r\n", expected: [get()]),
    DecoderCase(name: "incomplete body waits", input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nab",
                expected: [.bodyExpected(.contentLength(5), expectsContinue: false)]),
]

@Suite struct HTTPRequestDecoderTests {
    @Test(arguments: rejects, FeedMode.allCases)
    func malformedRequest_isRejectedWithItsStatus(_ testCase: DecoderCase, mode: FeedMode) {
        #expect(decode(testCase.input, mode: mode, maxHeaderBytes: testCase.maxHeaderBytes,
                       maxBodyBytes: testCase.maxBodyBytes) == testCase.expected)
    }

    @Test(arguments: accepts, FeedMode.allCases)
    func wellFormedRequest_isDecoded(_ testCase: DecoderCase, mode: FeedMode) {
        #expect(decode(testCase.input, mode: mode, maxHeaderBytes: testCase.maxHeaderBytes,
                       maxBodyBytes: testCase.maxBodyBytes) == testCase.expected)
    }

    @Test func headerLimit_countsTheWholeHead() {
        let head = "GET / HTTP/1.1\r\nHost: a\r\nX-Pad: " + String(repeating: "p", count: 1024 - 36) + "\r\n\r\n"
        #expect(head.utf8.count == 1024)
        #expect(decode(head, mode: .whole, maxHeaderBytes: 1023) == [.failure(status: 431)])
        #expect(decode(head, mode: .byteByByte, maxHeaderBytes: 1023) == [.failure(status: 431)])
    }

    @Test func decodedRequest_keepsHeadersAndBody() throws {
        var decoder = HTTPRequestDecoder(peer: .loopbackClient, listener: .loopback)
        decoder.feed(Array("PUT /x?a=1&b=%20c HTTP/1.1\r\nHost: h\r\nX-Y:  v  \r\nContent-Length: 1\r\n\r\nz".utf8))
        #expect(decoder.next() == .bodyExpected(.contentLength(1), expectsContinue: false))
        guard case .request(let request) = decoder.next() else {
            Issue.record("no request")
            return
        }
        #expect(request.headers["x-y"] == "v")
        #expect(request.path == "/x")
        #expect(request.queryValue("b") == " c")
        #expect(request.body == Array("z".utf8))
        #expect(request.peer == .loopbackClient)
        #expect(request.listener == .loopback)
        #expect(decoder.next() == .needMoreData)
        #expect(decoder.isAtMessageBoundary)
    }

    @Test func decoder_staysFailedAfterAnError() {
        var decoder = HTTPRequestDecoder(peer: .loopbackClient, listener: .loopback)
        decoder.feed(Array("GET / HTTP/9.9\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
        #expect(decoder.next() == .failure(HTTPRequestDecodingError(status: 505, message: "only HTTP/1.0 and HTTP/1.1 are supported")))
        guard case .failure = decoder.next() else {
            Issue.record("decoder recovered")
            return
        }
    }

    @Test func manyLeadingCRLFsAndLongBodies_decodeInLinearTime() {
        var decoder = HTTPRequestDecoder(
            peer: .loopbackClient, listener: .loopback, maxHeaderBytes: 16 * 1024, maxBodyBytes: 4 * 1024 * 1024)
        let body = [UInt8](repeating: 0x61, count: 1 << 20)
        decoder.feed(Array("POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: \(body.count)\r\n\r\n".utf8))
        #expect(decoder.next() == .bodyExpected(.contentLength(body.count), expectsContinue: false))
        for start in stride(from: 0, to: body.count, by: 1000) {
            decoder.feed(body[start..<min(start + 1000, body.count)])
            if start + 1000 < body.count { #expect(decoder.next() == .needMoreData) }
        }
        guard case .request(let request) = decoder.next() else {
            Issue.record("no request")
            return
        }
        #expect(request.body.count == body.count)
    }
}
