internal import COpenSSL

/// A failure inside OpenSSL, with the text of its error queue.
struct OpenSSLError: Error, CustomStringConvertible {
    var description: String

    /// Drains the calling thread's error queue so the next call starts clean.
    init(_ operation: String) {
        var reasons: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        description = reasons.isEmpty ? operation : "\(operation): \(reasons.joined(separator: "; "))"
    }
}

enum Digest {
    case sha1, sha256

    /// Fetched once per process. `EVP_sha1()`/`EVP_sha256()` hand out legacy handles that OpenSSL 3 looks up in
    /// its provider again on every `EVP_DigestInit`/`EVP_DigestVerifyInit` (an implicit fetch, a few µs each).
    var algorithm: OpaquePointer {
        switch self {
        case .sha1: FetchedDigest.sha1.pointer
        case .sha256: FetchedDigest.sha256.pointer
        }
    }

    func hash(_ bytes: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var size: UInt32 = 0
        let ok = EVP_Digest(bytes, bytes.count, &output, &size, algorithm, nil)
        precondition(ok == 1, "EVP_Digest cannot fail for SHA-1 or SHA-256 on memory")
        return Array(output.prefix(Int(size)))
    }
}

/// Owns one fetched `EVP_MD` for the life of the process; OpenSSL 3 allows its concurrent use.
private final class FetchedDigest: @unchecked Sendable {
    static let sha1 = FetchedDigest("SHA1")
    static let sha256 = FetchedDigest("SHA256")

    let pointer: OpaquePointer

    private init(_ name: String) {
        // Both live in the default provider, which OpenSSL 3 always loads; without them nothing could verify.
        guard let fetched = EVP_MD_fetch(nil, name, nil) else { preconditionFailure("EVP_MD_fetch(\(name)) failed") }
        pointer = fetched
    }

    deinit { EVP_MD_free(pointer) }
}

extension SignerDigest {
    var digest: Digest {
        switch self {
        case .sha1: .sha1
        case .sha256: .sha256
        }
    }
}

/// Owns one `X509`. OpenSSL treats a parsed certificate as read-only apart from internally locked caches, so an
/// instance may be read from several threads.
final class X509Certificate: @unchecked Sendable {
    let pointer: OpaquePointer
    let derEncoded: [UInt8]

    init(derEncoded: some Collection<UInt8>) throws(OpenSSLError) {
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

    var sha256Fingerprint: [UInt8] { Digest.sha256.hash(derEncoded) }

    /// Whether the certificate carries an extension with this dotted OID, critical or not.
    func hasExtension(oid: String) -> Bool {
        guard let object = OBJ_txt2obj(oid, 1) else { return false }
        defer { ASN1_OBJECT_free(object) }
        return X509_get_ext_by_OBJ(pointer, object, -1) >= 0
    }

    /// notBefore and notAfter as milliseconds since 1970.
    var validity: (notBefore: Int64, notAfter: Int64)? {
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
        let days = CivilTime.daysSince1970(
            year: Int(parts.tm_year) + 1900, month: Int(parts.tm_mon) + 1, day: Int(parts.tm_mday))
        let seconds = Int64(days) * 86_400 + Int64(parts.tm_hour) * 3600 + Int64(parts.tm_min) * 60 + Int64(parts.tm_sec)
        return seconds * 1000
    }

    /// The DER of `SEQUENCE { issuer, serialNumber }`, the way a PKCS#7 SignerInfo names its certificate.
    var issuerAndSerialNumber: [UInt8]? {
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

    var publicKey: PublicKey? {
        guard let key = X509_get_pubkey(pointer) else {
            ERR_clear_error()
            return nil
        }
        return PublicKey(owning: key)
    }
}

/// Owns one `EVP_PKEY` used only to verify; OpenSSL 3 allows concurrent verifications with one key.
final class PublicKey: @unchecked Sendable {
    private let pointer: OpaquePointer

    fileprivate init(owning pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(pointer) }

    /// RSA PKCS#1 v1.5 or ECDSA, as the key's type dictates.
    func verify(signature: [UInt8], over data: [UInt8], digest: Digest) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, digest.algorithm, nil, pointer) == 1 else {
            ERR_clear_error()
            return false
        }
        let result = EVP_DigestVerify(context, signature, signature.count, data, data.count)
        if result != 1 { ERR_clear_error() }
        return result == 1
    }
}

/// The outcome of OpenSSL's path building from a signer to the trust anchors.
enum ChainBuildResult {
    /// Signer first, anchor last.
    case trusted([X509Certificate])
    case untrusted(String)
}

enum ChainBuilder {
    /// Builds and verifies the chain from `signer` through `candidates` to one of `anchors`, ignoring validity
    /// periods: the caller checks them at the receipt's creation date, which is only known after this result is
    /// cached.
    static func build(
        signer: X509Certificate, candidates: [X509Certificate], anchors: [X509Certificate]
    ) -> ChainBuildResult {
        guard let store = X509_STORE_new() else { return .untrusted(OpenSSLError("X509_STORE_new").description) }
        defer { X509_STORE_free(store) }
        for anchor in anchors where X509_STORE_add_cert(store, anchor.pointer) != 1 {
            // A duplicate anchor is harmless; anything else leaves the store incomplete.
            ERR_clear_error()
        }
        guard let untrusted = receiptd_sk_X509_new_null() else { return .untrusted("out of memory") }
        defer { receiptd_sk_X509_free(untrusted) }  // borrowed pointers: the stack owns none of them
        for candidate in candidates where receiptd_sk_X509_push(untrusted, candidate.pointer) == 0 {
            return .untrusted("out of memory")
        }
        guard let context = X509_STORE_CTX_new() else { return .untrusted("out of memory") }
        defer { X509_STORE_CTX_free(context) }
        guard X509_STORE_CTX_init(context, store, signer.pointer, untrusted) == 1 else {
            return .untrusted(OpenSSLError("X509_STORE_CTX_init").description)
        }
        let parameters = X509_STORE_CTX_get0_param(context)
        // Apple's chains used SHA-1 until 2024 and its leaves carry no usable purpose; distributions' openssl.cnf
        // raise the security level, so both are set here rather than inherited.
        X509_VERIFY_PARAM_set_auth_level(parameters, 0)
        X509_VERIFY_PARAM_set_depth(parameters, 8)
        X509_VERIFY_PARAM_set_flags(parameters, UInt(X509_V_FLAG_NO_CHECK_TIME))
        X509_STORE_CTX_set_purpose(context, X509_PURPOSE_ANY)

        guard X509_verify_cert(context) == 1 else {
            let code = X509_STORE_CTX_get_error(context)
            ERR_clear_error()
            return .untrusted(String(cString: X509_verify_cert_error_string(Int(code))))
        }
        guard let chain = X509_STORE_CTX_get0_chain(context) else { return .untrusted("no chain") }
        // The chain holds the very pointers the store and the untrusted stack were given; map them back to their
        // owners instead of taking new references.
        let owners = [signer] + candidates + anchors
        var certificates: [X509Certificate] = []
        for index in 0..<receiptd_sk_X509_num(chain) {
            let member = receiptd_sk_X509_value(chain, index)
            guard let owner = owners.first(where: { $0.pointer == member }) else {
                return .untrusted("the verified chain holds an unknown certificate")
            }
            certificates.append(owner)
        }
        return .trusted(certificates)
    }
}
