import Foundation
import Testing

@testable import receiptd

/// What `receiptd verify` takes for StoreKit 2 signed data, and how `testing notification --post` reads an answer.
struct SignedDataCommandTests {
    static let jws = "eyJhbGciOiJFUzI1NiJ9.eyJ0cmFuc2FjdGlvbklkIjoiMSJ9.c2ln"

    @Test(arguments: [
        jws, "  \(jws)\n", #"{"signedPayload": "\#(jws)"}"#, #" {"jws": "\#(jws)", "device_id": "x"}"#,
    ])
    func compactJWSOrABodyCarryingOne_isSignedData(file: String) {
        // Surrounding whitespace is the verifier's to trim, as it does for a JWS pasted from a log.
        let found = signedData(in: Array(file.utf8)).map {
            String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(found == Self.jws)
    }

    @Test(arguments: [
        "MIIT0gYJKoZIhvcNAQcCoIITwzCCE78CAQExCzAJBgUrDgMCGgUAMIIDcwYJKoZIhvcNAQcBoIIDZASCA2Ax", "",
        #"{"receipt": "MIIT"}"#, #"{"signedPayload": "not a jws"}"#, "{not json",
    ])
    func receiptsAndOtherBodies_areNotSignedData(file: String) {
        #expect(signedData(in: Array(file.utf8)) == nil)
    }

    @Test func answerWithContentLength_keepsItsBody() throws {
        let answer = try NotificationDelivery.parse(
            Array("HTTP/1.1 422 Unprocessable Content\r\nContent-Length: 4\r\nX: y\r\n\r\n{}{}trailing".utf8))
        #expect(answer.status == 422)
        #expect(answer.body == Array("{}{}".utf8))
    }

    @Test func chunkedAnswer_isDechunked() throws {
        let answer = try NotificationDelivery.parse(
            Array(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n5;x=1\r\n\":1}\n\r\n0\r\n\r\n".utf8))
        #expect(answer.status == 200)
        #expect(answer.body == Array("{\"a\":1}\n".utf8))
    }

    @Test(arguments: ["", "HTTP/1.1 200 OK\r\n", "SSH-2.0-OpenSSH\r\n\r\n", "HTTP/1.1 abc\r\n\r\n"])
    func truncatedOrForeignAnswers_throw(answer: String) {
        #expect(throws: NotificationDelivery.DeliveryError.self) { try NotificationDelivery.parse(Array(answer.utf8)) }
    }

    @Test(arguments: ["https://example.com/v1/notifications", "ftp://x/", "http:///nohost", "not a url"])
    func targetsOtherThanHTTP_areRefusedBeforeConnecting(target: String) {
        #expect(throws: NotificationDelivery.TargetError.self) {
            try NotificationDelivery.post(signedPayload: Self.jws, to: target)
        }
    }
}
