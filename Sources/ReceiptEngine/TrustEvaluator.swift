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

/// Trusted signers by certificate set, forgetting the oldest once full.
private struct DecisionCache: ~Copyable {
    var entries: [SignerName: [(certificates: CertificateSet, signer: TrustedChain)]] = [:]
    var order: [SignerName] = []

    func signer(for key: CertificateSet) -> TrustedChain? {
        entries[SignerName(bytes: key.signerIdentifier)]?.first { $0.certificates.hasSameBytes(as: key) }?.signer
    }

    mutating func insert(_ signer: TrustedChain, for key: CertificateSet, capacity: Int) {
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
