internal import COpenSSL

/// The elliptic curves the StoreKit 2 test PKI uses: P-384 for root and intermediate, P-256 for the leaf, as Apple's.
package enum ECCurve: String, Sendable {
    case p256 = "P-256"
    case p384 = "P-384"
}

extension PrivateKey {
    /// A fresh EC key on `curve`, for the test PKI only.
    package static func generateEC(_ curve: ECCurve) throws(OpenSSLError) -> PrivateKey {
        guard let key = receiptd_ec_generate(curve.rawValue) else { throw OpenSSLError("EC key generation") }
        return PrivateKey(owning: key)
    }

    /// The digest a certificate signed by this key uses: SHA-384 for a P-384 key (ecdsa-with-SHA384, as Apple Root
    /// CA - G3 signs), SHA-256 for anything else.
    var certificateDigest: Digest {
        EVP_PKEY_get_base_id(pointer) == NID_X9_62_id_ecPublicKey && EVP_PKEY_get_bits(pointer) == 384
            ? .sha384 : .sha256
    }

    /// A JOSE ES256 signature (raw r‖s, 64 bytes) over `signingInput`; the key must be on P-256.
    package func signES256(_ signingInput: [UInt8]) throws(OpenSSLError) -> [UInt8] {
        let der = try sign(signingInput, digest: .sha256)
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let parsed else { throw OpenSSLError("d2i_ECDSA_SIG") }
        defer { ECDSA_SIG_free(parsed) }
        guard let r = ECDSA_SIG_get0_r(parsed), let s = ECDSA_SIG_get0_s(parsed) else {
            throw OpenSSLError("ECDSA_SIG_get0")
        }
        var raw = [UInt8](repeating: 0, count: ES256.signatureLength)
        let written = raw.withUnsafeMutableBufferPointer { buffer in
            (BN_bn2binpad(r, buffer.baseAddress, 32), BN_bn2binpad(s, buffer.baseAddress.unsafelyUnwrapped + 32, 32))
        }
        guard written == (32, 32) else { throw OpenSSLError("BN_bn2binpad") }
        return raw
    }

    /// A signature over `data` in OpenSSL's own form: DER for ECDSA, PKCS#1 v1.5 for RSA.
    package func sign(_ data: [UInt8], digest: Digest) throws(OpenSSLError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw OpenSSLError("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, digest.algorithm, nil, pointer) == 1 else {
            throw OpenSSLError("EVP_DigestSignInit")
        }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, data, data.count) == 1 else { throw OpenSSLError("EVP_DigestSign") }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, data, data.count) == 1 else {
            throw OpenSSLError("EVP_DigestSign")
        }
        return Array(signature.prefix(length))
    }
}

extension X509Certificate {
    /// The certificate's SubjectPublicKeyInfo as DER: what algorithm-confusion attacks use as an HMAC key.
    package var subjectPublicKeyInfo: [UInt8]? {
        var buffer: UnsafeMutablePointer<UInt8>?
        let length = i2d_PUBKEY(X509_get0_pubkey(pointer), &buffer)
        guard length > 0, let buffer else {
            ERR_clear_error()
            return nil
        }
        defer { receiptd_OPENSSL_free(buffer) }
        return Array(UnsafeBufferPointer(start: buffer, count: Int(length)))
    }
}

/// HMAC (RFC 2104): webhook signatures (issue 25), and forged HS256 tokens a verifier must refuse.
package enum HMAC {
    package static func authenticationCode(key: [UInt8], data: [UInt8], digest: Digest) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let result = COpenSSL.HMAC(digest.algorithm, key, Int32(key.count), data, data.count, &output, &length)
        precondition(result != nil, "HMAC cannot fail for SHA-2 on memory")
        return Array(output.prefix(Int(length)))
    }
}
