import Foundation
import TestSupport
import Testing

@testable import CryptoFloor
@testable import ReceiptEngine
import ReceiptForge

/// The chain decision is cached by the exact certificate bytes. Every test first validates a good receipt with the
/// same validator, so the cache is warm, and then shows that an altered receipt still fails.
struct ChainCacheTests {
    /// Validates a good receipt so that its chain decision is cached.
    private func warmed(_ validator: ReceiptValidator, with authority: TestCertificateAuthority = TestPKI.standard)
        throws -> [UInt8]
    {
        let good = try TestPKI.blueprint().forge(with: authority)
        let result = validator.validate(good)
        #expect(result.error == nil, "the good receipt must validate: \(result.error?.description ?? "")")
        return good
    }

    @Test(arguments: ["leaf", "intermediate", "root"])
    func changedCertificateByte_afterWarmCache_fails(_ name: String) throws {
        let validator = TestPKI.validator()
        let good = try warmed(validator)
        let standard = TestPKI.standard
        let encoding = [
            "leaf": standard.leaf, "intermediate": standard.intermediate, "root": standard.root,
        ][name]!.derEncoded
        let range = try #require(good.firstRange(of: encoding), "the receipt carries the \(name)")
        // A byte in the middle (names, keys, extensions) and the last byte (the certificate's signature).
        for offset in [range.lowerBound + encoding.count / 2, range.upperBound - 1] {
            var altered = good
            altered[offset] ^= 0x01
            let first = validator.validate(altered)
            #expect(!first.isValid, "\(name) byte \(offset - range.lowerBound) changed, yet valid")
            // Asked again, the altered receipt's own cached decision must fail it too.
            #expect(!validator.validate(altered).isValid)
        }
        var lastByteChanged = good
        lastByteChanged[range.upperBound - 1] ^= 0x01
        #expect(validator.validate(lastByteChanged).error?.code == .certificateUntrusted)
        // The altered receipts did not disturb the good receipt's decision.
        #expect(validator.validate(good).error == nil)
    }

    @Test func receiptChainingToAnUntrustedRoot_afterWarmCache_isUntrusted() throws {
        let validator = TestPKI.validator([TestPKI.standard])
        _ = try warmed(validator)
        let other = try TestPKI.blueprint().forge(with: TestPKI.expired)
        #expect(validator.validate(other).error?.reason == .noTrustedRoot)
    }

    @Test func receiptCarryingADifferentRoot_afterWarmCache_isUntrusted() throws {
        let validator = TestPKI.validator([TestPKI.standard])
        _ = try warmed(validator)
        // The standard leaf and intermediate, but another PKI's root where the standard root was.
        let standard = TestPKI.standard
        let swapped = try CertificateIssuer.signPKCS7(
            content: TestPKI.blueprint().payload, signer: standard.leaf, key: standard.leafKey,
            certificates: [standard.leaf, standard.intermediate, TestPKI.expired.root], digest: .sha256)
        let result = validator.validate(swapped)
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .strayCertificate)
    }

    @Test func leafWithoutMarker_afterWarmCache_isUntrusted() throws {
        let validator = TestPKI.validator([TestPKI.standard, TestPKI.leafWithoutMarker])
        _ = try warmed(validator)
        let unmarked = try TestPKI.blueprint().forge(with: TestPKI.leafWithoutMarker)
        let result = validator.validate(unmarked)
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .markerMissing)
    }

    @Test func intermediateWithoutMarker_afterWarmCache_isUntrusted() throws {
        let validator = TestPKI.validator([TestPKI.standard, TestPKI.intermediateWithoutMarker])
        _ = try warmed(validator)
        let unmarked = try TestPKI.blueprint().forge(with: TestPKI.intermediateWithoutMarker)
        let result = validator.validate(unmarked)
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .markerMissing)
    }

    @Test func cachedChain_receiptCreatedAfterExpiry_isUntrusted() throws {
        let validator = TestPKI.validator([TestPKI.expired])
        let inWindow = try TestPKI.blueprint(created: TestPKI.now.addingTimeInterval(-30 * TestPKI.day))
            .forge(with: TestPKI.expired)
        #expect(validator.validate(inWindow).error == nil)
        // Same certificates, so the cached decision is found; the creation date still decides.
        let afterExpiry = try TestPKI.blueprint(created: TestPKI.now).forge(with: TestPKI.expired)
        let result = validator.validate(afterExpiry)
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .outsideValidity)
        let beforeValidity = try TestPKI.blueprint(created: TestPKI.now.addingTimeInterval(-5 * 365 * TestPKI.day))
            .forge(with: TestPKI.expired)
        #expect(validator.validate(beforeValidity).error?.reason == .outsideValidity)
    }

    /// Root and leaf valid for years; one certificate of the chain valid only from -200 to -100 days.
    static let narrowWindows: [(String, TestCertificateAuthority)] = {
        let now = TestPKI.now
        let narrow = now.addingTimeInterval(-200 * TestPKI.day)...now.addingTimeInterval(-100 * TestPKI.day)
        var intermediate = TestCertificateAuthority.Options(now: now)
        intermediate.intermediateValidity = narrow
        var leaf = TestCertificateAuthority.Options(now: now)
        leaf.leafValidity = narrow
        return [("intermediate", try! .generate(intermediate)), ("leaf", try! .generate(leaf))]
    }()

    @Test(arguments: narrowWindows)
    func cachedChain_respectsEveryCertificatesWindow(_ name: String, _ authority: TestCertificateAuthority) throws {
        let validator = TestPKI.validator([authority])
        let inside = try TestPKI.blueprint(created: TestPKI.now.addingTimeInterval(-150 * TestPKI.day))
            .forge(with: authority)
        #expect(validator.validate(inside).error == nil, "created inside the \(name)'s window")
        for days in [-50.0, -250.0] {
            let outside = try TestPKI.blueprint(created: TestPKI.now.addingTimeInterval(days * TestPKI.day))
                .forge(with: authority)
            let result = validator.validate(outside)
            #expect(result.error?.code == .certificateUntrusted, "created \(-days) days ago, outside the \(name)'s window")
        }
    }
}
