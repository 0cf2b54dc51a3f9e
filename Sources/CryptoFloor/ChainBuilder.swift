internal import COpenSSL

/// Apple's marker extensions (non-critical, value NULL). Without them any certificate Apple issued (every developer
/// has one) could sign a receipt or a transaction.
package enum AppleMarker {
    /// "Mac App Store and iTunes Store Receipt Signing": on the leaf that signs receipts and StoreKit 2 JWS.
    package static let signing = "1.2.840.113635.100.6.11.1"
    /// Apple Worldwide Developer Relations: on the intermediate.
    package static let worldwideDeveloperRelations = "1.2.840.113635.100.6.2.1"
}

/// Why a signer's certificates are not trusted: a stable machine reason and a sentence for people.
package struct ChainFailure: Error, Sendable {
    package enum Reason: String, Sendable {
        /// A certificate does not decode as X.509, or the signer's key does not.
        case unparseableCertificate = "unparseable_certificate"
        /// The path does not reach a trusted root (or a certificate on it does not verify).
        case noTrustedRoot = "no_trusted_root"
        /// The leaf or the intermediate lacks Apple's marker extension.
        case markerMissing = "marker_missing"
        /// The signing time lies outside a certificate's validity.
        case outsideValidity = "outside_validity"
        /// The signed object carries a certificate that is not on its path, or lacks its signer's.
        case strayCertificate = "stray_certificate"
    }

    package let reason: Reason
    package let message: String

    package init(_ reason: Reason, _ message: String) {
        self.reason = reason
        self.message = message
    }
}

/// A path from a signer to a trust anchor that carries Apple's markers, with the window in which all of it is valid.
/// It depends only on certificate bytes, never on time, so callers cache it and check the window per signed object.
package struct TrustedChain: Sendable {
    /// Signer first, anchor last.
    package let certificates: [X509Certificate]
    package let signerKey: PublicKey
    /// The latest notBefore and the earliest notAfter across the path, in milliseconds since 1970.
    package let validFrom: Int64
    package let validUntil: Int64

    package func isValid(atMillisecondsSince1970 time: Int64) -> Bool { time >= validFrom && time <= validUntil }
}

package enum ChainBuilder {
    /// Builds and verifies the path from `signer` through `candidates` to one of `anchors`, leaving validity to the
    /// caller (`TrustedChain.isValid(at…)`): the signing time is read from the signed data, which is only parsed
    /// once its signer is known, and a time-free decision can be cached.
    ///
    /// When the path is longer than the anchor alone, its first certificate must carry `AppleMarker.signing` and
    /// its second `AppleMarker.worldwideDeveloperRelations`. A self-signed anchor that signs by itself (Xcode's
    /// StoreKit testing certificate) is accepted without markers: it is only ever trusted because a user
    /// configured it.
    package static func verify(
        signer: X509Certificate, candidates: [X509Certificate], anchors: [X509Certificate]
    ) -> Result<TrustedChain, ChainFailure> {
        let chain: [X509Certificate]
        switch build(signer: signer, candidates: candidates, anchors: anchors) {
        case .failure(let failure): return .failure(failure)
        case .success(let built): chain = built
        }
        if chain.count > 1 {
            guard chain[0].hasExtension(oid: AppleMarker.signing) else {
                return .failure(ChainFailure(
                    .markerMissing, "the signing certificate lacks Apple's signing marker (\(AppleMarker.signing))"))
            }
            guard chain[1].hasExtension(oid: AppleMarker.worldwideDeveloperRelations) else {
                return .failure(ChainFailure(
                    .markerMissing,
                    "the intermediate certificate lacks Apple's WWDR marker (\(AppleMarker.worldwideDeveloperRelations))"))
            }
        }
        var validFrom = Int64.min
        var validUntil = Int64.max
        for certificate in chain {
            guard let validity = certificate.validity else {
                return .failure(ChainFailure(.unparseableCertificate, "a certificate's validity does not parse"))
            }
            validFrom = max(validFrom, validity.notBefore)
            validUntil = min(validUntil, validity.notAfter)
        }
        guard let key = signer.publicKey else {
            return .failure(ChainFailure(.unparseableCertificate, "the signer's public key does not parse"))
        }
        return .success(TrustedChain(certificates: chain, signerKey: key, validFrom: validFrom, validUntil: validUntil))
    }

    private static func untrusted(_ detail: String) -> Result<[X509Certificate], ChainFailure> {
        .failure(ChainFailure(.noTrustedRoot, "the signing chain does not reach a trusted root: \(detail)"))
    }

    private static func build(
        signer: X509Certificate, candidates: [X509Certificate], anchors: [X509Certificate]
    ) -> Result<[X509Certificate], ChainFailure> {
        guard let store = X509_STORE_new() else { return untrusted(OpenSSLError("X509_STORE_new").description) }
        defer { X509_STORE_free(store) }
        for anchor in anchors where X509_STORE_add_cert(store, anchor.pointer) != 1 {
            // A duplicate anchor is harmless; anything else leaves the store incomplete.
            ERR_clear_error()
        }
        guard let untrustedStack = receiptd_sk_X509_new_null() else { return untrusted("out of memory") }
        defer { receiptd_sk_X509_free(untrustedStack) }  // borrowed pointers: the stack owns none of them
        for candidate in candidates where receiptd_sk_X509_push(untrustedStack, candidate.pointer) == 0 {
            return untrusted("out of memory")
        }
        guard let context = X509_STORE_CTX_new() else { return untrusted("out of memory") }
        defer { X509_STORE_CTX_free(context) }
        guard X509_STORE_CTX_init(context, store, signer.pointer, untrustedStack) == 1 else {
            return untrusted(OpenSSLError("X509_STORE_CTX_init").description)
        }
        let parameters = X509_STORE_CTX_get0_param(context)
        // Apple's chains used SHA-1 until 2024 and its leaves carry no usable purpose; distributions' openssl.cnf
        // raise the security level, so both are set here rather than inherited.
        X509_VERIFY_PARAM_set_auth_level(parameters, 0)
        X509_VERIFY_PARAM_set_depth(parameters, 8)
        guard X509_VERIFY_PARAM_set_flags(parameters, UInt(X509_V_FLAG_NO_CHECK_TIME)) == 1,
            X509_STORE_CTX_set_purpose(context, X509_PURPOSE_ANY) == 1
        else { return untrusted(OpenSSLError("setting verification parameters").description) }

        guard X509_verify_cert(context) == 1 else {
            let code = X509_STORE_CTX_get_error(context)
            ERR_clear_error()
            return untrusted(String(cString: X509_verify_cert_error_string(Int(code))))
        }
        guard let chain = X509_STORE_CTX_get0_chain(context) else { return untrusted("no chain") }
        // The chain holds the very pointers the store and the untrusted stack were given; map them back to their
        // owners instead of taking new references.
        let owners = [signer] + candidates + anchors
        var certificates: [X509Certificate] = []
        for index in 0..<receiptd_sk_X509_num(chain) {
            let member = receiptd_sk_X509_value(chain, index)
            guard let owner = owners.first(where: { $0.pointer == member }) else {
                return untrusted("the verified chain holds an unknown certificate")
            }
            certificates.append(owner)
        }
        return .success(certificates)
    }
}
