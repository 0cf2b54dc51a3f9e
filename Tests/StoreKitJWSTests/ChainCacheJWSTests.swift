import Foundation
import ReceiptEngine
import ReceiptForge
import StoreKitJWS
import TestSupport
import Testing

/// Trusted chains are cached by the exact `x5c`; forgeries under a cached chain still fail, cheaply.
struct ChainCacheJWSTests {
    @Test func forgedLeavesUnderCachedIntermediate_areUntrusted_andGenuineStaysValid() throws {
        let verifier = JWSPKI.verifier([JWSPKI.standard])
        let genuine = try JWSPKI.forged(.transaction)
        #expect(verifier.verify(genuine).isValid)
        for serial in 1...5 {
            let forger = try JWSPKI.standard.forgedLeaf(serial: Int64(serial))
            let result = verifier.verify(try forger.sign(JWSPKI.transaction().payload))
            #expect(result.error?.code == .certificateUntrusted)
            #expect(result.error?.reason == .noTrustedRoot)
        }
        #expect(verifier.verify(genuine).isValid)
    }

    @Test func forgedLeafBeforeAnyGenuineJWS_isUntrusted() throws {
        let verifier = JWSPKI.verifier([JWSPKI.standard])
        let forger = try JWSPKI.standard.forgedLeaf(serial: 99)
        #expect(verifier.verify(try forger.sign(JWSPKI.transaction().payload)).error?.code == .certificateUntrusted)
        #expect(verifier.verify(try JWSPKI.forged(.transaction)).isValid)
    }

    @Test func cachedChain_stillChecksEachJWSTimeAndSignature() throws {
        let verifier = JWSPKI.verifier([JWSPKI.expired])
        let inside = try JWSPKI.expired.sign(JWSPKI.transaction(signed: JWSPKI.now.addingTimeInterval(-2 * JWSPKI.day)).payload)
        #expect(verifier.verify(inside).isValid)
        let after = try JWSPKI.expired.sign(JWSPKI.transaction(signed: JWSPKI.now).payload)
        #expect(verifier.verify(after).error?.reason == .outsideValidity)
        var options = JWSSigningOptions()
        options.tamperPayload = true
        let tampered = try JWSPKI.expired.sign(
            JWSPKI.transaction(signed: JWSPKI.now.addingTimeInterval(-2 * JWSPKI.day)).payload, options)
        #expect(verifier.verify(tampered).error?.code == .signatureInvalid)
    }

    /// Every byte of a JWS flipped, one at a time, gives an invalid verdict and never a crash, with the chain cached.
    @Test(arguments: [UInt8(0x01), 0x80])
    func everyByteFlipped_isInvalid(_ mask: UInt8) throws {
        let verifier = JWSPKI.verifier([JWSPKI.standard])
        let jws = Array(try JWSPKI.forged(.transaction).utf8)
        #expect(verifier.verify(jws).isValid)
        var survivors: [Int] = []
        for index in jws.indices {
            var flipped = jws
            flipped[index] ^= mask
            if verifier.verify(flipped).isValid { survivors.append(index) }
        }
        #expect(survivors.isEmpty, "flips at \(survivors) still verify")
    }
}
