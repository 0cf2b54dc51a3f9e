internal import COpenSSL

/// JOSE's ES256 (RFC 7518 §3.4): ECDSA on P-256 with SHA-256, the signature sent as the two 32-byte halves r‖s
/// rather than the DER `ECDSA-Sig-Value` OpenSSL verifies.
package enum ES256 {
    /// The length of a JOSE ES256 signature: r and s, 32 bytes each, big-endian.
    package static let signatureLength = 64

    /// The DER `ECDSA-Sig-Value` for a raw r‖s signature; nil unless it is exactly 64 bytes.
    package static func derSignature(raw: some Collection<UInt8>) -> [UInt8]? {
        let raw = Array(raw)
        guard raw.count == signatureLength else { return nil }
        guard let signature = ECDSA_SIG_new() else {
            ERR_clear_error()
            return nil
        }
        defer { ECDSA_SIG_free(signature) }
        let halves = raw.withUnsafeBufferPointer { buffer in
            (BN_bin2bn(buffer.baseAddress, 32, nil), BN_bin2bn(buffer.baseAddress.unsafelyUnwrapped + 32, 32, nil))
        }
        // ECDSA_SIG_set0 takes both numbers on success and neither on failure.
        guard let r = halves.0, let s = halves.1, ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(halves.0)
            BN_free(halves.1)
            ERR_clear_error()
            return nil
        }
        var encoded: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(signature, &encoded)
        guard length > 0, let encoded else {
            ERR_clear_error()
            return nil
        }
        defer { receiptd_OPENSSL_free(encoded) }
        return Array(UnsafeBufferPointer(start: encoded, count: Int(length)))
    }
}

extension PublicKey {
    /// Whether this is an EC key on P-256, the only key ES256 admits.
    package var isP256: Bool {
        isOnP256(pointer)
    }

    /// Verifies a JOSE ES256 signature (raw r‖s) over `signingInput`. False for any other length, and for a key
    /// that is not on P-256 (callers check `isP256` once per certificate; this guards the contract).
    package func verifyES256(signature raw: some Collection<UInt8>, over signingInput: [UInt8]) -> Bool {
        verifyES256(signature: raw, over: signingInput[...])
    }

    /// `verifyES256` over part of a buffer (a compact JWS's `header.payload`, read in place).
    package func verifyES256(signature raw: some Collection<UInt8>, over signingInput: ArraySlice<UInt8>) -> Bool {
        guard let der = ES256.derSignature(raw: raw) else { return false }
        return verify(signature: der, over: signingInput, digest: .sha256)
    }

    /// Whether `certificate` (DER) carries a valid signature by this key over its TBSCertificate.
    ///
    /// The certificate is walked with `ASN1Reader`, never decoded as X.509: a forged leaf under a genuine, already
    /// trusted intermediate is refused for the price of one verification with the intermediate's key, where
    /// `d2i_X509` and a chain build would cost several times that and could not be cached for a flood of distinct
    /// forgeries. A true answer says only that this key signed these bytes; the caller still builds the chain.
    package func hasSigned(certificate der: [UInt8]) -> Bool {
        let reader = ASN1Reader(der)
        guard let certificate = try? reader.root(), certificate.isUniversal(ASN1Tag.sequence), certificate.isConstructed,
            let parts = try? reader.children(of: certificate), parts.count == 3,
            parts[0].isUniversal(ASN1Tag.sequence), parts[1].isUniversal(ASN1Tag.sequence),
            parts[2].isUniversal(V_ASN1_BIT_STRING), !parts[2].isConstructed,
            let algorithm = try? reader.children(of: parts[1]), let oid = algorithm.first,
            oid.isUniversal(ASN1Tag.objectIdentifier),
            let digest = Self.signatureDigest(oid: reader.content(of: oid))
        else { return false }
        let bits = reader.content(of: parts[2])
        // The first content octet counts unused bits; a signature uses whole octets.
        guard bits.count > 1, bits.first == 0 else { return false }
        return verify(signature: Array(bits.dropFirst()), over: Array(reader.encoding(of: parts[0])), digest: digest)
    }

    /// The digest a certificate signature algorithm names: ECDSA (RFC 5758 §3.2) or RSA PKCS#1 v1.5 (RFC 4055 §5).
    private static func signatureDigest(oid: ArraySlice<UInt8>) -> Digest? {
        switch Array(oid) {
        case [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02], [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0B]:
            .sha256
        case [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x03], [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0C]:
            .sha384
        case [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x01], [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x05]:
            .sha1
        default: nil
        }
    }
}

extension PrivateKey {
    /// An App Store Connect API key: the `.p8` file, PEM `BEGIN PRIVATE KEY` (unencrypted PKCS#8) holding an EC key
    /// on P-256. Anything else, an encrypted key included, is an error: OpenSSL's default would ask for a passphrase
    /// on the terminal, and a server must fail instead of waiting for one.
    package convenience init(es256PEM pem: [UInt8]) throws(OpenSSLError) {
        let key: OpaquePointer? = pem.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
        }
        guard let key else { throw OpenSSLError("not an unencrypted PEM private key") }
        self.init(owning: key)
        guard isOnP256(key) else { throw OpenSSLError("not an EC P-256 key") }
    }
}

private func isOnP256(_ key: OpaquePointer) -> Bool {
    guard EVP_PKEY_get_base_id(key) == NID_X9_62_id_ecPublicKey else { return false }
    var name = [CChar](repeating: 0, count: 32)
    var length = 0
    guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1 else {
        ERR_clear_error()
        return false
    }
    return String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1"
}
