internal import COpenSSL

/// The message digests Apple's formats use: SHA-1 and SHA-256 in receipts (and the receipt device hash), SHA-384
/// in StoreKit 2's device verification.
package enum Digest: Sendable {
    case sha1, sha256, sha384

    /// Fetched once per process. `EVP_sha1()`/`EVP_sha256()` hand out legacy handles that OpenSSL 3 looks up in
    /// its provider again on every `EVP_DigestInit`/`EVP_DigestVerifyInit` (an implicit fetch, a few µs each).
    var algorithm: OpaquePointer {
        switch self {
        case .sha1: FetchedDigest.sha1.pointer
        case .sha256: FetchedDigest.sha256.pointer
        case .sha384: FetchedDigest.sha384.pointer
        }
    }

    package func hash(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var size: UInt32 = 0
        let ok = bytes.withContiguousStorageIfAvailable { buffer in
            EVP_Digest(buffer.baseAddress, buffer.count, &output, &size, algorithm, nil)
        } ?? Array(bytes).withUnsafeBufferPointer { buffer in
            EVP_Digest(buffer.baseAddress, buffer.count, &output, &size, algorithm, nil)
        }
        precondition(ok == 1, "EVP_Digest cannot fail for SHA-1 or SHA-2 on memory")
        return Array(output.prefix(Int(size)))
    }
}

/// Owns one fetched `EVP_MD` for the life of the process; OpenSSL 3 allows its concurrent use.
private final class FetchedDigest: @unchecked Sendable {
    static let sha1 = FetchedDigest("SHA1")
    static let sha256 = FetchedDigest("SHA256")
    static let sha384 = FetchedDigest("SHA384")

    let pointer: OpaquePointer

    private init(_ name: String) {
        // All live in the default provider, which OpenSSL 3 always loads; without them nothing could verify.
        guard let fetched = EVP_MD_fetch(nil, name, nil) else { preconditionFailure("EVP_MD_fetch(\(name)) failed") }
        pointer = fetched
    }

    deinit { EVP_MD_free(pointer) }
}
