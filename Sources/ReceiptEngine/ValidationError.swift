internal import CryptoFloor

/// Why a receipt or a StoreKit 2 JWS is not valid: a stable machine code for programs and a sentence for people.
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
        /// Not a compact JWS of the shape Apple signs (StoreKit 2).
        public static let malformedJWS = Code(rawValue: "malformed_jws")
        /// The signed `appAppleId` is not the configured app's.
        public static let appAppleIDMismatch = Code(rawValue: "app_apple_id_mismatch")
        /// The caller asked for one kind of signed data and got another.
        public static let kindMismatch = Code(rawValue: "kind_mismatch")
        /// Well signed, but the payload is none of the kinds StoreKit 2 signs and the caller named no kind.
        public static let unknownKind = Code(rawValue: "unknown_kind")

        /// Every code a verdict can carry, in the order the checks run.
        public static let all: [Code] = [
            .malformedReceipt, .malformedJWS, .certificateUntrusted, .signatureInvalid, .unknownKind, .kindMismatch,
            .environmentNotAccepted, .bundleIDMismatch, .appAppleIDMismatch, .versionNotAccepted, .deviceHashMismatch,
        ]
    }

    /// Why a `certificate_untrusted` verdict was reached, or what a `malformed_receipt` upload was instead, for
    /// programs: finer than the code, as stable.
    public struct Reason: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// No path from the signer to a trusted root (or a certificate on it does not verify).
        public static let noTrustedRoot = Reason(rawValue: "no_trusted_root")
        /// The signing certificate or the intermediate lacks Apple's marker extension.
        public static let markerMissing = Reason(rawValue: "marker_missing")
        /// Signed outside the validity of a certificate on the path.
        public static let outsideValidity = Reason(rawValue: "outside_validity")
        /// A certificate is not on the signing path, or the signer's certificate is missing.
        public static let strayCertificate = Reason(rawValue: "stray_certificate")
        /// A certificate, or the signer's key, does not decode.
        public static let unparseableCertificate = Reason(rawValue: "unparseable_certificate")

        /// `malformed_receipt` for an upload that is recognizably something else: an image, a PDF, an archive.
        public static let notAReceiptFile = Reason(rawValue: "not_a_receipt_file")
        /// `malformed_receipt`: JSON (a saved request?) where a receipt was expected.
        public static let json = Reason(rawValue: "json")
        /// `malformed_receipt`: PEM text (a certificate or key).
        public static let pem = Reason(rawValue: "pem")
        /// `malformed_receipt`: the receipt's header announces more bytes than arrived.
        public static let truncated = Reason(rawValue: "truncated")
        /// `malformed_receipt`: plain text that is not a receipt.
        public static let text = Reason(rawValue: "text")

        /// `bundle_id_mismatch` or `environment_not_accepted`: the signed data names no app, or no environment.
        public static let missing = Reason(rawValue: "missing")

        public static let all: [Reason] = [
            .noTrustedRoot, .markerMissing, .outsideValidity, .strayCertificate, .unparseableCertificate,
            .notAReceiptFile, .json, .pem, .truncated, .text, .missing,
        ]
    }

    /// Which part of a `malformed_jws` or `malformed_receipt` input failed, for programs: tests and clients match it,
    /// not the message.
    public struct Detail: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let empty = Detail(rawValue: "empty")
        public static let tooLarge = Detail(rawValue: "too_large")
        /// Not three dot-separated segments.
        public static let segmentCount = Detail(rawValue: "segment_count")
        public static let headerNotBase64URL = Detail(rawValue: "header_not_base64url")
        public static let headerNotJSON = Detail(rawValue: "header_not_json")
        /// JSON, but not the header StoreKit 2 signs: `alg` other than ES256, `crit`, no `x5c` or an unreadable one.
        public static let headerInvalid = Detail(rawValue: "header_invalid")
        public static let payloadNotBase64URL = Detail(rawValue: "payload_not_base64url")
        public static let payloadNotJSON = Detail(rawValue: "payload_not_json")
        public static let signatureNotBase64URL = Detail(rawValue: "signature_not_base64url")
        /// Not the 64 bytes r‖s of an ES256 signature (a DER signature, a truncated one).
        public static let signatureLength = Detail(rawValue: "signature_length")
        /// An object repeats a member name.
        public static let duplicateMember = Detail(rawValue: "duplicate_member")
        /// `signedDate` (`receiptCreationDate`) is not a number of milliseconds.
        public static let signingTimeNotANumber = Detail(rawValue: "signing_time_not_a_number")
        /// A notification's `signedTransactionInfo`, `signedRenewalInfo` or `signedAppTransactionInfo` is not a
        /// string.
        public static let nestedJWSNotAString = Detail(rawValue: "nested_jws_not_a_string")

        /// `malformed_receipt`: BER nested deeper than the reader follows.
        public static let nestingTooDeep = Detail(rawValue: "nesting_too_deep")
        /// `malformed_receipt`: the signed payload is not the SET of attributes Apple signs.
        public static let payloadNotASet = Detail(rawValue: "payload_not_a_set")
        /// `malformed_receipt`: a required attribute (bundle id, versions, opaque value, hash, creation date) is absent.
        public static let missingAttribute = Detail(rawValue: "missing_attribute")
        public static let tooManyAttributes = Detail(rawValue: "too_many_attributes")
        /// `malformed_receipt`: an attribute 17 whose value is not a SET of attributes.
        public static let inAppPurchaseNotASet = Detail(rawValue: "in_app_purchase_not_a_set")
        public static let integerTooLarge = Detail(rawValue: "integer_too_large")
        public static let dateNotRFC3339 = Detail(rawValue: "date_not_rfc3339")

        public static let all: [Detail] = [
            .empty, .tooLarge, .segmentCount, .headerNotBase64URL, .headerNotJSON, .headerInvalid,
            .payloadNotBase64URL, .payloadNotJSON, .signatureNotBase64URL, .signatureLength, .duplicateMember,
            .signingTimeNotANumber, .nestedJWSNotAString, .nestingTooDeep, .payloadNotASet, .missingAttribute,
            .tooManyAttributes, .inAppPurchaseNotASet, .integerTooLarge, .dateNotRFC3339,
        ]
    }

    public let code: Code
    /// Set for `certificate_untrusted`, and for `malformed_receipt` when the upload is recognizably something else.
    public let reason: Reason?
    public let message: String
    /// Set for `malformed_jws`, and for `malformed_receipt` when the cause has a name: the part that failed.
    public let detail: Detail?

    public init(_ code: Code, _ message: String, reason: Reason? = nil, detail: Detail? = nil) {
        self.code = code
        self.reason = reason
        self.message = message
        self.detail = detail
    }

    init(untrusted failure: ChainFailure) {
        self.init(.certificateUntrusted, failure.message, reason: Reason(rawValue: failure.reason.rawValue))
    }

    public var description: String { "\(code): \(message)" }

    public static func == (lhs: ValidationError, rhs: ValidationError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
