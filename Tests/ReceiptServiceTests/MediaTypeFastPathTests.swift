import Testing

@testable import ReceiptService

/// `Content-Type` as clients send it (`type/subtype`, ASCII, no parameter) is read from its bytes in one pass; it
/// must read exactly as the general reading reads it.
struct MediaTypeFastPathTests {
    @Test(arguments: [
        ("application/octet-stream", "application/octet-stream"),
        ("Application/JSON", "application/json"),
        ("  text/plain\t", "text/plain"),
        ("text / plain", "text/plain"),
        ("multipart/form-data/extra", "multipart/form-data/extra"),
        ("text/plain; charset=utf-8", "text/plain"),
        ("TEXT/PLAIN;charset=\"a;b\"", "text/plain"),
        ("téxt/plain", "téxt/plain"),
    ])
    func essence_isLowercasedAndTrimmed(_ header: String, _ essence: String) {
        #expect(MediaType(header)?.essence == essence)
        #expect(MediaType(header).map { "\($0.type)/\($0.subtype)" } == essence)
    }

    @Test(arguments: ["", "   ", "text", "/plain", "text/", " / ", "text/ \t"])
    func textWithoutTypeOrSubtype_isNoMediaType(_ header: String) {
        #expect(MediaType(header) == nil)
    }

    @Test func parametersAreReadOnlyByTheGeneralReading() {
        #expect(MediaType("multipart/form-data")?.parameter("boundary") == nil)
        #expect(MediaType("multipart/form-data; boundary=XyZ")?.parameter("boundary") == "XyZ")
    }
}
