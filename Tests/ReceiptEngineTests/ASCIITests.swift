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
