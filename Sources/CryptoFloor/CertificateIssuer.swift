internal import COpenSSL

/// Owns one private `EVP_PKEY`, for the test PKI only.
package final class PrivateKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(owning pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(pointer) }

    package static func generateRSA(bits: Int) throws(OpenSSLError) -> PrivateKey {
        guard let key = receiptd_rsa_generate(UInt32(bits)) else { throw OpenSSLError("RSA key generation") }
        return PrivateKey(owning: key)
    }

    package init(pem: [UInt8]) throws(OpenSSLError) {
        let key: OpaquePointer? = pem.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let key else { throw OpenSSLError("not a PEM private key") }
        pointer = key
    }

    /// Unencrypted PKCS#8 PEM: test keys only.
    package func pem() throws(OpenSSLError) -> [UInt8] {
        try withMemoryBIO { bio in PEM_write_bio_PrivateKey(bio, pointer, nil, nil, 0, nil, nil) == 1 }
    }
}

/// Writes through a memory BIO and returns what was written.
private func withMemoryBIO(_ write: (OpaquePointer) -> Bool) throws(OpenSSLError) -> [UInt8] {
    guard let bio = BIO_new(BIO_s_mem()) else { throw OpenSSLError("BIO_new") }
    defer { BIO_free(bio) }
    guard write(bio) else { throw OpenSSLError("PEM write") }
    var data: UnsafeMutablePointer<CChar>?
    let length = receiptd_BIO_get_mem_data(bio, &data)
    guard length > 0, let data else { throw OpenSSLError("empty BIO") }
    return data.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
}

/// What to put in a certificate the test PKI issues.
package struct CertificateTemplate {
    package var commonName: String
    package var serial: Int64
    package var notBefore: Int64  // seconds since 1970
    package var notAfter: Int64
    package var isCA: Bool
    /// Dotted OIDs of Apple's marker extensions to include (value NULL, non-critical, as Apple writes them).
    package var markers: [String]

    package init(commonName: String, serial: Int64, notBefore: Int64, notAfter: Int64, isCA: Bool, markers: [String]) {
        self.commonName = commonName
        self.serial = serial
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.isCA = isCA
        self.markers = markers
    }
}

