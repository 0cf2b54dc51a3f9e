import Foundation
import TestSupport
import Testing

@testable import CryptoFloor
@testable import ReceiptEngine
import ReceiptForge

/// The realistic forgery: the genuine intermediate and root copied out of a real receipt, with a leaf of the forger's
/// own that keeps the intermediate's name as its issuer. Every forgery is different, so no cache of refusals could
/// help; each must be refused by the leaf's signature, and genuine leaves under the same intermediate must still pass.
struct ForgedLeafTests {
    /// A PKI shaped like Apple's whose intermediate key the test keeps, to issue more genuine leaves.
    struct PKI {
        let root: X509Certificate
        let intermediate: X509Certificate
        let intermediateKey: PrivateKey

        static let shared: PKI = try! PKI()

        init() throws {
            let now = Int64(TestPKI.now.timeIntervalSince1970)
            let (from, until) = (now - 2 * 365 * 86_400, now + 20 * 365 * 86_400)
            let rootKey = try PrivateKey.generateRSA(bits: 2048)
            root = try CertificateIssuer.issue(
                CertificateTemplate(
                    commonName: "receiptd Forged Leaf Test Root", serial: 1, notBefore: from, notAfter: until, isCA: true,
                    markers: []),
                subjectKey: rootKey, issuer: nil, issuerKey: rootKey)
            intermediateKey = try PrivateKey.generateRSA(bits: 2048)
            intermediate = try CertificateIssuer.issue(
                CertificateTemplate(
                    commonName: "receiptd Forged Leaf Test WWDR", serial: 2, notBefore: from, notAfter: until, isCA: true,
                    markers: [AppleMarker.worldwideDeveloperRelations]),
                subjectKey: intermediateKey, issuer: root, issuerKey: rootKey)
        }

        var anchor: TrustAnchor { try! TrustAnchor(derEncoded: root.derEncoded) }

        /// A leaf named as issued by the intermediate, with Apple's signing marker, signed by `signingKey`: the
        /// intermediate's key for a genuine leaf, the leaf's own for a forgery.
        func leaf(serial: Int64, key: PrivateKey, signedBy signingKey: PrivateKey) throws -> X509Certificate {
            let validity = intermediate.validity!
            return try CertificateIssuer.issue(
                CertificateTemplate(
                    commonName: "receiptd Forged Leaf Test Signing", serial: serial,
                    notBefore: validity.notBefore / 1000, notAfter: validity.notAfter / 1000, isCA: false,
                    markers: [AppleMarker.signing]),
                subjectKey: key, issuer: intermediate, issuerKey: signingKey)
        }

        /// A receipt signed by `leaf` carrying leaf, intermediate and root, as Apple's do.
        func receipt(signedBy leaf: X509Certificate, key: PrivateKey) throws -> [UInt8] {
            try CertificateIssuer.signPKCS7(
                content: TestPKI.blueprint().payload, signer: leaf, key: key,
                certificates: [leaf, intermediate, root], digest: .sha256)
        }
    }

    private let pki = PKI.shared

    /// A validator whose cache holds the PKI's chain, decided from one genuine receipt.
    private func warmedValidator() throws -> (ReceiptValidator, genuine: [UInt8]) {
        let validator = ReceiptValidator(policy: ValidationPolicy(additionalTrustAnchors: [pki.anchor]))
        let key = try PrivateKey.generateRSA(bits: 2048)
        let genuine = try pki.receipt(signedBy: pki.leaf(serial: 100, key: key, signedBy: pki.intermediateKey), key: key)
        let result = validator.validate(genuine)
        #expect(result.error == nil, "the genuine receipt must validate: \(result.error?.description ?? "")")
        return (validator, genuine)
    }

    @Test func floodOfDistinctForgedLeaves_underACachedIntermediate_isRefusedAsNoTrustedRoot() throws {
        let (validator, genuine) = try warmedValidator()
        // One forger's key, a new serial each time: every leaf, so every certificate set, is different.
        let forgerKey = try PrivateKey.generateRSA(bits: 2048)
        for serial in Int64(1_000)..<1_040 {
            let forged = try pki.leaf(serial: serial, key: forgerKey, signedBy: forgerKey)
            let receipt = try pki.receipt(signedBy: forged, key: forgerKey)
            let result = validator.validate(receipt)
            #expect(result.error?.code == .certificateUntrusted, "forged leaf \(serial) was not refused")
            #expect(result.error?.reason == .noTrustedRoot)
            #expect(result.checks.signature == .failed)
        }
        // Refusals are not remembered and did not push the genuine chain out.
        #expect(validator.validate(genuine).error == nil)
    }

    @Test func forgedLeaf_whoseOwnSignatureOverTheReceiptIsValid_isStillRefused() throws {
        // The same forgery against a validator that has not yet seen the intermediate takes the full decision: both
        // paths must agree.
        let cold = ReceiptValidator(policy: ValidationPolicy(additionalTrustAnchors: [pki.anchor]))
        let (warm, _) = try warmedValidator()
        let forgerKey = try PrivateKey.generateRSA(bits: 2048)
        let receipt = try pki.receipt(signedBy: pki.leaf(serial: 2_000, key: forgerKey, signedBy: forgerKey), key: forgerKey)
        for validator in [cold, warm] {
            let result = validator.validate(receipt)
            #expect(result.error?.code == .certificateUntrusted)
            #expect(result.error?.reason == .noTrustedRoot)
        }
    }

    @Test func newGenuineLeaf_underACachedIntermediate_isAccepted() throws {
        let (validator, genuine) = try warmedValidator()
        for serial in Int64(3_000)..<3_003 {
            let key = try PrivateKey.generateRSA(bits: 2048)
            let leaf = try pki.leaf(serial: serial, key: key, signedBy: pki.intermediateKey)
            let receipt = try pki.receipt(signedBy: leaf, key: key)
            let first = validator.validate(receipt)
            #expect(first.error == nil, "genuine leaf \(serial): \(first.error?.description ?? "")")
            // Its chain is now decided and cached like the first one.
            #expect(validator.validate(receipt).error == nil)
        }
        #expect(validator.validate(genuine).error == nil)
    }

    @Test func genuineLeafWithAlteredTBSCertificate_underACachedIntermediate_isRefused() throws {
        let (validator, _) = try warmedValidator()
        let key = try PrivateKey.generateRSA(bits: 2048)
        let leaf = try pki.leaf(serial: 4_000, key: key, signedBy: pki.intermediateKey)
        var receipt = try pki.receipt(signedBy: leaf, key: key)
        let range = try #require(receipt.firstRange(of: leaf.derEncoded))
        // A byte inside the leaf's subject name: its TBSCertificate no longer matches the intermediate's signature.
        let subject = try #require(leaf.derEncoded.firstRange(of: Array("Forged Leaf Test Signing".utf8)))
        receipt[range.lowerBound + subject.lowerBound] ^= 0x01
        let result = validator.validate(receipt)
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .noTrustedRoot)
    }

    @Test func receiptSignedByTheCachedIntermediateItself_isStillDecidedInFull() throws {
        let (validator, _) = try warmedValidator()
        // The intermediate signs the receipt: it is no leaf, so the check against its own key does not apply and the
        // full decision refuses it for lacking the signing marker, as it did before.
        let receipt = try CertificateIssuer.signPKCS7(
            content: TestPKI.blueprint().payload, signer: pki.intermediate, key: pki.intermediateKey,
            certificates: [pki.intermediate, pki.root], digest: .sha256)
        let result = validator.validate(receipt)
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .markerMissing)
    }
}
