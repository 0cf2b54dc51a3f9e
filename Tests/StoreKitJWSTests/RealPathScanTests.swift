import JSONText
import StoreKitJWS
import Testing

/// Issue 18: the scans on every request's path read bytes by table and in blocks; what they decide must not change
/// where a block ends or whether text is ASCII.
struct RealPathScanTests {
    private static let longSegment = String(repeating: "eyJhbGciOiJFUzI1NiJ9", count: 10)

    @Test(arguments: [63, 64, 65, 150])
    func byteOutsideBase64URL_anywhere_isNotAJWS(_ position: Int) {
        for intruder in ["+", "/", "=", " ", "\n", "é"] {
            var text = Array((Self.longSegment + "." + Self.longSegment + ".AAAA").utf8)
            text.replaceSubrange(position..<(position + 1), with: Array(intruder.utf8))
            #expect(!JWSVerifier.looksLikeJWS(text), "\(intruder) at \(position)")
        }
    }

    @Test func longJWS_andLongCutShortHeader_lookLikeOne() {
        #expect(JWSVerifier.looksLikeJWS(Self.longSegment + "." + Self.longSegment + ".AAAA"))
        #expect(JWSVerifier.looksLikeJWS("\t" + Self.longSegment + "\r\n"))
        #expect(!JWSVerifier.looksLikeJWS("AAAA" + Self.longSegment))
        #expect(!JWSVerifier.looksLikeJWS(String(repeating: ".", count: 130)))
    }

    @Test func jsonStrings_asciiOrNot_readTheSame() throws {
        let value = try JSONValue(parsing: Array(#"{"a":"plain","b":"Zürich","c":"x\"y"}"#.utf8))
        #expect(value["a"] == .string("plain"))
        #expect(value["b"] == .string("Zürich"))
        #expect(value["c"] == .string("x\"y"))
    }

    @Test func jsonString_withInvalidUTF8_isRefused() {
        let bytes: [UInt8] = Array(#"{"a":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: bytes) }
    }
}
