import CBenchOpenSSL

/// What receiptd is measured against, done with OpenSSL directly.
///
/// - The floor: SHA-256 over the content plus one RSA verification with a key parsed once, the least work a
///   validation that checks the signature at all can do.
/// - The naive way: `d2i_PKCS7` and `PKCS7_verify` with the chain on every call, which decodes every certificate
///   the receipt carries each time.
///
/// Every OpenSSL object made here is owned by this class (freed in `deinit`) or freed with `defer` in the call
/// that made it.
final class OpenSSLBaselines {
    private let receipt: [UInt8]
    private let store: OpaquePointer
    private let signerKey: OpaquePointer
    private let sha256: OpaquePointer
    private let content: [UInt8]
    private let signedAttributes: [UInt8]?
    private let signature: [UInt8]

    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ step: String) {
            let code = ERR_get_error()
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            description = "\(step): \(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))"
            ERR_clear_error()
        }
    }

    /// - Parameters:
    ///   - receipt: a DER receipt whose chain ends at `root`.
    ///   - root: the DER trust anchor (Apple Inc. Root for real receipts).
    init(receipt: [UInt8], root: [UInt8]) throws {
        self.receipt = receipt
        guard let sha256 = EVP_MD_fetch(nil, "SHA256", nil) else { throw Failure("EVP_MD_fetch") }
        guard let store = X509_STORE_new() else {
            EVP_MD_free(sha256)
            throw Failure("X509_STORE_new")
        }
        self.sha256 = sha256
        self.store = store
        var partial: (key: OpaquePointer?, ok: Bool) = (nil, false)
        defer {
            if !partial.ok {
                if let key = partial.key { EVP_PKEY_free(key) }
                X509_STORE_free(store)
                EVP_MD_free(sha256)
            }
        }

        let anchor = try Self.decodeCertificate(root)
        defer { X509_free(anchor) }
        guard X509_STORE_add_cert(store, anchor) == 1 else { throw Failure("X509_STORE_add_cert") }
        // Apple's chains have expired and carry SHA-1; receiptd checks validity at the receipt's creation date.
        let parameters = X509_STORE_get0_param(store)
        X509_VERIFY_PARAM_set_auth_level(parameters, 0)
        X509_STORE_set_flags(store, UInt(X509_V_FLAG_NO_CHECK_TIME))
        X509_STORE_set_purpose(store, X509_PURPOSE_ANY)

        let p7 = try Self.decodePKCS7(receipt)
        defer { PKCS7_free(p7) }
        guard let signers = PKCS7_get0_signers(p7, nil, 0) else { throw Failure("PKCS7_get0_signers") }
        defer { bench_sk_X509_free(signers) }
        guard let signer = bench_sk_X509_value(signers, 0), let key = X509_get_pubkey(signer) else {
            throw Failure("signer key")
        }
        partial.key = key

        var length: Int32 = 0
        let contentPointer = bench_p7_content(p7, &length)
        content = Array(UnsafeBufferPointer(start: contentPointer, count: Int(length)))
        guard let info = bench_p7_signer_info(p7) else { throw Failure("signer info") }
        let signaturePointer = bench_signature(info, &length)
        signature = Array(UnsafeBufferPointer(start: signaturePointer, count: Int(length)))
        var attributes: UnsafeMutablePointer<UInt8>?
        let attributesLength = bench_signed_attributes(info, &attributes)
        if attributesLength > 0, let attributes {
            defer { bench_OPENSSL_free(attributes) }
            signedAttributes = Array(UnsafeBufferPointer(start: attributes, count: Int(attributesLength)))
        } else {
            signedAttributes = nil
        }
        signerKey = key
        partial.ok = true
        guard signatureOnly(), naivePKCS7Verify() else { throw Failure("the baselines do not verify this receipt") }
    }

    deinit {
        EVP_PKEY_free(signerKey)
        X509_STORE_free(store)
        EVP_MD_free(sha256)
    }

    var hasSignedAttributes: Bool { signedAttributes != nil }

    /// SHA-256 over the content and one RSA verification: without signed attributes the verification hashes the
    /// content itself; with them the content is hashed (and compared with the messageDigest attribute) and the
    /// verification hashes the attributes.
    func signatureOnly() -> Bool {
        if let signedAttributes {
            var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
            var size: UInt32 = 0
            guard EVP_Digest(content, content.count, &digest, &size, sha256, nil) == 1, size == 32 else { return false }
            return verify(signedAttributes)
        }
        return verify(content)
    }

    private func verify(_ signed: [UInt8]) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, sha256, nil, signerKey) == 1 else { return false }
        return EVP_DigestVerify(context, signature, signature.count, signed, signed.count) == 1
    }

    /// Decodes the whole receipt and verifies signature and chain with `PKCS7_verify`, as most guides show.
    func naivePKCS7Verify() -> Bool {
        guard let p7 = try? Self.decodePKCS7(receipt) else { return false }
        defer { PKCS7_free(p7) }
        let ok = PKCS7_verify(p7, nil, store, nil, nil, 0) == 1
        if !ok { ERR_clear_error() }
        return ok
    }

    private static func decodePKCS7(_ bytes: [UInt8]) throws -> UnsafeMutablePointer<PKCS7> {
        let p7 = bytes.withUnsafeBufferPointer { buffer -> UnsafeMutablePointer<PKCS7>? in
            var cursor = buffer.baseAddress
            return d2i_PKCS7(nil, &cursor, buffer.count)
        }
        guard let p7 else { throw Failure("d2i_PKCS7") }
        return p7
    }

    private static func decodeCertificate(_ bytes: [UInt8]) throws -> OpaquePointer {
        let certificate = bytes.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)
        }
        guard let certificate else { throw Failure("d2i_X509") }
        return certificate
    }
}
