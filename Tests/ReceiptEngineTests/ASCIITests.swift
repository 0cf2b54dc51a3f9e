import CryptoFloor
import ReceiptEngine
import Testing

struct ASCIITests {
    @Test(arguments: [
        (" \t a b \t ", " \t", "a b"),
        ("id\r\n", " \t\r\n", "id"),
        ("\r\n \t", " \t\r\n", ""),
        ("é ", " ", "é"),
    ])
    func trimmed_removesOnlyTheSetAtBothEnds(text: String, set: String, expected: String) {
        #expect(text.trimmed(of: set) == expected)
    }

    @Test func trimmedAtEnd_keepsLeadingCharacters() {
        #expect("  a  b  ".trimmedAtEnd(of: " ") == "  a  b")
        #expect("   ".trimmedAtEnd(of: " ") == "")
    }

    @Test func hexDigitValue_readsBothCasesAndRefusesTheRest() {
        #expect(Array("09afAF".utf8).map(\.hexDigitValue) == [0, 9, 10, 15, 10, 15])
        #expect(Array("g/:@G`".utf8).allSatisfy { $0.hexDigitValue == nil })
    }

    /// A device id pasted with its line ending: CRLF is one `Character`, which a character-wise trim left in place.
    @Test func deviceIdentifier_withTrailingCRLF_parses() {
        #expect(DeviceIdentifier("6c:40:08:b5:94:5e\r\n")?.formatted == "6c:40:08:b5:94:5e")
    }
}

/// The one home of hex and whitespace: what `DeviceIdentifier`, API token digests and the JWS and receipt text
/// readers share.
struct HexAndWhitespaceTests {
    @Test func hexRoundTrips_eitherCase_andRefusesOddOrForeignDigits() {
        #expect([UInt8]([0x00, 0xAB, 0xFF]).hexEncoded() == "00abff")
        #expect([UInt8]([0x0F]).hexEncoded(uppercase: true) == "0F")
        #expect([UInt8](hexDigits: Array("00aBfF".utf8)) == [0x00, 0xAB, 0xFF])
        #expect([UInt8](hexDigits: Array("abc".utf8)) == nil)
        #expect([UInt8](hexDigits: Array("zz".utf8)) == nil)
    }

    @Test func asciiWhitespace_isSpaceTabLFCR_andBase64TextAddsVTFF() {
        #expect([0x20, 0x09, 0x0A, 0x0D].allSatisfy { (byte: UInt8) in byte.isASCIIWhitespace })
        #expect(![0x0B, 0x0C, 0x00, 0xA0].contains { (byte: UInt8) in byte.isASCIIWhitespace })
        #expect(Base64.isTextWhitespace(0x0B) && Base64.isTextWhitespace(0x0C))
        #expect(Base64.decodeText(Array("Zm9v\r\nYmFy\u{0B}".utf8)) == Array("foobar".utf8))
    }
}
