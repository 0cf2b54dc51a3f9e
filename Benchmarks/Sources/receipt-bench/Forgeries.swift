import CBenchOpenSSL
import Foundation

/// Forgeries made the way a real attacker makes them: Apple's genuine intermediate and root copied out of real signed
/// data, and a leaf of the attacker's own that keeps Apple's names and markers but carries a fresh key and signs
/// itself, so the leaf's signature is simply wrong. Each forgery gets its own serial number, so no two certificate
/// sets are alike and no cache of refusals could help. The attacker's key signs the content too, so the only thing
/// wrong with a forgery is the leaf.
///
/// OpenSSL directly (not receiptd's forge, whose signing is package-internal): every object made here is freed with
/// `defer` right after it is made.
enum Forgeries {
    /// Receipts carrying `receipt`'s content, intermediate and root, each with a leaf of its own (RSA-2048, SHA-256,
    /// as Apple's receipt leaves).
    static func receipts(from receipt: [UInt8], count: Int) throws -> [[UInt8]] {
        let p7 = try decode(receipt, d2i_PKCS7)
        defer { PKCS7_free(p7) }
        guard let signers = PKCS7_get0_signers(p7, nil, 0) else { throw OpenSSLBaselines.Failure("PKCS7_get0_signers") }
        defer { bench_sk_X509_free(signers) }
        guard let leaf = bench_sk_X509_value(signers, 0) else { throw OpenSSLBaselines.Failure("signer") }
        // Apple's order: leaf, intermediate, root.
        let others = (0..<bench_p7_certificate_count(p7)).compactMap { bench_p7_certificate(p7, $0) }.filter { $0 != leaf }
        var length: Int32 = 0
        let contentPointer = bench_p7_content(p7, &length)
        let content = Array(UnsafeBufferPointer(start: contentPointer, count: Int(length)))

        guard let key = bench_rsa_generate(2048) else { throw OpenSSLBaselines.Failure("RSA key") }
        defer { EVP_PKEY_free(key) }
        let firstSerial = Int64.random(in: 1..<(1 << 48))
        return try (0..<count).map { index in
            let forged = try reissue(leaf, serial: firstSerial + Int64(index), key: key, digest: EVP_sha256())
            defer { X509_free(forged) }
            return try signPKCS7(content: content, signer: forged, key: key, certificates: [forged] + others)
        }
    }

