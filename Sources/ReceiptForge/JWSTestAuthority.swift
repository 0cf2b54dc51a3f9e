#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import JSONText
public import ReceiptEngine
package import CryptoFloor

/// A StoreKit 2 test PKI shaped like Apple's: a P-384 root, a P-384 intermediate carrying the WWDR marker and a
/// P-256 leaf carrying the signing marker; or, like Xcode's StoreKit testing, one self-signed P-256 certificate
/// (`kid` `Apple_Xcode_Key`). For tests only: its JWS verify solely where its root is in `trusted_roots`.
public struct JWSTestAuthority: Sendable {
    public struct Options: Sendable {
        /// Validity of every certificate unless overridden below.
        public var notBefore: Date
        public var notAfter: Date
        public var intermediateValidity: ClosedRange<Date>?
        public var leafValidity: ClosedRange<Date>?
        public var intermediateHasMarker = true
        public var leafHasMarker = true
        /// A rogue root that carries both of Apple's markers itself (markers never make a root trusted).
        public var rootHasMarkers = false

        public init(now: Date = Date()) {
            notBefore = now.addingTimeInterval(-2 * 365 * 86_400)
            notAfter = now.addingTimeInterval(20 * 365 * 86_400)
        }
    }

    /// Leaf first; three certificates, or one for Xcode's style.
    package let chain: [X509Certificate]
    package let leafKey: PrivateKey
    private let issuerKeys: [PrivateKey]
    /// `Apple_Xcode_Key` for the Xcode style.
    public let keyID: String?

    public static let xcodeKeyID = "Apple_Xcode_Key"

    public static func generate(_ options: Options = Options()) throws -> JWSTestAuthority {
        let rootKey = try PrivateKey.generateEC(.p384)
        let intermediateKey = try PrivateKey.generateEC(.p384)
        let leafKey = try PrivateKey.generateEC(.p256)
        let (root, intermediate, leaf) = try AppleShapedChain(
            names: ("receiptd Test Root CA - G3", "receiptd Test Worldwide Developer Relations CA G6",
                    "receiptd Test StoreKit Signing"),
            validity: options.notBefore...options.notAfter, intermediateValidity: options.intermediateValidity,
            leafValidity: options.leafValidity,
            rootMarkers: options.rootHasMarkers ? [AppleMarker.signing, AppleMarker.worldwideDeveloperRelations] : [],
            intermediateHasMarker: options.intermediateHasMarker, leafHasMarker: options.leafHasMarker
        ).issue(rootKey: rootKey, intermediateKey: intermediateKey, leafKey: leafKey)
        return JWSTestAuthority(
            chain: [leaf, intermediate, root], leafKey: leafKey, issuerKeys: [intermediateKey, rootKey], keyID: nil)
    }

    /// One self-signed P-256 certificate, as Xcode's "StoreKit Testing in Xcode" signs with.
    public static func generateXcode(now: Date = Date()) throws -> JWSTestAuthority {
        let key = try PrivateKey.generateEC(.p256)
        let certificate = try CertificateIssuer.issue(
            CertificateTemplate(
                commonName: "receiptd Test StoreKit Testing in Xcode", serial: Int64.random(in: 1...(1 << 40)),
                notBefore: Int64(now.timeIntervalSince1970) - 365 * 86_400,
                notAfter: Int64(now.timeIntervalSince1970) + 10 * 365 * 86_400, isCA: true, markers: []),
            subjectKey: key, issuer: nil, issuerKey: key)
        return JWSTestAuthority(chain: [certificate], leafKey: key, issuerKeys: [], keyID: xcodeKeyID)
    }

    private init(chain: [X509Certificate], leafKey: PrivateKey, issuerKeys: [PrivateKey], keyID: String?) {
        self.chain = chain
        self.leafKey = leafKey
        self.issuerKeys = issuerKeys
        self.keyID = keyID
    }

    /// The root to list in `trusted_roots` (Xcode's style: its one certificate).
    public var rootAnchor: TrustAnchor {
        // Parsed when it was made, so this cannot fail.
        try! TrustAnchor(derEncoded: chain[chain.count - 1].derEncoded)
    }

    /// DER of the chain, leaf first: what `x5c` carries.
    public var certificatesDER: [[UInt8]] { chain.map(\.derEncoded) }

