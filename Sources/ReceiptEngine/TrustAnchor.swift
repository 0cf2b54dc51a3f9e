/// A root certificate receipts may chain to, besides Apple's pinned root.
public struct TrustAnchor: Sendable, Hashable {
    public let derEncoded: [UInt8]

    public init(derEncoded: [UInt8]) throws {
        self.derEncoded = derEncoded
    }

    /// Reads every certificate in a PEM file (one or more `CERTIFICATE` blocks) or a DER file.
    public static func load(contentsOfFile path: String) throws -> [TrustAnchor] {
        []
    }
}
