internal import CryptoFloor


enum ObjectIdentifiers {
    static let signedData: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02]
    static let data: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x01]
    static let sha1: [UInt8] = [0x2B, 0x0E, 0x03, 0x02, 0x1A]
    static let sha256: [UInt8] = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01]
    /// rsaEncryption, sha1WithRSAEncryption, sha256WithRSAEncryption, ecdsa-with-SHA1, ecdsa-with-SHA256.
    static let signatureAlgorithms: [[UInt8]] = [
        [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01],
        [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x05],
        [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0B],
        [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x01],
        [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02],
    ]
    static let contentTypeAttribute: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x03]
    static let messageDigestAttribute: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x04]
}

/// The parts of a PKCS#7 signedData receipt that validation needs, located without decoding any certificate.
///
/// `d2i_PKCS7` would decode every certificate in the receipt on every call (about 160 µs each on OpenSSL 3.0);
/// reading the container's structure ourselves lets certificate work be cached by the certificates' exact bytes.
struct ReceiptContainer {
    /// The signed content: the receipt payload.
    var content: [UInt8]
    /// Each certificate's complete encoding, in the order the receipt lists them.
    var certificates: [ArraySlice<UInt8>]
    /// SignerInfo.issuerAndSerialNumber, complete encoding: names the signing certificate.
    var signerIdentifier: ArraySlice<UInt8>
    /// SignerInfo.digestAlgorithm: SHA-1 or SHA-256.
    var digest: Digest
    /// The DER to verify the signature over when signed attributes are present (re-tagged as a SET), else nil.
    var signedAttributes: [UInt8]?
    /// The messageDigest signed attribute's value, when signed attributes are present.
    var signedMessageDigest: [UInt8]?
    var signature: [UInt8]

    init(parsing bytes: [UInt8]) throws {
        let reader = ASN1Reader(bytes)
        let contentInfo = try reader.root()
        let contentInfoParts = try reader.children(of: contentInfo)
        guard contentInfo.isUniversal(ASN1Tag.sequence), contentInfoParts.count >= 2,
            contentInfoParts[0].isUniversal(ASN1Tag.objectIdentifier),
            reader.content(of: contentInfoParts[0]).hasSameBytes(as: ObjectIdentifiers.signedData[...]),
            contentInfoParts[1].isContext(0)
        else { throw ASN1ReadError(reason: "not a PKCS#7 signedData container") }

        let explicitSignedData = try reader.children(of: contentInfoParts[1])
        guard explicitSignedData.count == 1, explicitSignedData[0].isUniversal(ASN1Tag.sequence) else {
            throw ASN1ReadError(reason: "signedData is not a SEQUENCE")
        }
        var fields = try reader.children(of: explicitSignedData[0])[...]
        // version, digestAlgorithms, contentInfo, [0] certificates, [1] crls, signerInfos
        // PKCS#7 v1.5 and CMS both give version 1 to signedData signed by issuer and serial number, as receipts are.
        guard fields.count >= 4, try reader.integer(fields.removeFirst()) == 1 else {
            throw ASN1ReadError(reason: "signedData is not version 1")
        }
        let digestAlgorithms = fields.removeFirst()
        guard digestAlgorithms.isUniversal(ASN1Tag.set) else {
            throw ASN1ReadError(reason: "signedData lacks its digest algorithms")
        }
        var declaredDigests: [ArraySlice<UInt8>] = []
        for algorithm in try reader.children(of: digestAlgorithms) {
            guard let oid = try Self.algorithmIdentifier(algorithm, reader).first, oid.isUniversal(ASN1Tag.objectIdentifier)
            else { throw ASN1ReadError(reason: "a digest algorithm is not an AlgorithmIdentifier") }
            declaredDigests.append(reader.content(of: oid))
        }

        let encapsulatedInfo = fields.removeFirst()
        guard encapsulatedInfo.isUniversal(ASN1Tag.sequence) else { throw ASN1ReadError(reason: "content info is not a SEQUENCE") }
        let encapsulated = try reader.children(of: encapsulatedInfo)
        guard encapsulated.count == 2, encapsulated[0].isUniversal(ASN1Tag.objectIdentifier),
            reader.content(of: encapsulated[0]).hasSameBytes(as: ObjectIdentifiers.data[...]),
            encapsulated[1].isContext(0)
        else { throw ASN1ReadError(reason: "signedData carries no data content") }
        let explicitContent = try reader.children(of: encapsulated[1])
        guard explicitContent.count == 1 else { throw ASN1ReadError(reason: "content is not one OCTET STRING") }
        content = try reader.octetString(explicitContent[0])

        certificates = []
        if let first = fields.first, first.isContext(0) {
            fields.removeFirst()
            for certificate in try reader.children(of: first) {
                certificates.append(reader.encoding(of: certificate))
            }
        }
        if let first = fields.first, first.isContext(1) { fields.removeFirst() }
        guard let signerInfos = fields.first, signerInfos.isUniversal(ASN1Tag.set) else {
            throw ASN1ReadError(reason: "signedData has no signerInfos")
        }
        let signers = try reader.children(of: signerInfos)
        // Apple signs with exactly one signer; several would leave "which one counts" open.
        guard signers.count == 1 else { throw ASN1ReadError(reason: "expected one signer, found \(signers.count)") }
        guard signers[0].isUniversal(ASN1Tag.sequence) else { throw ASN1ReadError(reason: "signerInfo is not a SEQUENCE") }
        var signer = try reader.children(of: signers[0])[...]
        guard signer.count >= 5, try reader.integer(signer.removeFirst()) == 1 else {
            throw ASN1ReadError(reason: "signerInfo is incomplete or not version 1")
        }
        let identifier = signer.removeFirst()
        guard identifier.isUniversal(ASN1Tag.sequence) else { throw ASN1ReadError(reason: "signer is not named by issuer and serial") }
        signerIdentifier = reader.encoding(of: identifier)

        let digestAlgorithm = try Self.algorithmIdentifier(signer.removeFirst(), reader)
        guard let digestOID = digestAlgorithm.first, digestOID.isUniversal(ASN1Tag.objectIdentifier),
            let digest = Self.digest(oid: reader.content(of: digestOID))
        else { throw ASN1ReadError(reason: "signer digest is neither SHA-1 nor SHA-256") }
        guard declaredDigests.contains(where: { $0.hasSameBytes(as: reader.content(of: digestOID)) }) else {
            throw ASN1ReadError(reason: "the signer's digest is not among signedData's digest algorithms")
        }
        self.digest = digest

        signedAttributes = nil
        signedMessageDigest = nil
        if let attributes = signer.first, attributes.isContext(0) {
            signer.removeFirst()
            guard !attributes.isIndefinite else { throw ASN1ReadError(reason: "signed attributes must be DER") }
            // The signature covers the attributes as a DER SET, not under their [0] IMPLICIT tag (RFC 5652 §5.4).
            var encoded = Array(reader.encoding(of: attributes))
            encoded[0] = 0x31
            signedAttributes = encoded
            signedMessageDigest = try Self.messageDigest(in: attributes, reader: reader)
        }
        guard signer.count >= 2 else { throw ASN1ReadError(reason: "signerInfo lacks its signature") }
        // The signer's key decides how the signature verifies; the algorithm must still be one that fits Apple's.
        let signatureAlgorithm = try Self.algorithmIdentifier(signer.removeFirst(), reader)
        guard let signatureOID = signatureAlgorithm.first, signatureOID.isUniversal(ASN1Tag.objectIdentifier),
            ObjectIdentifiers.signatureAlgorithms.contains(where: {
                $0[...].hasSameBytes(as: reader.content(of: signatureOID))
            })
        else { throw ASN1ReadError(reason: "the signature algorithm is not RSA or ECDSA") }
        let signatureElement = signer.removeFirst()
        signature = try reader.octetString(signatureElement)
    }

