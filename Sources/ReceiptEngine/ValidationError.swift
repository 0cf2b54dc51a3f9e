/// Why a receipt is not valid: a stable machine code for programs and a sentence for people.
///
/// Equality compares the code only, so tests and callers match on `code` while the message stays free to
/// improve.
public struct ValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Not a PKCS#7 signedData receipt, or its payload breaks Apple's format.
        public static let malformedReceipt = Code(rawValue: "malformed_receipt")
        /// The signature over the payload does not verify with the signing certificate.
        public static let signatureInvalid = Code(rawValue: "signature_invalid")
        /// The signing chain does not reach a trusted root at the receipt's creation date, or lacks Apple's markers.
        public static let certificateUntrusted = Code(rawValue: "certificate_untrusted")
        public static let bundleIDMismatch = Code(rawValue: "bundle_id_mismatch")
        public static let versionNotAccepted = Code(rawValue: "version_not_accepted")
        public static let deviceHashMismatch = Code(rawValue: "device_hash_mismatch")
        public static let environmentNotAccepted = Code(rawValue: "environment_not_accepted")

        /// Every code a verdict can carry, in the order the checks run.
        public static let all: [Code] = [
            .malformedReceipt, .certificateUntrusted, .signatureInvalid, .environmentNotAccepted,
            .bundleIDMismatch, .versionNotAccepted, .deviceHashMismatch,
        ]
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }

    public static func == (lhs: ValidationError, rhs: ValidationError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
