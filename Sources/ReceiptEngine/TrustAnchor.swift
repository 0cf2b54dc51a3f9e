#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif
package import CryptoFloor

/// A root certificate receipts may chain to, besides Apple's pinned root: a test PKI's root, or Xcode's StoreKit
/// test certificate when a user adds it on purpose.
public struct TrustAnchor: Sendable, Hashable {
    /// Parsed once, here: chain building uses this very object.
    package let certificate: X509Certificate
    public var derEncoded: [UInt8] { certificate.derEncoded }

    /// Fails unless the bytes are one X.509 certificate.
    public init(derEncoded: [UInt8]) throws {
        do {
            certificate = try X509Certificate(derEncoded: derEncoded)
        } catch {
            throw TrustAnchorError(message: "not a DER X.509 certificate")
        }
    }

    public static func == (lhs: TrustAnchor, rhs: TrustAnchor) -> Bool { lhs.derEncoded == rhs.derEncoded }
    public func hash(into hasher: inout Hasher) { hasher.combine(derEncoded) }

    /// Reads every certificate in a PEM file (one or more `CERTIFICATE` blocks) or a DER file.
    public static func load(contentsOfFile path: String) throws -> [TrustAnchor] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw TrustAnchorError(message: "\(path): cannot read the file")
        }
        do {
            return try parse(Array(data))
        } catch let error as TrustAnchorError {
            throw TrustAnchorError(message: "\(path): \(error.message)")
        }
    }

    /// Reads PEM (every `CERTIFICATE` block) or a single DER certificate. A block that does not decode is an error,
    /// not skipped: a trusted root silently missing would show up only as receipts refused.
    public static func parse(_ bytes: [UInt8]) throws -> [TrustAnchor] {
        guard String(decoding: bytes.prefix(4096), as: UTF8.self).contains("-----BEGIN") else {
            return [try TrustAnchor(derEncoded: bytes)]
        }
        let blocks = PEM.blocks(bytes, label: "CERTIFICATE")
        guard !blocks.isEmpty else { throw TrustAnchorError(message: "no CERTIFICATE block in the PEM file") }
        return try blocks.enumerated().map { index, block in
            guard let der = block else {
                throw TrustAnchorError(message: "certificate block \(index + 1) is not valid base64")
            }
            return try TrustAnchor(derEncoded: der)
        }
    }
}

public struct TrustAnchorError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
