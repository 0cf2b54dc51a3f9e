#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ReceiptEngine
package import CryptoFloor

/// The digest a forged receipt's signer uses.
public enum SignatureDigest: String, Sendable, CaseIterable {
    case sha1, sha256

    var digest: Digest { self == .sha1 ? .sha1 : .sha256 }
}

/// A test PKI shaped like Apple's: a root, an intermediate carrying the WWDR marker, and a receipt-signing leaf
/// carrying the receipt-signing marker. For tests only: its receipts validate solely where its root is configured
/// as a trusted root.
public struct TestCertificateAuthority: Sendable {
    public struct Options: Sendable {
        /// Validity of every certificate unless overridden below.
        public var notBefore: Date
        public var notAfter: Date
        public var intermediateValidity: ClosedRange<Date>?
        public var leafValidity: ClosedRange<Date>?
        public var intermediateHasMarker = true
        public var leafHasMarker = true
        public var keyBits = 2048

        public init(now: Date = Date()) {
            notBefore = now.addingTimeInterval(-2 * 365 * 86_400)
            notAfter = now.addingTimeInterval(20 * 365 * 86_400)
        }
    }

    package let root: X509Certificate
    package let intermediate: X509Certificate
    package let leaf: X509Certificate
    package let leafKey: PrivateKey
    private let rootKey: PrivateKey?
    private let intermediateKey: PrivateKey?

    public static func generate(_ options: Options = Options()) throws -> TestCertificateAuthority {
        let rootKey = try PrivateKey.generateRSA(bits: options.keyBits)
        let intermediateKey = try PrivateKey.generateRSA(bits: options.keyBits)
        let leafKey = try PrivateKey.generateRSA(bits: options.keyBits)
        let (root, intermediate, leaf) = try AppleShapedChain(
            names: ("receiptd Test Root CA", "receiptd Test Worldwide Developer Relations CA",
                    "receiptd Test Receipt Signing"),
            validity: options.notBefore...options.notAfter, intermediateValidity: options.intermediateValidity,
            leafValidity: options.leafValidity, intermediateHasMarker: options.intermediateHasMarker,
            leafHasMarker: options.leafHasMarker
        ).issue(rootKey: rootKey, intermediateKey: intermediateKey, leafKey: leafKey)
        return TestCertificateAuthority(
            root: root, intermediate: intermediate, leaf: leaf, leafKey: leafKey, rootKey: rootKey,
            intermediateKey: intermediateKey)
    }

    private init(
        root: X509Certificate, intermediate: X509Certificate, leaf: X509Certificate, leafKey: PrivateKey,
        rootKey: PrivateKey?, intermediateKey: PrivateKey?
    ) {
        self.root = root
        self.intermediate = intermediate
        self.leaf = leaf
        self.leafKey = leafKey
        self.rootKey = rootKey
        self.intermediateKey = intermediateKey
    }

    /// The root to list in `trusted_roots`.
    public var rootAnchor: TrustAnchor {
        // The root parsed when it was made, so this cannot fail.
        try! TrustAnchor(derEncoded: root.derEncoded)
    }

    public var rootCertificateDER: [UInt8] { root.derEncoded }

    /// Signs `payload` (any bytes: tests sign broken payloads on purpose) as Apple does.
    /// - Parameters:
    ///   - includeRoot: Apple's receipts carry their root; the test root is trusted from config either way.
    ///   - signedAttributes: sign attributes holding the content's digest, as `openssl cms -sign` does, instead of
    ///     the content itself as Apple does.
    public func sign(
        payload: [UInt8], digest: SignatureDigest = .sha256, includeRoot: Bool = true, signedAttributes: Bool = false
    ) throws -> [UInt8] {
        try CertificateIssuer.signPKCS7(
            content: payload, signer: leaf, key: leafKey,
            certificates: [leaf, intermediate] + (includeRoot ? [root] : []), digest: digest.digest,
            signedAttributes: signedAttributes)
    }

    // MARK: Files

    static let fileNames = (
        root: "root.pem", rootKey: "root.key.pem", intermediate: "intermediate.pem",
        intermediateKey: "intermediate.key.pem", leaf: "signing.pem", leafKey: "signing.key.pem"
    )

    /// Writes certificates, keys and a README into `directory` (created if missing). Keys are written readable by
    /// the owner only.
    public func write(toDirectory directory: String) throws {
        let folder = try PKIFolder(creating: directory)
        func write(_ name: String, _ bytes: [UInt8], secret: Bool = false) throws {
            try folder.write(name, bytes, secret: secret)
        }
        try write(Self.fileNames.root, CertificateIssuer.pem(of: root))
        try write(Self.fileNames.intermediate, CertificateIssuer.pem(of: intermediate))
        try write(Self.fileNames.leaf, CertificateIssuer.pem(of: leaf))
        try write(Self.fileNames.leafKey, leafKey.pem(), secret: true)
        if let rootKey { try write(Self.fileNames.rootKey, rootKey.pem(), secret: true) }
        if let intermediateKey { try write(Self.fileNames.intermediateKey, intermediateKey.pem(), secret: true) }
        try write(
            "README.txt",
            Array("""
                receiptd test PKI - FOR TESTS ONLY. Never trust root.pem in production: anyone with these keys can
                forge receipts that a receiptd trusting this root accepts.
                root.pem -> intermediate.pem (WWDR marker) -> signing.pem (receipt-signing marker); *.key.pem are keys.
                Trust it in a test config with: "trusted_roots": ["\(directory)/root.pem"]

                """.utf8))
    }

    /// Reads a PKI written by `write(toDirectory:)`; the root and intermediate keys are optional.
    public init(directory: String) throws {
        let read = PKIFolder(directory).read
        do {
            root = try X509Certificate(pem: try read(Self.fileNames.root))
            intermediate = try X509Certificate(pem: try read(Self.fileNames.intermediate))
            leaf = try X509Certificate(pem: try read(Self.fileNames.leaf))
            leafKey = try PrivateKey(pem: try read(Self.fileNames.leafKey))
        } catch let error as OpenSSLError {
            throw TestAuthorityError(message: "\(directory): \(error.description)")
        }
        rootKey = (try? read(Self.fileNames.rootKey)).flatMap { try? PrivateKey(pem: $0) }
        intermediateKey = (try? read(Self.fileNames.intermediateKey)).flatMap { try? PrivateKey(pem: $0) }
    }
}

public struct TestAuthorityError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
