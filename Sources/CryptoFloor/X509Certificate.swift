internal import COpenSSL
import Synchronization
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// Owns one `X509`. OpenSSL treats a parsed certificate as read-only apart from internally locked caches, so an
/// instance may be read from several threads.
package final class X509Certificate: @unchecked Sendable {
    let pointer: OpaquePointer
    package let derEncoded: [UInt8]

    package init(derEncoded: some Collection<UInt8>) throws(OpenSSLError) {
        let bytes = Array(derEncoded)
        let parsed: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            guard let parsed = d2i_X509(nil, &cursor, buffer.count) else { return nil }
            // Trailing bytes would mean the encoding we cache by is not the certificate that verified.
            guard cursor == buffer.baseAddress.map({ $0 + buffer.count }) else {
                X509_free(parsed)
                return nil
            }
            return parsed
        }
        guard let parsed else { throw OpenSSLError("not an X.509 certificate") }
        pointer = parsed
        self.derEncoded = bytes
    }

    deinit { X509_free(pointer) }

    package var sha256Fingerprint: [UInt8] { Digest.sha256.hash(derEncoded) }

    /// Whether the certificate carries an extension with this dotted OID, critical or not.
    package func hasExtension(oid: String) -> Bool {
        guard let object = OBJ_txt2obj(oid, 1) else {
            ERR_clear_error()
            return false
        }
        defer { ASN1_OBJECT_free(object) }
        return X509_get_ext_by_OBJ(pointer, object, -1) >= 0
    }

    /// Whether subject and issuer are the same name, as for a root or Xcode's StoreKit test certificate.
    package var isSelfIssued: Bool {
        X509_NAME_cmp(X509_get_subject_name(pointer), X509_get_issuer_name(pointer)) == 0
    }

    /// notBefore and notAfter as milliseconds since 1970.
    package var validity: (notBefore: Int64, notAfter: Int64)? {
        guard let notBefore = Self.milliseconds(X509_get0_notBefore(pointer)),
            let notAfter = Self.milliseconds(X509_get0_notAfter(pointer))
        else { return nil }
        return (notBefore, notAfter)
    }

    private static func milliseconds(_ time: UnsafePointer<ASN1_TIME>?) -> Int64? {
        guard let time else { return nil }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else {
            ERR_clear_error()
            return nil
        }
        // timegm reads the broken-down time as UTC, which is what ASN1_TIME_to_tm produced.
        return Int64(timegm(&parts)) * 1000
    }

    /// The DER of `SEQUENCE { issuer, serialNumber }`, the way a PKCS#7 SignerInfo names its certificate.
    package var issuerAndSerialNumber: [UInt8]? {
        guard let issuer = Self.encode({ i2d_X509_NAME(X509_get_issuer_name(pointer), &$0) }),
            let serial = Self.encode({ i2d_ASN1_INTEGER(X509_get0_serialNumber(pointer), &$0) })
        else { return nil }
        return DERWriter.sequence(issuer + serial)
    }

    private static func encode(_ body: (inout UnsafeMutablePointer<UInt8>?) -> Int32) -> [UInt8]? {
        var buffer: UnsafeMutablePointer<UInt8>?
        let length = body(&buffer)
        guard length > 0, let buffer else {
            ERR_clear_error()
            return nil
        }
        defer { receiptd_OPENSSL_free(buffer) }
        return Array(UnsafeBufferPointer(start: buffer, count: Int(length)))
    }

    package var publicKey: PublicKey? {
        guard let key = X509_get_pubkey(pointer) else {
            ERR_clear_error()
            return nil
        }
        return PublicKey(owning: key)
    }
}

/// Owns one `EVP_PKEY` used only to verify; OpenSSL 3 allows concurrent verifications with one key.
package final class PublicKey: @unchecked Sendable {
    let pointer: OpaquePointer
    /// A context per digest, set up for verification once and copied for each verification.
    ///
    /// `EVP_DigestVerifyInit` fetches the signature algorithm and walks the provider's names on every call (a tenth of
    /// a cached receipt validation's own work); a copy of a set-up context duplicates it without any lookup.
    private let prepared = Mutex<[Digest: VerificationContext]>([:])

    init(owning pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(pointer) }

    /// RSA PKCS#1 v1.5 or ECDSA, as the key's type dictates.
    package func verify(signature: [UInt8], over data: [UInt8], digest: Digest) -> Bool {
        verify(signature: signature, over: data[...], digest: digest)
    }

    /// `verify` over part of a buffer: a JWS's signing input is most of its text, and copying it out cost a copy of
    /// kilobytes per verification.
    package func verify(signature: [UInt8], over data: ArraySlice<UInt8>, digest: Digest) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard let template = preparedContext(digest), EVP_MD_CTX_copy_ex(context, template.pointer) == 1 else {
            ERR_clear_error()
            return false
        }
        let result = data.withUnsafeBufferPointer { data in
            EVP_DigestVerify(context, signature, signature.count, data.baseAddress, data.count)
        }
        if result != 1 { ERR_clear_error() }
        return result == 1
    }

    /// Nil when OpenSSL will not set up a verification with this key and digest; not kept then, so each call tries
    /// again and fails as `EVP_DigestVerifyInit` would.
    private func preparedContext(_ digest: Digest) -> VerificationContext? {
        if let context = prepared.withLock({ $0[digest] }) { return context }
        guard let context = VerificationContext(key: pointer, digest: digest) else { return nil }
        return prepared.withLock { contexts in
            if let earlier = contexts[digest] { return earlier }
            contexts[digest] = context
            return context
        }
    }
}

/// Owns one `EVP_MD_CTX` set up by `EVP_DigestVerifyInit` and never updated: only ever the source of
/// `EVP_MD_CTX_copy_ex`, which reads it, so several threads may copy it at once.
private final class VerificationContext: @unchecked Sendable {
    let pointer: OpaquePointer

    init?(key: OpaquePointer, digest: Digest) {
        guard let context = EVP_MD_CTX_new() else { return nil }
        guard EVP_DigestVerifyInit(context, nil, digest.algorithm, nil, key) == 1 else {
            EVP_MD_CTX_free(context)
            return nil
        }
        pointer = context
    }

    deinit { EVP_MD_CTX_free(pointer) }
}
