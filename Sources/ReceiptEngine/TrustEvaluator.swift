import Synchronization

/// The signer of a receipt whose chain reached a trust anchor, and the window in which that chain was valid.
struct TrustedSigner: Sendable {
    let key: PublicKey
    /// The latest notBefore and earliest notAfter across the chain, in milliseconds since 1970.
    let validFrom: Int64
    let validUntil: Int64
}

enum TrustDecision: Sendable {
    case trusted(TrustedSigner)
    case untrusted(String)
}

/// Decides whether a receipt's certificates chain its signer to a trust anchor, carrying Apple's marker extensions.
///
/// The decision depends only on the certificates' exact bytes and the signer's name, never on time (validity is
/// checked per receipt against the window kept here), so it is cached: Apple signs millions of receipts with a
/// handful of certificates, and decoding one costs more than the rest of a validation.
final class TrustEvaluator: Sendable {
    /// SHA-256 of Apple Inc. Root CA (2006–2035). Receipts carry this certificate; its copy is used once it matches.
    static let appleRootFingerprint: [UInt8] = [
        0xB0, 0xB1, 0x73, 0x0E, 0xCB, 0xC7, 0xFF, 0x45, 0x05, 0x14, 0x2C, 0x49, 0xF1, 0x29, 0x5E, 0x6E,
        0xDA, 0x6B, 0xCA, 0xED, 0x7E, 0x2C, 0x68, 0xC5, 0xBE, 0x91, 0xB5, 0xA1, 0x10, 0x01, 0xF0, 0x24,
    ]
    /// Apple's "Mac App Store and iTunes Store Receipt Signing" marker: without it any certificate Apple issued
    /// (every developer has one) could sign a receipt.
    static let receiptSigningMarker = "1.2.840.113635.100.6.11.1"
    /// Apple Worldwide Developer Relations intermediate marker.
    static let intermediateMarker = "1.2.840.113635.100.6.2.1"
    /// Bounds memory; only chains that reached an anchor are kept, so receipts an attacker makes cannot evict them.
    static let cacheCapacity = 128

    private let configuredAnchors: [X509Certificate]
    private let cache = Mutex(DecisionCache())

    init(additionalAnchors: [TrustAnchor]) {
        // TrustAnchor validated each certificate when it was made, so none is dropped here.
        configuredAnchors = additionalAnchors.compactMap { try? X509Certificate(derEncoded: $0.derEncoded) }
    }

    func evaluate(_ container: ReceiptContainer) -> TrustDecision {
        let key = CertificateSet(certificates: container.certificates, signerIdentifier: container.signerIdentifier)
        if let cached = cache.withLock({ $0.signer(for: key) }) { return .trusted(cached) }
        let decision = decide(certificates: container.certificates, signerIdentifier: Array(container.signerIdentifier))
        // Untrusted sets are decided afresh each time: caching them would let made-up certificates push out the
        // genuine chains.
        if case .trusted(let signer) = decision {
            cache.withLock { $0.insert(signer, for: key, capacity: Self.cacheCapacity) }
        }
        return decision
    }

    private func decide(certificates encodings: [ArraySlice<UInt8>], signerIdentifier: [UInt8]) -> TrustDecision {
        var certificates: [X509Certificate] = []
        for (index, encoding) in encodings.enumerated() {
            guard let certificate = try? X509Certificate(derEncoded: encoding) else {
                return .untrusted("certificate \(index + 1) in the receipt does not parse")
            }
            certificates.append(certificate)
        }
        guard let signer = certificates.first(where: { $0.issuerAndSerialNumber == signerIdentifier }) else {
            return .untrusted("the receipt does not carry its signer's certificate")
        }
        let pinned = certificates.filter { $0.sha256Fingerprint == Self.appleRootFingerprint }
        let candidates = certificates.filter { $0 !== signer }
        let chain: [X509Certificate]
        switch ChainBuilder.build(signer: signer, candidates: candidates, anchors: configuredAnchors + pinned) {
        case .untrusted(let reason):
            return .untrusted("the signing chain does not reach a trusted root: \(reason)")
        case .trusted(let built):
            chain = built
        }
        // A self-signed anchor that signs receipts itself is how Xcode's StoreKit testing works; it is only ever
        // trusted because a user configured it.
        if chain.count > 1 {
            guard chain[0].hasExtension(oid: Self.receiptSigningMarker) else {
                return .untrusted("the signing certificate lacks Apple's receipt-signing marker (\(Self.receiptSigningMarker))")
            }
            guard chain[1].hasExtension(oid: Self.intermediateMarker) else {
                return .untrusted("the intermediate certificate lacks Apple's WWDR marker (\(Self.intermediateMarker))")
            }
        }
        // Anything else the receipt carries would be bytes no signature covers; Apple's receipts carry exactly their
        // chain, so a stray or altered certificate (say, a root copy when the root is configured) means tampering.
        let chainEncodings = Set(chain.map(\.derEncoded))
        guard certificates.allSatisfy({ chainEncodings.contains($0.derEncoded) }) else {
            return .untrusted("the receipt carries a certificate that is not part of its signing chain")
        }
        var validFrom = Int64.min
        var validUntil = Int64.max
        for certificate in chain {
            guard let validity = certificate.validity else { return .untrusted("a certificate's validity does not parse") }
            validFrom = max(validFrom, validity.notBefore)
            validUntil = min(validUntil, validity.notAfter)
        }
        guard let key = signer.publicKey else { return .untrusted("the signer's public key does not parse") }
        return .trusted(TrustedSigner(key: key, validFrom: validFrom, validUntil: validUntil))
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

/// Trusted signers by certificate set, forgetting the oldest once full.
private struct DecisionCache: ~Copyable {
    var entries: [SignerName: [(certificates: CertificateSet, signer: TrustedSigner)]] = [:]
    var order: [SignerName] = []

    func signer(for key: CertificateSet) -> TrustedSigner? {
        entries[SignerName(bytes: key.signerIdentifier)]?.first { $0.certificates.hasSameBytes(as: key) }?.signer
    }

    mutating func insert(_ signer: TrustedSigner, for key: CertificateSet, capacity: Int) {
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