    /// The leaf's SubjectPublicKeyInfo (DER): the "public key bytes" of algorithm-confusion attacks.
    public var leafPublicKeyDER: [UInt8] { chain[0].subjectPublicKeyInfo ?? [] }

    /// Another leaf under the same intermediate, as an attacker with a copy of Apple's intermediate and root
    /// would make one: same names and markers, its own key, but signed by the attacker's key, not the intermediate's.
    public func forgedLeaf(serial: Int64) throws -> JWSTestAuthority {
        precondition(chain.count == 3, "a forged leaf needs an intermediate")
        let key = try PrivateKey.generateEC(.p256)
        let validity = chain[0].validity ?? (0, 0)
        let leaf = try CertificateIssuer.issue(
            CertificateTemplate(
                commonName: "receiptd Test StoreKit Signing", serial: serial, notBefore: validity.notBefore / 1000,
                notAfter: validity.notAfter / 1000, isCA: false, markers: [AppleMarker.signing]),
            subjectKey: key, issuer: chain[1], issuerKey: key)
        return JWSTestAuthority(chain: [leaf, chain[1], chain[2]], leafKey: key, issuerKeys: issuerKeys, keyID: nil)
    }

    // MARK: Signing

    /// Signs `payload` as Apple does (compact JWS, ES256, `x5c` of the chain), unless `options` say otherwise.
    public func sign(_ payload: JSONValue, _ options: JWSSigningOptions = JWSSigningOptions()) throws -> String {
        try sign(payloadBytes: payload.serialized(), options)
    }

