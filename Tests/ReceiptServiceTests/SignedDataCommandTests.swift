import Foundation
import Testing

@testable import receiptd

/// What `receiptd verify` takes for StoreKit 2 signed data, and which targets `testing notification --post` takes.
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

    @Test(arguments: ["ftp://x/", "http:///nohost", "not a url"])
    func postTargetsOtherThanHTTP_areUsageErrors(target: String) {
        let arguments = ["testing", "notification", "--ca", "ca", "--type", "TEST", "--bundle-id", "b", "--post", target]
        #expect(runReceiptd(arguments) == ExitStatus.usage)
    }
}
