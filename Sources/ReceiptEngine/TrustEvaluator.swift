internal import CryptoFloor
import Synchronization

enum TrustDecision: Sendable {
    case trusted(TrustedChain)
    case untrusted(ChainFailure)
}

/// Decides whether a receipt's certificates chain its signer to a trust anchor, carrying Apple's marker extensions.
///
/// The decision depends only on the certificates' exact bytes and the signer's name, never on time (validity is
/// checked per receipt against the window kept here), so it is cached: Apple signs millions of receipts with a
/// handful of certificates, and decoding one costs more than the rest of a validation.
///
/// Refusals are never cached (a flood of distinct forgeries could not hit, and would evict the genuine chains);
/// they are made cheap instead. The realistic forgery copies Apple's genuine intermediate and root out of a real
/// receipt and brings a leaf of its own: when a receipt carries an intermediate of a chain already trusted, its
/// signer's certificate is checked with that intermediate's key over its TBSCertificate (one RSA verification)
/// before any certificate is decoded, as `JWSTrustEvaluator` does for `x5c`.
final class TrustEvaluator: Sendable {
    /// SHA-256 of Apple Inc. Root CA (2006–2035). Receipts carry this certificate; its copy is used once it matches.
    static let appleRootFingerprint: [UInt8] = [
        0xB0, 0xB1, 0x73, 0x0E, 0xCB, 0xC7, 0xFF, 0x45, 0x05, 0x14, 0x2C, 0x49, 0xF1, 0x29, 0x5E, 0x6E,
        0xDA, 0x6B, 0xCA, 0xED, 0x7E, 0x2C, 0x68, 0xC5, 0xBE, 0x91, 0xB5, 0xA1, 0x10, 0x01, 0xF0, 0x24,
    ]
    /// Bounds memory; only chains that reached an anchor are kept, so receipts an attacker makes cannot evict them.
    static let cacheCapacity = 128

    private let configuredAnchors: [X509Certificate]
    private let cache = Mutex(DecisionCache())

    init(additionalAnchors: [TrustAnchor]) {
        configuredAnchors = additionalAnchors.map(\.certificate)
    }

    func evaluate(_ container: ReceiptContainer) -> TrustDecision {
        let key = CertificateSet(certificates: container.certificates, signerIdentifier: container.signerIdentifier)
        if let cached = cache.withLock({ $0.signer(for: key) }) { return .trusted(cached) }
        if let refusal = refusalBeforeDecoding(container) { return .untrusted(refusal) }
        let decision = decide(certificates: container.certificates, signerIdentifier: Array(container.signerIdentifier))
        // Untrusted sets are decided afresh each time: caching them would let made-up certificates push out the
        // genuine chains.
        if case .trusted(let signer) = decision {
            cache.withLock { $0.insert(signer, for: key, capacity: Self.cacheCapacity) }
        }
        return decision
    }

    /// A refusal that needs no certificate decoded: the receipt carries an intermediate of a trusted chain, byte for
    /// byte, and its signer's certificate is not signed by that intermediate's key. Nil when this cannot tell (no
    /// known intermediate, the signer not found by its name, or the intermediate itself named as the signer): the
    /// full decision then runs as before, so this only ever refuses what it would refuse too.
    ///
    /// Apple's receipt chains are leaf → intermediate → root, and only such chains lend their intermediate here, so a
    /// known intermediate a receipt carries can only be its signer's issuer: otherwise it would be a certificate off
    /// the signing path, which the full decision refuses as stray.
    private func refusalBeforeDecoding(_ container: ReceiptContainer) -> ChainFailure? {
        guard let (intermediate, intermediateKey) = cache.withLock({ $0.knownIntermediate(among: container.certificates) })
        else { return nil }
        guard let signer = container.certificates.firstIndex(where: {
            Self.certificate($0, isNamedBy: container.signerIdentifier)
        }), signer != intermediate else { return nil }
        guard intermediateKey.hasSigned(certificate: Array(container.certificates[signer])) else {
            return ChainFailure(
                .noTrustedRoot, "the signing certificate is not signed by the intermediate certificate the receipt carries")
        }
        return nil
    }

