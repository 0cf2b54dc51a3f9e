import CryptoFloor
import Testing

/// `ASN1Reader` reads headers itself instead of through OpenSSL's `ASN1_get_object`; these answers are OpenSSL
/// 3.0's for the same bytes (checked against it for every string of up to five bytes over the interesting octets and
/// millions of random ones), so no receipt reads differently.
struct ASN1HeaderTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var bytes: [UInt8]
        /// tag, class, constructed, content start, content end; nil when OpenSSL refuses the header.
        var expected: (tag: Int32, tagClass: Int32, isConstructed: Bool, contentStart: Int, contentEnd: Int)?
        var testDescription: String { bytes.map { String($0, radix: 16) }.joined(separator: " ") }
    }

    static let cases: [Case] = [
        Case(bytes: [0x05, 0x00], expected: (5, 0, false, 2, 2)),
        Case(bytes: [0x30, 0x03, 0x02, 0x01, 0x01], expected: (16, 0, true, 2, 5)),
        Case(bytes: [0xA0, 0x00], expected: (0, 0x80, true, 2, 2)),
        Case(bytes: [0x44, 0x01, 0xFF], expected: (4, 0x40, false, 2, 3)),
        Case(bytes: [0xDF, 0x01, 0x00], expected: (1, 0xC0, false, 3, 3)),
        // High tag number in two octets: 0x81 0x00 is 128.
        Case(bytes: [0x1F, 0x81, 0x00, 0x00], expected: (128, 0, false, 4, 4)),
        // Long form with leading zero octets, skipped before the eight-octet bound.
        Case(bytes: [0x04, 0x8A, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xAB], expected: (4, 0, false, 12, 13)),
        Case(bytes: [0x04, 0x82, 0x00, 0x01, 0xAB], expected: (4, 0, false, 4, 5)),
        // OpenSSL's quirks, kept: a long-form length must leave a byte after it, even for empty content…
        Case(bytes: [0x04, 0x81, 0x00], expected: nil),
        // …and a header needs a byte after its identifier.
        Case(bytes: [0x30], expected: nil),
        Case(bytes: [0x1F, 0x81], expected: nil),
        Case(bytes: [0x04, 0x02, 0x00], expected: nil),
        Case(bytes: [0x04, 0x89, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0], expected: nil),
        Case(bytes: [0x04, 0x88, 0x80, 0, 0, 0, 0, 0, 0, 0, 0], expected: nil),
        // Indefinite length only for constructed elements.
        Case(bytes: [0x04, 0x80, 0x00, 0x00], expected: nil),
        Case(bytes: [0x1F, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0x00], expected: nil),
        Case(bytes: [0x1F, 0x87, 0xFF, 0xFF, 0xFF, 0x7F, 0x00], expected: (Int32.max, 0, false, 7, 7)),
    ]

    @Test(arguments: cases)
    func headerReadsAsOpenSSLReadsIt(_ test: Case) {
        let element = try? ASN1Reader(test.bytes).element(at: 0, limit: test.bytes.count)
        guard let expected = test.expected else {
            #expect(element == nil)
            return
        }
        guard let element else {
            Issue.record("refused a header OpenSSL reads")
            return
        }
        #expect(element.tag == expected.tag)
        #expect(element.tagClass == expected.tagClass)
        #expect(element.isConstructed == expected.isConstructed)
        #expect(element.contentStart == expected.contentStart)
        #expect(element.contentEnd == expected.contentEnd)
    }

    @Test func indefiniteLengthRunsToItsEndOfContents() throws {
        let bytes: [UInt8] = [0x30, 0x80, 0x05, 0x00, 0x00, 0x00]
        let element = try ASN1Reader(bytes).element(at: 0, limit: bytes.count)
        #expect(element.isIndefinite && element.contentStart == 2 && element.contentEnd == 4 && element.end == 6)
    }
}
