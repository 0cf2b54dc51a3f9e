import StoreKitJWS
import TestSupport
import Testing

/// Issue 18: what has the look of a JWS goes to the verifier, which says which part failed; receipts never do.
struct JWSDetectionTests {
    @Test(arguments: [
        "eyJhbGciOiJFUzI1NiJ9.eyJ0cmFuc2FjdGlvbklkIjoiMSJ9",  // two segments
        "eyJhbGciOiJFUzI1NiJ9.e30.AAAA.BBBB",  // four
        "bm90IGpzb24.e30.AAAA",  // a header that is not JSON
        "eyJhbGciOiJFUzI1NiIsIng1YyI6WyJNSUlC",  // a header cut before its first dot
        "  \n eyJhbGciOiJFUzI1NiJ9.e30.AAAA \r\n",
    ])
    func damagedJWS_looksLikeOne(_ text: String) {
        #expect(JWSVerifier.looksLikeJWS(text))
        #expect(JWSVerifier.looksLikeJWS(Array(text.utf8)))
        #expect(JWSVerifier.looksLikeJWS(Array(text.utf8)[...]))
    }

    @Test(arguments: [
        "MIIT3QYJKoZIhvcNAQcCoIITzjCCE8oCAQExCzAJBgUrDgMCGgUAMIIDfgYJKoZIhvcNAQcBoIIDbwSCA2sxggNnMAoCAQgCAQEEAhYA",
        "MIIT3QYJKoZIhvcNAQcC\noIITzjCCE8oCAQEx+/==", "", "   ", ".", "not base64!", "eyJ.hello world",
        "{\"receipt\": \"MII\"}", "-----BEGIN CERTIFICATE-----",
    ])
    func receiptsAndOtherText_doNot(_ text: String) {
        #expect(!JWSVerifier.looksLikeJWS(text))
    }

    @Test func binaryReceipt_doesNot() {
        #expect(!JWSVerifier.looksLikeJWS([0x30, 0x82, 0x13, 0xDD, 0x06, 0x09]))
    }
}