package enum CertificateIssuer {
    /// Issues a certificate for `subjectKey`, signed by `issuerKey` (SHA-384 for a P-384 issuer, as Apple's G3 root and
    /// WWDR intermediate sign, SHA-256 otherwise); self-signed when `issuer` is nil.
    package static func issue(
        _ template: CertificateTemplate, subjectKey: PrivateKey, issuer: X509Certificate?, issuerKey: PrivateKey
    ) throws(OpenSSLError) -> X509Certificate {
        guard let certificate = X509_new() else { throw OpenSSLError("X509_new") }
        defer { X509_free(certificate) }
        guard X509_set_version(certificate, 2) == 1,
            ASN1_INTEGER_set_int64(X509_get_serialNumber(certificate), template.serial) == 1,
            setTime(X509_getm_notBefore(certificate), template.notBefore),
            setTime(X509_getm_notAfter(certificate), template.notAfter),
            X509_set_pubkey(certificate, subjectKey.pointer) == 1
        else { throw OpenSSLError("setting certificate fields") }

        guard let name = X509_NAME_new() else { throw OpenSSLError("X509_NAME_new") }
        defer { X509_NAME_free(name) }
        for (field, value) in [("O", "receiptd test PKI"), ("CN", template.commonName)] {
            guard X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, value, -1, -1, 0) == 1 else {
                throw OpenSSLError("X509_NAME_add_entry_by_txt")
            }
        }
        guard X509_set_subject_name(certificate, name) == 1,
            X509_set_issuer_name(certificate, issuer.map { X509_get_subject_name($0.pointer) } ?? name) == 1
        else { throw OpenSSLError("setting names") }

        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer?.pointer ?? certificate, certificate, nil, nil, 0)
        let standard: [(Int32, String)] = [
            (NID_basic_constraints, template.isCA ? "critical,CA:TRUE" : "critical,CA:FALSE"),
            (NID_key_usage, template.isCA ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature"),
            (NID_subject_key_identifier, "hash"),
        ] + (issuer == nil ? [] : [(NID_authority_key_identifier, "keyid:always")])
        for (nid, value) in standard {
            guard let extensionValue = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                throw OpenSSLError("extension \(nid)")
            }
            defer { X509_EXTENSION_free(extensionValue) }
            guard X509_add_ext(certificate, extensionValue, -1) == 1 else { throw OpenSSLError("X509_add_ext") }
        }
        for marker in template.markers { try addMarker(marker, to: certificate) }

        guard X509_sign(certificate, issuerKey.pointer, issuerKey.certificateDigest.algorithm) > 0 else {
            throw OpenSSLError("X509_sign")
        }
        var encoded: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(certificate, &encoded)
        guard length > 0, let encoded else { throw OpenSSLError("i2d_X509") }
        defer { receiptd_OPENSSL_free(encoded) }
        return try X509Certificate(derEncoded: UnsafeBufferPointer(start: encoded, count: Int(length)))
    }

    private static func setTime(_ time: UnsafeMutablePointer<ASN1_TIME>?, _ seconds: Int64) -> Bool {
        ASN1_TIME_set(time, time_t(seconds)) != nil
    }

    private static func addMarker(_ oid: String, to certificate: OpaquePointer) throws(OpenSSLError) {
        guard let object = OBJ_txt2obj(oid, 1) else { throw OpenSSLError("OBJ_txt2obj \(oid)") }
        defer { ASN1_OBJECT_free(object) }
        guard let value = ASN1_OCTET_STRING_new() else { throw OpenSSLError("ASN1_OCTET_STRING_new") }
        defer { ASN1_OCTET_STRING_free(value) }
        let null: [UInt8] = [0x05, 0x00]
        guard ASN1_OCTET_STRING_set(value, null, Int32(null.count)) == 1,
            let extensionValue = X509_EXTENSION_create_by_OBJ(nil, object, 0, value)
        else { throw OpenSSLError("marker extension \(oid)") }
        defer { X509_EXTENSION_free(extensionValue) }
        guard X509_add_ext(certificate, extensionValue, -1) == 1 else { throw OpenSSLError("X509_add_ext \(oid)") }
    }

    package static func pem(of certificate: X509Certificate) throws(OpenSSLError) -> [UInt8] {
        try withMemoryBIO { bio in PEM_write_bio_X509(bio, certificate.pointer) == 1 }
    }

    /// Signs `content` as Apple does: PKCS#7 signedData with the content embedded, no signed attributes, the given
    /// certificates included.
    /// - Parameter signedAttributes: add content type, signing time and message digest as S/MIME tools do, rather
    ///   than signing the content directly as Apple does.
    package static func signPKCS7(
        content: [UInt8], signer: X509Certificate, key: PrivateKey, certificates: [X509Certificate], digest: Digest,
        signedAttributes: Bool = false
    ) throws(OpenSSLError) -> [UInt8] {
        let flags = Int32(PKCS7_BINARY | PKCS7_PARTIAL | PKCS7_NOSMIMECAP | PKCS7_NOCERTS)
            | (signedAttributes ? 0 : Int32(PKCS7_NOATTR))
        guard let pkcs7 = PKCS7_sign(nil, nil, nil, nil, flags) else { throw OpenSSLError("PKCS7_sign") }
        defer { PKCS7_free(pkcs7) }
        guard PKCS7_sign_add_signer(pkcs7, signer.pointer, key.pointer, digest.algorithm, flags) != nil else {
            throw OpenSSLError("PKCS7_sign_add_signer")
        }
        for certificate in certificates where PKCS7_add_certificate(pkcs7, certificate.pointer) != 1 {
            throw OpenSSLError("PKCS7_add_certificate")
        }
        let finished = content.withUnsafeBytes { buffer -> Bool in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return false }
            defer { BIO_free(bio) }
            return PKCS7_final(pkcs7, bio, flags) == 1
        }
        guard finished else { throw OpenSSLError("PKCS7_final") }
        var encoded: UnsafeMutablePointer<UInt8>?
        let length = i2d_PKCS7(pkcs7, &encoded)
        guard length > 0, let encoded else { throw OpenSSLError("i2d_PKCS7") }
        defer { receiptd_OPENSSL_free(encoded) }
        return Array(UnsafeBufferPointer(start: encoded, count: Int(length)))
    }
}

extension X509Certificate {
    /// Reads a PEM certificate (the first block).
    package convenience init(pem: [UInt8]) throws(OpenSSLError) {
        guard let block = PEM.blocks(pem, label: "CERTIFICATE").first, let der = block else {
            throw OpenSSLError("no CERTIFICATE block")
        }
        try self.init(derEncoded: der)
    }
}
