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

    /// Reads PEM (every `CERTIFICATE` block) or a single DER certificate.
    public static func parse(_ bytes: [UInt8]) throws -> [TrustAnchor] {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.contains("-----BEGIN") else { return [try TrustAnchor(derEncoded: bytes)] }
        var anchors: [TrustAnchor] = []
        var body: String?
        for line in text.split(whereSeparator: \.isNewline).map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line == "-----BEGIN CERTIFICATE-----" {
                body = ""
            } else if line == "-----END CERTIFICATE-----", let encoded = body {
                guard let der = Data(base64Encoded: encoded) else {
                    throw TrustAnchorError(message: "a PEM block is not valid base64")
                }
                anchors.append(try TrustAnchor(derEncoded: Array(der)))
                body = nil
            } else if body != nil {
                body! += line
            }
        }
        guard !anchors.isEmpty else { throw TrustAnchorError(message: "no CERTIFICATE block in the PEM file") }
        return anchors
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
