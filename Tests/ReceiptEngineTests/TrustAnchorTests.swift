import Foundation
import TestSupport
import Testing

@testable import ReceiptEngine
import ReceiptForge

struct TrustAnchorTests {
    static let der = TestPKI.standard.rootCertificateDER

    static func pem(_ der: [UInt8]) -> String {
        "-----BEGIN CERTIFICATE-----\n" + Data(der).base64EncodedString(options: .lineLength64Characters)
            + "\n-----END CERTIFICATE-----\n"
    }

    @Test func derAndPEM_readTheSameCertificate() throws {
        #expect(try TrustAnchor.parse(Self.der) == [try TrustAnchor(derEncoded: Self.der)])
        #expect(try TrustAnchor.parse(Array(Self.pem(Self.der).utf8)).map(\.derEncoded) == [Self.der])
    }

    @Test func pemWithSeveralCertificates_readsEach() throws {
        let other = TestPKI.expired.rootCertificateDER
        let anchors = try TrustAnchor.parse(Array((Self.pem(Self.der) + Self.pem(other)).utf8))
        #expect(anchors.map(\.derEncoded) == [Self.der, other])
    }

    @Test func brokenBlockBesideAGoodOne_isAnError() {
        let text = Self.pem(Self.der) + "-----BEGIN CERTIFICATE-----\n@@@@\n-----END CERTIFICATE-----\n"
        #expect(throws: TrustAnchorError.self) { try TrustAnchor.parse(Array(text.utf8)) }
    }

    @Test func notACertificate_isAnError() {
        #expect(throws: TrustAnchorError.self) { try TrustAnchor.parse(Array("hello".utf8)) }
        #expect(throws: TrustAnchorError.self) { try TrustAnchor.parse(Array("-----BEGIN KEY-----\n".utf8)) }
    }
}
