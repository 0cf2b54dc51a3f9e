import Testing

@testable import HTTP1Server

// Framing cases beyond HTTPRequestDecoderTests' tables: those `smuggle_probe.py` sends that the tables lacked, and
// the variants found while writing docs/robustness.md. Each is fed whole and byte by byte.

private func request(_ method: String, _ target: String = "/v", body: String = "") -> DecodedEvent {
    .request(method: method, target: target, version: .http1_1, body: body)
}

private let smugglingRejects: [DecoderCase] = [
    DecoderCase(name: "Transfer-Encoding split over two fields, gzip then chunked, is 501",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                expected: [.failure(status: 501)]),
    DecoderCase(name: "chunked in two Transfer-Encoding fields is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                expected: [.failure(status: 400)]),
    DecoderCase(name: "chunked then identity is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
                expected: [.failure(status: 400)]),
    DecoderCase(name: "empty Transfer-Encoding is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "Transfer-Encoding with a zero Content-Length is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                expected: [.failure(status: 400)]),
    DecoderCase(name: "empty Content-Length is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "hex Content-Length is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\nhello", expected: [.failure(status: 400)]),
    DecoderCase(name: "Content-Length with an inner space is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 1 0\r\n\r\n0123456789",
                expected: [.failure(status: 400)]),
    DecoderCase(name: "space inside a header name is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent Length: 5\r\n\r\nhello", expected: [.failure(status: 400)]),
    DecoderCase(name: "NUL in a header name is 400",
                input: "GET / HTTP/1.1\r\nHost: a\r\nX-\u{0}A: b\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "NUL in the method is 400",
                input: "G\u{0}ET / HTTP/1.1\r\nHost: a\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "NUL in the target is 400",
                input: "GET /a\u{0}b HTTP/1.1\r\nHost: a\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "NUL in a chunk extension is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1;a=\u{0}\r\nx\r\n0\r\n\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 400)]),
    DecoderCase(name: "tab between request line fields is 400",
                input: "GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "authority-form CONNECT is 400",
                input: "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "absolute-form with https is 400",
                input: "POST https://a/v HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", expected: [.failure(status: 400)]),
    DecoderCase(name: "chunk size with 0x prefix is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 400)]),
    DecoderCase(name: "negative chunk size is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\nx\r\n0\r\n\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 400)]),
    DecoderCase(name: "chunk size of 16 hex digits, even if small, is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000005\r\nhello\r\n0\r\n\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 400)]),
    DecoderCase(name: "huge chunk size within 15 hex digits is 413",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\nx",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 413)]),
    DecoderCase(name: "chunk data ended by bare LF is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\n0\r\n\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 400)]),
    DecoderCase(name: "last chunk ended by bare LF is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 400)]),
    DecoderCase(name: "obs-fold in a trailer is 400",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: a\r\n b\r\n\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), .failure(status: 400)]),
    DecoderCase(name: "Expect 100-continue with a body over the limit is 413 before any continue",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1025\r\n\r\n",
                expected: [.failure(status: 413)]),
    DecoderCase(name: "a valid request followed by garbage is the request, then 400",
                input: "GET / HTTP/1.1\r\nHost: a\r\n\r\nGARBAGE\r\n\r\n",
                expected: [request("GET", "/"), .failure(status: 400)]),
    DecoderCase(name: "bytes after a Content-Length body start the next request (here one without Host: 400)",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nabcdGET /smuggled HTTP/1.1\r\n\r\n",
                expected: [.bodyExpected(.contentLength(4), expectsContinue: false), request("POST", body: "abcd"),
                           .failure(status: 400)]),
]

private let smugglingAccepts: [DecoderCase] = [
    DecoderCase(name: "Transfer-Encoding value after a tab is chunked",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\tchunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), request("POST", body: "x")]),
    DecoderCase(name: "Content-Length with leading zeros is its decimal value",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 0005\r\n\r\nhello",
                expected: [.bodyExpected(.contentLength(5), expectsContinue: false), request("POST", body: "hello")]),
    DecoderCase(name: "Content-Length with trailing whitespace is trimmed",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 5 \t\r\n\r\nhello",
                expected: [.bodyExpected(.contentLength(5), expectsContinue: false), request("POST", body: "hello")]),
    DecoderCase(name: "a Content-Length trailer does not change framing",
                input: "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nContent-Length: 99\r\n\r\n",
                expected: [.bodyExpected(.chunked, expectsContinue: false), request("POST", body: "x")]),
    DecoderCase(name: "a lowercase method is a token, left to the router",
                input: "get / HTTP/1.1\r\nHost: a\r\n\r\n", expected: [request("get", "/")]),
]

@Suite struct HTTPSmugglingTests {
    @Test(arguments: smugglingRejects, FeedMode.allCases)
    func ambiguousOrMalformedFraming_isRejectedWithItsStatus(_ testCase: DecoderCase, mode: FeedMode) {
        #expect(decode(testCase.input, mode: mode, maxHeaderBytes: testCase.maxHeaderBytes,
                       maxBodyBytes: testCase.maxBodyBytes) == testCase.expected)
    }

    @Test(arguments: smugglingAccepts, FeedMode.allCases)
    func unambiguousVariant_isFramedOneWay(_ testCase: DecoderCase, mode: FeedMode) {
        #expect(decode(testCase.input, mode: mode, maxHeaderBytes: testCase.maxHeaderBytes,
                       maxBodyBytes: testCase.maxBodyBytes) == testCase.expected)
    }
}

/// A declared body length is a promise, not bytes: the decoder must not allocate it before the bytes arrive.
/// It did (`reserveCapacity(length)`), so 450 connections declaring 8 MB bodies, one byte sent each, aborted a
/// receiptd limited to 4 GB of address space ("failed to allocate 8000032 bytes"); and with a body limit near
/// `Int.max` one request did. These feed such heads to a decoder whose limit allows them.
@Suite struct DeclaredBodyLengthTests {
    @Test(arguments: FeedMode.allCases)
    func hugeContentLength_withinTheLimit_isAwaitedWithoutAllocatingIt(_ mode: FeedMode) {
        let head = "POST /v HTTP/1.1\r\nHost: a\r\nContent-Length: 999999999999999999\r\n\r\nabc"
        #expect(decode(head, mode: mode, maxBodyBytes: .max)
            == [.bodyExpected(.contentLength(999_999_999_999_999_999), expectsContinue: false)])
    }

    @Test(arguments: FeedMode.allCases)
    func hugeChunkSize_withinTheLimit_isAwaitedWithoutAllocatingIt(_ mode: FeedMode) {
        let head = "POST /v HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\nabc"
        #expect(decode(head, mode: mode, maxBodyBytes: .max) == [.bodyExpected(.chunked, expectsContinue: false)])
    }

}