    private static func digest(oid: ArraySlice<UInt8>) -> Digest? {
        if oid.hasSameBytes(as: ObjectIdentifiers.sha1[...]) { return .sha1 }
        if oid.hasSameBytes(as: ObjectIdentifiers.sha256[...]) { return .sha256 }
        return nil
    }

    /// `AlgorithmIdentifier ::= SEQUENCE { algorithm OBJECT IDENTIFIER, parameters ANY OPTIONAL }`, where the
    /// parameters of every algorithm accepted here are absent or NULL.
    private static func algorithmIdentifier(_ element: ASN1Element, _ reader: ASN1Reader) throws -> [ASN1Element] {
        let parts = element.isUniversal(ASN1Tag.sequence) ? try reader.children(of: element) : []
        guard (1...2).contains(parts.count), parts[0].isUniversal(ASN1Tag.objectIdentifier),
            parts.count == 1 || (parts[1].isUniversal(ASN1Tag.null) && parts[1].contentStart == parts[1].contentEnd)
        else { throw ASN1ReadError(reason: "an algorithm identifier is malformed") }
        return parts
    }

    private static func messageDigest(in attributes: ASN1Element, reader: ASN1Reader) throws -> [UInt8] {
        var digest: [UInt8]?
        var contentTypeIsData = false
        for attribute in try reader.children(of: attributes) {
            let parts = try reader.children(of: attribute)
            guard parts.count == 2, parts[0].isUniversal(ASN1Tag.objectIdentifier) else { continue }
            let values = try reader.children(of: parts[1])
            let oid = Array(reader.content(of: parts[0]))
            if oid == ObjectIdentifiers.messageDigestAttribute, values.count == 1 {
                digest = try reader.octetString(values[0])
            } else if oid == ObjectIdentifiers.contentTypeAttribute, values.count == 1 {
                contentTypeIsData = Array(reader.content(of: values[0])) == ObjectIdentifiers.data
            }
        }
        guard let digest, contentTypeIsData else {
            throw ASN1ReadError(reason: "signed attributes lack the content type or message digest")
        }
        return digest
    }
}