    /// Signs any payload bytes (tests sign broken payloads on purpose).
    public func sign(payloadBytes: [UInt8], _ options: JWSSigningOptions = JWSSigningOptions()) throws -> String {
        let x5c = (options.certificates ?? certificatesDER).map { Data($0).base64EncodedString() }
        var header: [(key: String, value: JSONValue)] = [
            ("alg", .string(options.algorithm.rawValue)), ("x5c", .array(x5c.map(JSONValue.string))),
        ]
        if let keyID { header.append(("kid", .string(keyID))) }
        header += options.extraHeader
        let signingInput = Self.base64URL(JSONValue.object(header).serialized()) + "." + Self.base64URL(payloadBytes)
        let input = Array(signingInput.utf8)
        var signature: [UInt8]
        switch options.algorithm {
        case .es256:
            switch options.signatureForm {
            case .raw: signature = try leafKey.signES256(input)
            case .der: signature = try leafKey.sign(input, digest: .sha256)
            case .truncated: signature = Array(try leafKey.signES256(input).prefix(63))
            }
        case .none: signature = []
        case .hs256: signature = HMAC.authenticationCode(key: leafPublicKeyDER, data: input, digest: .sha256)
        case .rs256: signature = try PrivateKey.generateRSA(bits: 2048).sign(input, digest: .sha256)
        }
        guard options.tamperPayload else { return signingInput + "." + Self.base64URL(signature) }
        // One payload byte changed after signing, where JSON stays valid: the first digit becomes another.
        var tampered = payloadBytes
        if let index = tampered.firstIndex(where: { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
            tampered[index] = tampered[index] == UInt8(ascii: "9") ? UInt8(ascii: "8") : tampered[index] + 1
        } else if !tampered.isEmpty {
            tampered[tampered.count - 1] ^= 0x01
        }
        let text = Self.base64URL(JSONValue.object(header).serialized()) + "." + Self.base64URL(tampered) + "."
            + Self.base64URL(signature)
        return text
    }

    /// Signs exactly these header and payload bytes (ES256 with the leaf key), for fuzzing the header.
    public func sign(headerBytes: [UInt8], payloadBytes: [UInt8]) throws -> String {
        let signingInput = Self.base64URL(headerBytes) + "." + Self.base64URL(payloadBytes)
        return signingInput + "." + Self.base64URL(try leafKey.signES256(Array(signingInput.utf8)))
    }

    /// The header `sign` writes, as JSON bytes.
    public var header: [UInt8] {
        var header: [(key: String, value: JSONValue)] = [
            ("alg", .string("ES256")),
            ("x5c", .array(certificatesDER.map { .string(Data($0).base64EncodedString()) })),
        ]
        if let keyID { header.append(("kid", .string(keyID))) }
        return JSONValue.object(header).serialized()
    }

    static func base64URL(_ bytes: [UInt8]) -> String { Base64.encode(bytes, alphabet: .url) }

    // MARK: Files

    static let fileNames = (
        root: "jws-root.pem", rootKey: "jws-root.key.pem", intermediate: "jws-intermediate.pem",
        intermediateKey: "jws-intermediate.key.pem", leaf: "jws-signing.pem", leafKey: "jws-signing.key.pem"
    )

    /// Writes the chain and keys beside a `TestCertificateAuthority`'s files in `directory` (created if missing),
    /// under their own `jws-` names; keys readable by the owner only.
    public func write(toDirectory directory: String) throws {
        precondition(chain.count == 3, "the Xcode style has no directory form")
        let folder = try PKIFolder(creating: directory)
        func write(_ name: String, _ bytes: [UInt8], secret: Bool = false) throws {
            try folder.write(name, bytes, secret: secret)
        }
        try write(Self.fileNames.root, CertificateIssuer.pem(of: chain[2]))
        try write(Self.fileNames.intermediate, CertificateIssuer.pem(of: chain[1]))
        try write(Self.fileNames.leaf, CertificateIssuer.pem(of: chain[0]))
        try write(Self.fileNames.leafKey, leafKey.pem(), secret: true)
        try write(Self.fileNames.intermediateKey, issuerKeys[0].pem(), secret: true)
        try write(Self.fileNames.rootKey, issuerKeys[1].pem(), secret: true)
        try write(
            "jws-README.txt",
            Array("""
                receiptd StoreKit 2 test PKI - FOR TESTS ONLY. Never trust jws-root.pem in production: anyone with
                these keys can forge transactions and notifications that a receiptd trusting this root accepts.
                jws-root.pem (P-384) -> jws-intermediate.pem (P-384, WWDR marker) -> jws-signing.pem (P-256, signing
                marker); *.key.pem are keys.
                Trust it in a test config with: "trusted_roots": ["\(directory)/jws-root.pem"]

                """.utf8))
    }

    /// Reads a chain written by `write(toDirectory:)`.
    public init(directory: String) throws {
        let read = PKIFolder(directory).read
        do {
            chain = [
                try X509Certificate(pem: try read(Self.fileNames.leaf)),
                try X509Certificate(pem: try read(Self.fileNames.intermediate)),
                try X509Certificate(pem: try read(Self.fileNames.root)),
            ]
            leafKey = try PrivateKey(pem: try read(Self.fileNames.leafKey))
            issuerKeys = [
                try PrivateKey(pem: try read(Self.fileNames.intermediateKey)),
                try PrivateKey(pem: try read(Self.fileNames.rootKey)),
            ]
        } catch let error as OpenSSLError {
            throw TestAuthorityError(message: "\(directory): \(error.description)")
        }
        keyID = nil
    }
}

/// Knobs for forging JWS a verifier must refuse.
public struct JWSSigningOptions: Sendable {
    /// The header's `alg`, and how the signature is made.
    public enum Algorithm: String, Sendable, CaseIterable {
        case es256 = "ES256"
        /// No signature at all (an empty third segment).
        case none
        /// HMAC-SHA256 keyed with the leaf's public key bytes: the classic algorithm-confusion forgery.
        case hs256 = "HS256"
        /// RSA PKCS#1 v1.5 with a fresh RSA key.
        case rs256 = "RS256"
    }

    /// How an ES256 signature is written.
    public enum SignatureForm: String, Sendable {
        /// JOSE's 64-byte r‖s.
        case raw
        /// OpenSSL's DER `ECDSA-Sig-Value`, which JOSE does not allow.
        case der
        /// r‖s missing its last byte (63 bytes).
        case truncated
    }

    public var algorithm: Algorithm = .es256
    public var signatureForm: SignatureForm = .raw
    /// `x5c` in place of the chain (DER certificates, any number).
    public var certificates: [[UInt8]]?
    /// Members appended to the header (`crit`, `typ`, …).
    public var extraHeader: [(key: String, value: JSONValue)] = []
    /// Change one payload byte after signing (the JSON stays valid).
    public var tamperPayload = false

    public init() {}
}