    /// Whether a certificate's issuer and serial number, read where they lie in its TBSCertificate, are those a
    /// SignerInfo names (`IssuerAndSerialNumber ::= SEQUENCE { issuer Name, serialNumber INTEGER }`, RFC 5652 §10.2.4).
    /// `d2i_X509` keeps the name's received encoding and refuses a padded INTEGER, so this agrees with the
    /// re-encoded `X509Certificate.issuerAndSerialNumber` for every certificate that decodes.
    private static func certificate(_ encoding: ArraySlice<UInt8>, isNamedBy signerIdentifier: ArraySlice<UInt8>) -> Bool {
        let certificate = ASN1Reader(Array(encoding))
        let identifier = ASN1Reader(Array(signerIdentifier))
        guard let root = try? certificate.root(), let parts = try? certificate.children(of: root), let tbs = parts.first,
            tbs.isUniversal(ASN1Tag.sequence), let fields = try? certificate.children(of: tbs),
            let name = try? identifier.root(), let named = try? identifier.children(of: name), named.count == 2
        else { return false }
        // TBSCertificate: [0] version (absent for v1), serialNumber, signature, issuer, …
        let rest = fields.first?.isContext(0) == true ? fields.dropFirst() : fields[...]
        guard rest.count >= 3 else { return false }
        let serial = rest[rest.startIndex]
        let issuer = rest[rest.startIndex + 2]
        return certificate.encoding(of: issuer).hasSameBytes(as: identifier.encoding(of: named[0]))
            && certificate.encoding(of: serial).hasSameBytes(as: identifier.encoding(of: named[1]))
    }

    private func decide(certificates encodings: [ArraySlice<UInt8>], signerIdentifier: [UInt8]) -> TrustDecision {
        var certificates: [X509Certificate] = []
        for (index, encoding) in encodings.enumerated() {
            guard let certificate = try? X509Certificate(derEncoded: encoding) else {
                return .untrusted(ChainFailure(
                    .unparseableCertificate, "certificate \(index + 1) in the receipt does not parse"))
            }
            certificates.append(certificate)
        }
        guard let signer = certificates.first(where: { $0.issuerAndSerialNumber == signerIdentifier }) else {
            return .untrusted(ChainFailure(.strayCertificate, "the receipt does not carry its signer's certificate"))
        }
        let pinned = certificates.filter { $0.sha256Fingerprint == Self.appleRootFingerprint }
        let candidates = certificates.filter { $0 !== signer }
        let chain: TrustedChain
        switch ChainBuilder.verify(signer: signer, candidates: candidates, anchors: configuredAnchors + pinned) {
        case .failure(let failure) where certificates.count == 1 && signer.isSelfIssued:
            return .untrusted(ChainFailure(
                failure.reason,
                "the receipt is signed by a single self-signed certificate, as Xcode's StoreKit testing signs: trust it "
                    + "only in a test config, by adding that certificate (Xcode: Editor > Save Public Certificate) to "
                    + "trusted_roots and \"Xcode\" to environments"))
        case .failure(let failure): return .untrusted(failure)
        case .success(let verified): chain = verified
        }
        // Anything else the receipt carries would be bytes no signature covers; Apple's receipts carry exactly their
        // chain, so a stray or altered certificate (say, a root copy when the root is configured) means tampering.
        let chainEncodings = Set(chain.certificates.map(\.derEncoded))
        guard certificates.allSatisfy({ chainEncodings.contains($0.derEncoded) }) else {
            return .untrusted(ChainFailure(
                .strayCertificate, "the receipt carries a certificate that is not part of its signing chain"))
        }
        return .trusted(chain)
    }
}

/// What a chain decision depends on: the exact certificate bytes, in order, and the signer's name.
///
/// Found by the signer's name (issuer and serial number, a hundred bytes: hashing the kilobytes of certificates on
/// every request cost more than the rest of a cached validation), and a hit counts only once every byte compares
/// equal. Only trusted sets are stored, so the handful of genuine chains per signer is all a lookup walks.
private struct CertificateSet {
    let certificates: [ArraySlice<UInt8>]
    let signerIdentifier: ArraySlice<UInt8>

