import Foundation
import JSONText
import ReceiptEngine
import ReceiptForge
import StoreKitJWS
import TestSupport
import Testing

/// A header trusted once is not decoded again when it comes back byte for byte; anything else about the JWS is
/// still judged, and any other header text is decoded and judged as if nothing were cached.
struct HeaderCacheJWSTests {
    @Test func knownHeader_stillChecksEachSignature() throws {
        let verifier = JWSPKI.verifier([JWSPKI.standard])
        #expect(verifier.verify(try JWSPKI.forged(.transaction)).isValid)
        var options = JWSSigningOptions()
        options.tamperPayload = true
        let tampered = try JWSPKI.standard.sign(JWSPKI.transaction().payload, options)
        #expect(verifier.verify(tampered).error?.code == .signatureInvalid)
        #expect(verifier.verify(try JWSPKI.forged(.transaction)).isValid)
    }

    @Test func sameCertificatesUnderAnotherHeader_isDecodedAndJudged() throws {
        let verifier = JWSPKI.verifier([JWSPKI.standard])
        #expect(verifier.verify(try JWSPKI.forged(.transaction)).isValid)
        var options = JWSSigningOptions()
        options.extraHeader = [("crit", .array([.string("exp")]))]
        let critical = try JWSPKI.standard.sign(JWSPKI.transaction().payload, options)
        #expect(verifier.verify(critical).error?.code == .malformedJWS)
        #expect(verifier.verify(critical).error?.detail == .headerInvalid)
    }

    @Test func longPaddedHeader_isJudgedEachTime() throws {
        let verifier = JWSPKI.verifier([JWSPKI.standard])
        var options = JWSSigningOptions()
        options.extraHeader = [("padding", .string(String(repeating: "x", count: 20_000)))]
        let padded = try JWSPKI.standard.sign(JWSPKI.transaction().payload, options)
        #expect(verifier.verify(padded).isValid)
        #expect(verifier.verify(padded).isValid)
        options.tamperPayload = true
        let tampered = try JWSPKI.standard.sign(JWSPKI.transaction().payload, options)
        #expect(verifier.verify(tampered).error?.code == .signatureInvalid)
    }

    @Test func headerTrustedByOneVerifier_isNotTrustedByAnother() throws {
        let trusting = JWSPKI.verifier([JWSPKI.standard])
        let other = JWSPKI.verifier([JWSPKI.expired])
        let jws = try JWSPKI.forged(.transaction)
        #expect(trusting.verify(jws).isValid)
        #expect(other.verify(jws).error?.code == .certificateUntrusted)
        #expect(trusting.verify(jws).isValid)
    }
}
