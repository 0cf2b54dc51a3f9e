import TestSupport
import Testing

@testable import HTTP1Server

struct HTTPMessageTests {
    @Test(arguments: [
        ("keep-alive, Close", true),
        ("CLOSE", true),
        (" close ", true),
        ("upgrade,close", true),
        ("closed", false),
        ("keep-alive", false),
        ("", false),
    ])
    func connectionTokens_matchWholeElementsIgnoringCase(value: String, listsClose: Bool) {
        let headers = HTTPHeaders([("Host", "a"), ("connection", value)])
        #expect(headers.contains(name: "Connection", token: "close") == listsClose)
        #expect(!headers.contains(name: "Upgrade", token: "close"))
    }

    @Test func keepAlive_followsVersionAndConnectionTokens() {
        func request(_ version: HTTPVersion, _ connection: String?) -> HTTPRequest {
            HTTPRequest(
                method: "GET", target: "/", version: version,
                headers: HTTPHeaders(connection.map { [(.connection, $0)] } ?? []), peer: .loopbackClient,
                listener: .loopback)
        }
        #expect(request(.http1_1, nil).wantsKeepAlive)
        #expect(!request(.http1_1, "Keep-Alive, close").wantsKeepAlive)
        #expect(!request(.http1_0, nil).wantsKeepAlive)
        #expect(request(.http1_0, "Keep-Alive").wantsKeepAlive)
    }

    @Test func pathAndQuery_splitAtTheFirstQuestionMark() {
        let request = HTTPRequest(
            method: "GET", target: "/v1/validate?device_id=a%3Fb&x=?", peer: .loopbackClient, listener: .loopback)
        #expect(request.path == "/v1/validate")
        #expect(request.query == "device_id=a%3Fb&x=?")
        #expect(request.queryValue("device_id") == "a?b")
        #expect(HTTPRequest(method: "GET", target: "/healthz", peer: .loopbackClient, listener: .loopback).query == nil)
    }

    @Test func requestIDs_areSixteenHexDigits_andDoNotRepeat() {
        let ids = (0..<10_000).map { _ in makeRequestID() }
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { $0.utf8.count == 16 && $0.utf8.allSatisfy { $0.hexValue != nil && !(65...70).contains($0) } })
    }

    // MARK: - Percent-decoding

    /// (encoded, as a query value, as a path segment): a query keeps what it cannot decode and reads `+` as a space;
    /// a segment refuses what it cannot decode and keeps `+`.
    @Test(arguments: [
        ("a%2Fb", "a/b", "a/b"),
        ("%00", "\u{0}", "\u{0}"),
        ("%zz", "%zz", nil),
        ("%", "%", nil),
        ("a%4", "a%4", nil),
        ("%4g", "%4g", nil),
        ("%C3%A9%E2%82%AC%F0%9F%98%80", "é€😀", "é€😀"),
        ("%c3%a9", "é", "é"),
        ("%C3", "\u{FFFD}", nil),
        ("a+b%2B", "a b+", "a+b+"),
        ("", "", ""),
    ] as [(String, String, String?)])
    func percentDecoding_queryKeepsWhatItCannotDecode_segmentRefusesIt(
        encoded: String, query: String, segment: String?
    ) {
        #expect(percentDecode(encoded) == query)
        #expect(percentDecode(strict: encoded) == segment)
        #expect(percentDecode(strict: encoded.dropFirst(0)) == segment)
    }
}
