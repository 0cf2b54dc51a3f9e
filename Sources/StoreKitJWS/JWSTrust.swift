internal import CryptoFloor
internal import ReceiptEngine
import Synchronization

/// A chain decided trusted, with what verification needs per JWS.
struct JWSSigner: Sendable {
    let chain: TrustedChain
    /// ES256 admits only P-256; checked once per chain rather than per JWS.
    let signsES256: Bool
    /// Trusted as Xcode's StoreKit testing certificate, which vouches only for Xcode data.
    let isXcode: Bool
}

enum JWSTrustDecision: Sendable {
    case trusted(JWSSigner)
    case untrusted(ChainFailure)
    case malformed(String)
}

/// Decides whether a JWS's `x5c` chains its leaf, through `x5c[1]`, to a trusted root with Apple's markers.
///
/// Decisions depend only on the exact `x5c` text, never on time (the window is checked per JWS), so trusted ones are
/// cached, by the `x5c` text and by the whole header's base64url text (which spares decoding the header at all):
/// Apple signs every transaction with a handful of chains, each always under the same header. Refusals are never
/// cached (a flood of distinct forgeries would evict the genuine chains, and could not hit anyway); instead they are
/// made cheap: a leaf under an intermediate already trusted is checked with one signature verification over its
/// TBSCertificate before any certificate is decoded, and an unknown intermediate likewise against the roots that
/// could anchor it.
final class JWSTrustEvaluator: Sendable {
    /// SHA-256 of Apple Root CA - G3, which signs every StoreKit 2 chain. `x5c[2]` is used as the anchor only when
    /// it is exactly this certificate.
    static let appleRootG3Fingerprint: [UInt8] = [
        0x63, 0x34, 0x3A, 0xBF, 0xB8, 0x9A, 0x6A, 0x03, 0xEB, 0xB5, 0x7E, 0x9B, 0x3F, 0x5F, 0xA7, 0xBE,
        0x7C, 0x4F, 0x5C, 0x75, 0x6F, 0x30, 0x17, 0xB3, 0xA8, 0xC4, 0x88, 0xC3, 0x65, 0x3E, 0x91, 0x79,
    ]
    static let cacheCapacity = 128
    /// Apple signs with a handful of leaves at a time, each always under the same header text.
    static let headerCapacity = 32
    /// Apple's headers are 3 to 5 KB; a longer one (padded by whoever holds a trusted chain) is not remembered, so
    /// the remembered headers stay within a few hundred kilobytes.
    static let longestRememberedHeader = 16 * 1024
    /// Apple has a few WWDR intermediates in use at a time.
    static let intermediateCapacity = 16

    private struct Anchor: Sendable {
        let certificate: X509Certificate
        let key: PublicKey
    }

    private let configuredAnchors: [Anchor]
    private let acceptsXcode: Bool
    private let state = Mutex(State())

    private struct State: ~Copyable {
        var chains: [ChainKey: JWSSigner] = [:]
        var order: [ChainKey] = []
        /// Keys of intermediates on trusted chains, by their `x5c` text.
        var intermediates: [String: PublicKey] = [:]
        var intermediateOrder: [String] = []
        /// Apple Root CA - G3, decoded the first time a JWS carries it.
        var appleRoot: Anchor?
        /// Header segments (base64url, as received) of trusted chains, oldest first: the same header text decodes to
        /// the same certificates, so a JWS carrying one is neither decoded nor chained again.
        var headers: [(segment: [UInt8], signer: JWSSigner)] = []
    }

    init(policy: ValidationPolicy) {
        configuredAnchors = policy.additionalTrustAnchors.compactMap { anchor in
            anchor.certificate.publicKey.map { Anchor(certificate: anchor.certificate, key: $0) }
        }
        acceptsXcode = policy.environments.contains(.xcode)
    }

    /// The signer of a header segment already trusted, byte for byte; nil for any other.
    func knownSigner(header segment: ArraySlice<UInt8>) -> JWSSigner? {
        state.withLock { state in
            state.headers.first { Self.bytesEqual($0.segment, segment) }?.signer
        }
    }

    /// - Parameter segment: the header's base64url text, remembered with a trusted decision.
    func evaluate(_ header: JWSHeader, segment: ArraySlice<UInt8>) -> JWSTrustDecision {
        let key = ChainKey(header.certificates)
        if let signer = state.withLock({ $0.chains[key] }) {
            remember(segment, signer)
            return .trusted(signer)
        }
        let decision = header.isXcode ? decideXcode(header.certificates[0]) : decide(header.certificates)
        if case .trusted(let signer) = decision {
            remember(segment, signer)
            state.withLock { state in
                guard state.chains[key] == nil else { return }
                state.chains[key] = signer
                state.order.append(key)
                if state.order.count > Self.cacheCapacity { state.chains[state.order.removeFirst()] = nil }
                let intermediate = header.certificates.count == 3 ? header.certificates[1] : nil
                if let intermediate, state.intermediates[intermediate] == nil, signer.chain.certificates.count == 3,
                    let intermediateKey = signer.chain.certificates[1].publicKey
                {
                    state.intermediates[intermediate] = intermediateKey
                    state.intermediateOrder.append(intermediate)
                    if state.intermediateOrder.count > Self.intermediateCapacity {
                        state.intermediates[state.intermediateOrder.removeFirst()] = nil
                    }
                }
            }
        }
        return decision
    }