    /// Compact JWS carrying `jws`'s payload and `x5c[1]`, `x5c[2]`, each with a leaf of its own (P-256, signed with
    /// SHA-384 as Apple's G6 intermediate signs its leaves), and an ES256 signature by that leaf's key.
    static func jws(from jws: String, count: Int) throws -> [String] {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let headerBytes = base64URLDecode(parts[0]),
            let header = try JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any],
            let x5c = header["x5c"] as? [String], x5c.count == 3,
            let leafDER = Data(base64Encoded: x5c[0])
        else { throw OpenSSLBaselines.Failure("not a JWS with a 3-certificate x5c") }
        let leaf = try decode(Array(leafDER), d2i_X509)
        defer { X509_free(leaf) }
        guard let key = bench_ec_generate("P-256") else { throw OpenSSLBaselines.Failure("EC key") }
        defer { EVP_PKEY_free(key) }
        let firstSerial = Int64.random(in: 1..<(1 << 48))
        return try (0..<count).map { index in
            let forged = try reissue(leaf, serial: firstSerial + Int64(index), key: key, digest: EVP_sha384())
            defer { X509_free(forged) }
            let forgedHeader = #"{"alg":"ES256","x5c":["\#(Data(try encode(forged, i2d_X509)).base64EncodedString())","\#(x5c[1])","\#(x5c[2])"]}"#
            let signingInput = base64URLEncode(Array(forgedHeader.utf8)) + "." + parts[1]
            return signingInput + "." + base64URLEncode(try es256(Array(signingInput.utf8), key: key))
        }
    }

    /// A copy of `certificate` with another serial number and key, signed by that key: names and extensions kept.
    private static func reissue(
        _ certificate: OpaquePointer, serial: Int64, key: OpaquePointer, digest: OpaquePointer?
    ) throws -> OpaquePointer {
        guard let copy = X509_dup(certificate) else { throw OpenSSLBaselines.Failure("X509_dup") }
        guard ASN1_INTEGER_set_int64(X509_get_serialNumber(copy), serial) == 1, X509_set_pubkey(copy, key) == 1,
            X509_sign(copy, key, digest) > 0
        else {
            X509_free(copy)
            throw OpenSSLBaselines.Failure("re-signing the leaf")
        }
        return copy
    }

    /// PKCS#7 signedData as Apple makes receipts: content embedded, no signed attributes, SHA-256.
    private static func signPKCS7(
        content: [UInt8], signer: OpaquePointer, key: OpaquePointer, certificates: [OpaquePointer]
    ) throws -> [UInt8] {
        let flags = Int32(PKCS7_BINARY | PKCS7_PARTIAL | PKCS7_NOSMIMECAP | PKCS7_NOCERTS | PKCS7_NOATTR)
        guard let p7 = PKCS7_sign(nil, nil, nil, nil, flags) else { throw OpenSSLBaselines.Failure("PKCS7_sign") }
        defer { PKCS7_free(p7) }
        guard PKCS7_sign_add_signer(p7, signer, key, EVP_sha256(), flags) != nil else {
            throw OpenSSLBaselines.Failure("PKCS7_sign_add_signer")
        }
        for certificate in certificates where PKCS7_add_certificate(p7, certificate) != 1 {
            throw OpenSSLBaselines.Failure("PKCS7_add_certificate")
        }
        let finished = content.withUnsafeBytes { buffer -> Bool in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return false }
            defer { BIO_free(bio) }
            return PKCS7_final(p7, bio, flags) == 1
        }
        guard finished else { throw OpenSSLBaselines.Failure("PKCS7_final") }
        return try encode(p7, i2d_PKCS7)
    }

    /// ES256 as JOSE sends it: r‖s, 32 bytes each, not the DER OpenSSL makes.
    private static func es256(_ input: [UInt8], key: OpaquePointer) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw OpenSSLBaselines.Failure("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        var length = 0
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1,
            EVP_DigestSign(context, nil, &length, input, input.count) == 1
        else { throw OpenSSLBaselines.Failure("EVP_DigestSignInit") }
        var der = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &der, &length, input, input.count) == 1 else {
            throw OpenSSLBaselines.Failure("EVP_DigestSign")
        }
        let signature = try decode(Array(der.prefix(length)), d2i_ECDSA_SIG)
        defer { ECDSA_SIG_free(signature) }
        var raw = [UInt8](repeating: 0, count: 64)
        guard BN_bn2binpad(ECDSA_SIG_get0_r(signature), &raw, 32) == 32,
            raw.withUnsafeMutableBufferPointer({ BN_bn2binpad(ECDSA_SIG_get0_s(signature), $0.baseAddress! + 32, 32) }) == 32
        else { throw OpenSSLBaselines.Failure("ECDSA r and s") }
        return raw
    }

    static func decode<T>(
        _ bytes: [UInt8], _ d2i: (UnsafeMutablePointer<T?>?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, Int) -> T?
    ) throws -> T {
        let decoded = bytes.withUnsafeBufferPointer { buffer -> T? in
            var cursor = buffer.baseAddress
            return d2i(nil, &cursor, buffer.count)
        }
        guard let decoded else { throw OpenSSLBaselines.Failure("decoding DER") }
        return decoded
    }

    static func encode<T>(_ object: T, _ i2d: (T, UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int32) throws -> [UInt8] {
        var encoded: UnsafeMutablePointer<UInt8>?
        let length = i2d(object, &encoded)
        guard length > 0, let encoded else { throw OpenSSLBaselines.Failure("encoding DER") }
        defer { bench_OPENSSL_free(encoded) }
        return Array(UnsafeBufferPointer(start: encoded, count: Int(length)))
    }
}

func base64URLEncode(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

func base64URLDecode(_ text: String) -> [UInt8]? {
    var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
    return Data(base64Encoded: standard).map(Array.init)
}

/// The least work that checks a JWS's signature at all: SHA-256 over the signing input and one P-256 verification
/// with the leaf's key parsed once and the signature already in the DER form OpenSSL takes.
final class ES256Floor {
    private let key: OpaquePointer
    private let sha256: OpaquePointer
    private let signingInput: [UInt8]
    private let derSignature: [UInt8]

    init(jws: String) throws {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let headerBytes = base64URLDecode(parts[0]),
            let header = try JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any],
            let x5c = header["x5c"] as? [String], let leafDER = x5c.first.flatMap({ Data(base64Encoded: $0) }),
            let raw = base64URLDecode(parts[2]), raw.count == 64
        else { throw OpenSSLBaselines.Failure("not an ES256 JWS") }
        let leaf = try Forgeries.decode(Array(leafDER), d2i_X509)
        defer { X509_free(leaf) }
        guard let key = X509_get_pubkey(leaf) else { throw OpenSSLBaselines.Failure("leaf key") }
        guard let sha256 = EVP_MD_fetch(nil, "SHA256", nil) else {
            EVP_PKEY_free(key)
            throw OpenSSLBaselines.Failure("EVP_MD_fetch")
        }
        self.key = key
        self.sha256 = sha256
        signingInput = Array((parts[0] + "." + parts[1]).utf8)
        guard let signature = ECDSA_SIG_new() else { throw OpenSSLBaselines.Failure("ECDSA_SIG_new") }
        defer { ECDSA_SIG_free(signature) }
        let r = BN_bin2bn(raw, 32, nil)
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            throw OpenSSLBaselines.Failure("ECDSA_SIG_set0")
        }
        derSignature = try Forgeries.encode(signature, i2d_ECDSA_SIG)
        guard verify() else { throw OpenSSLBaselines.Failure("the floor does not verify this JWS") }
    }

    deinit {
        EVP_PKEY_free(key)
        EVP_MD_free(sha256)
    }

    func verify() -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, sha256, nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, derSignature, derSignature.count, signingInput, signingInput.count) == 1
    }
}
