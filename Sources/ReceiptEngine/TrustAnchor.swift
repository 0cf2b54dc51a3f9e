import Foundation

/// A root certificate receipts may chain to, besides Apple's pinned root: a test PKI's root, or Xcode's StoreKit
/// test certificate when a user adds it on purpose.
public struct TrustAnchor: Sendable, Hashable {
    public let derEncoded: [UInt8]

    /// Fails unless the bytes are one X.509 certificate.
    public init(derEncoded: [UInt8]) throws {
        do {
            _ = try X509Certificate(derEncoded: derEncoded)
        } catch {
            throw TrustAnchorError(message: "not a DER X.509 certificate")
        }
        self.derEncoded = derEncoded
    }

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
        let blocks = pemBlocks(bytes, label: "CERTIFICATE")
        guard !blocks.isEmpty else { throw TrustAnchorError(message: "no CERTIFICATE block in the PEM file") }
        return try blocks.enumerated().map { index, block in
            guard let der = block else {
                throw TrustAnchorError(message: "certificate block \(index + 1) is not valid base64")
            }
            return try TrustAnchor(derEncoded: der)
        }
    }

    /// The decoded bodies of every `-----BEGIN label-----` block, nil where the base64 is broken.
    static func pemBlocks(_ bytes: [UInt8], label: String) -> [[UInt8]?] {
        var blocks: [[UInt8]?] = []
        var body: String?
        for line in String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed == "-----BEGIN \(label)-----" {
                body = ""
            } else if trimmed == "-----END \(label)-----", let encoded = body {
                blocks.append(Data(base64Encoded: encoded).map { Array($0) })
                body = nil
            } else if body != nil {
                body! += trimmed
            }
        }
        return blocks
    }

    /// SHA-256 of the certificate, as `openssl x509 -fingerprint -sha256` prints it without colons.
    public var sha256Fingerprint: String {
        Digest.sha256.hash(derEncoded).map { String($0, radix: 16, uppercase: true).leftPadded(to: 2) }.joined()
    }
}

public struct TrustAnchorError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