    private func remember(_ segment: ArraySlice<UInt8>, _ signer: JWSSigner) {
        guard segment.count <= Self.longestRememberedHeader else { return }
        state.withLock { state in
            guard !state.headers.contains(where: { Self.bytesEqual($0.segment, segment) }) else { return }
            state.headers.append((Array(segment), signer))
            if state.headers.count > Self.headerCapacity { state.headers.removeFirst() }
        }
    }

    /// Eight bytes at a time: a header is kilobytes, and a lookup compares it with each remembered one.
    private static func bytesEqual(_ remembered: [UInt8], _ segment: ArraySlice<UInt8>) -> Bool {
        guard remembered.count == segment.count else { return false }
        return remembered.withUnsafeBytes { a in
            segment.withUnsafeBytes { b in
                var index = 0
                while index + 8 <= a.count {
                    guard a.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                        == b.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                    else { return false }
                    index += 8
                }
                while index < a.count {
                    guard a[index] == b[index] else { return false }
                    index += 1
                }
                return true
            }
        }
    }

    private static func untrusted(_ reason: ChainFailure.Reason, _ message: String) -> JWSTrustDecision {
        .untrusted(ChainFailure(reason, message))
    }

    private func decideXcode(_ text: String) -> JWSTrustDecision {
        guard let der = Base64.decode(text.utf8, alphabet: .standard, padded: true) else {
            return .malformed("the x5c certificate is not standard base64")
        }
        guard let anchor = configuredAnchors.first(where: { $0.certificate.derEncoded == der }) else {
            return Self.untrusted(
                .noTrustedRoot, "the JWS is signed by an Xcode StoreKit testing certificate that is not in trusted_roots")
        }
        guard acceptsXcode else {
            return Self.untrusted(
                .noTrustedRoot, "Xcode's StoreKit testing certificate is trusted only when Xcode is an accepted environment")
        }
        switch ChainBuilder.verify(signer: anchor.certificate, candidates: [], anchors: [anchor.certificate]) {
        case .failure(let failure): return .untrusted(failure)
        case .success(let chain): return .trusted(JWSSigner(chain: chain, signsES256: anchor.key.isP256, isXcode: true))
        }
    }

    private func decide(_ texts: [String]) -> JWSTrustDecision {
        var encodings: [[UInt8]] = []
        for (index, text) in texts.enumerated() {
            guard let der = Base64.decode(text.utf8, alphabet: .standard, padded: true), !der.isEmpty else {
                return .malformed("x5c[\(index)] is not standard base64")
            }
            encodings.append(der)
        }
        // x5c[2] is never trusted for what it says: it can only name the pinned root, byte for byte.
        var anchors = configuredAnchors
        if Digest.sha256.hash(encodings[2]) == Self.appleRootG3Fingerprint {
            guard let appleRoot = appleRoot(encodings[2]) else {
                return Self.untrusted(.unparseableCertificate, "Apple Root CA - G3 does not decode")
            }
            anchors.append(appleRoot)
        }
        guard !anchors.isEmpty else {
            return Self.untrusted(.noTrustedRoot, "the chain does not end at Apple Root CA - G3 or a configured root")
        }

        // The cheap refusals: a signature check with a key already trusted, before any certificate is decoded.
        if let intermediateKey = state.withLock({ $0.intermediates[texts[1]] }) {
            guard intermediateKey.hasSigned(certificate: encodings[0]) else {
                return Self.untrusted(.noTrustedRoot, "the leaf certificate is not signed by its intermediate")
            }
        } else {
            guard anchors.contains(where: { $0.key.hasSigned(certificate: encodings[1]) }) else {
                return Self.untrusted(.noTrustedRoot, "the intermediate certificate is not signed by a trusted root")
            }
        }

        let leaf: X509Certificate
        let intermediate: X509Certificate
        do {
            leaf = try X509Certificate(derEncoded: encodings[0])
            intermediate = try X509Certificate(derEncoded: encodings[1])
        } catch {
            return Self.untrusted(.unparseableCertificate, "a certificate in x5c does not decode")
        }
        let chain: TrustedChain
        switch ChainBuilder.verify(signer: leaf, candidates: [intermediate], anchors: anchors.map(\.certificate)) {
        case .failure(let failure): return .untrusted(failure)
        case .success(let verified): chain = verified
        }
        guard chain.certificates.count == 3, chain.certificates[1] === intermediate else {
            return Self.untrusted(.noTrustedRoot, "the verified path is not leaf → x5c[1] → trusted root")
        }
        return .trusted(JWSSigner(chain: chain, signsES256: chain.signerKey.isP256, isXcode: false))
    }

    private func appleRoot(_ der: [UInt8]) -> Anchor? {
        if let known = state.withLock({ $0.appleRoot }) { return known }
        guard let certificate = try? X509Certificate(derEncoded: der), let key = certificate.publicKey else { return nil }
        let anchor = Anchor(certificate: certificate, key: key)
        state.withLock { $0.appleRoot = anchor }
        return anchor
    }
}

/// The exact `x5c` text. Hashing kilobytes of base64 per lookup would cost more than the rest of a cached
/// verification, so only the lengths and the leaf's last characters (its signature, which differs between any two
/// certificates) are hashed; equality compares every byte.
private struct ChainKey: Hashable, Sendable {
    let certificates: [String]

    init(_ certificates: [String]) { self.certificates = certificates }

    func hash(into hasher: inout Hasher) {
        hasher.combine(certificates.count)
        for certificate in certificates { hasher.combine(certificate.utf8.count) }
        var tail: UInt64 = 0
        if let leaf = certificates.first {
            for byte in leaf.utf8.suffix(8) { tail = tail << 8 | UInt64(byte) }
        }
        hasher.combine(tail)
    }
}