    /// A copy that holds only its own bytes, not the receipt it was read from.
    func owned() -> CertificateSet {
        CertificateSet(
            certificates: certificates.map { ArraySlice(Array($0)) }, signerIdentifier: ArraySlice(Array(signerIdentifier)))
    }

    func hasSameBytes(as other: CertificateSet) -> Bool {
        signerIdentifier.hasSameBytes(as: other.signerIdentifier) && certificates.count == other.certificates.count
            && zip(certificates, other.certificates).allSatisfy { $0.hasSameBytes(as: $1) }
    }
}

/// A signer's issuer and serial number as a dictionary key, read where it lies in the receipt.
///
/// `[UInt8]`'s hash feeds `Hasher` one byte at a time, which with the array made for each lookup cost more than
/// the rest of a cached chain decision. The serial number, last, is what tells one Apple signer from another, so its
/// last bytes and the length are hashed; equality still compares every byte.
private struct SignerName: Hashable {
    let bytes: ArraySlice<UInt8>

    static func == (lhs: SignerName, rhs: SignerName) -> Bool { lhs.bytes.hasSameBytes(as: rhs.bytes) }

    func hash(into hasher: inout Hasher) {
        var tail: UInt64 = 0
        var index = max(bytes.startIndex, bytes.endIndex - 8)
        while index < bytes.endIndex {
            tail = tail << 8 | UInt64(bytes[index])
            index += 1
        }
        hasher.combine(bytes.count)
        hasher.combine(tail)
    }
}

/// Trusted signers by certificate set, forgetting the oldest once full, and the intermediates of those chains with
/// their keys.
private struct DecisionCache: ~Copyable {
    /// Apple has a few WWDR intermediates in use at a time.
    static let intermediateCapacity = 16

    var entries: [SignerName: [(certificates: CertificateSet, signer: TrustedChain)]] = [:]
    var order: [SignerName] = []
    /// Oldest first. Few enough that comparing lengths, then bytes, beats hashing kilobytes per lookup.
    var intermediates: [(encoding: [UInt8], key: PublicKey)] = []

    func signer(for key: CertificateSet) -> TrustedChain? {
        entries[SignerName(bytes: key.signerIdentifier)]?.first { $0.certificates.hasSameBytes(as: key) }?.signer
    }

    /// The index of the first certificate that is a known intermediate, byte for byte, with that intermediate's key.
    func knownIntermediate(among certificates: [ArraySlice<UInt8>]) -> (index: Int, key: PublicKey)? {
        for (index, certificate) in certificates.enumerated() {
            if let known = intermediates.first(where: { $0.encoding[...].hasSameBytes(as: certificate) }) {
                return (index, known.key)
            }
        }
        return nil
    }

    mutating func insert(_ signer: TrustedChain, for key: CertificateSet, capacity: Int) {
        // Only Apple's shape, leaf → intermediate → anchor, lends its intermediate to the cheap refusal (see
        // `TrustEvaluator.refusalBeforeDecoding`).
        if signer.certificates.count == 3, let intermediateKey = signer.certificates[1].publicKey,
            !intermediates.contains(where: { $0.encoding == signer.certificates[1].derEncoded })
        {
            intermediates.append((signer.certificates[1].derEncoded, intermediateKey))
            if intermediates.count > Self.intermediateCapacity { intermediates.removeFirst() }
        }
        guard self.signer(for: key) == nil else { return }
        let owned = key.owned()
        let name = SignerName(bytes: owned.signerIdentifier)
        entries[name, default: []].append((owned, signer))
        order.append(name)
        if order.count > capacity {
            let oldest = order.removeFirst()
            entries[oldest]?.removeFirst()
            if entries[oldest]?.isEmpty == true { entries[oldest] = nil }
        }
    }
}
