#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
internal import CryptoFloor

/// Validates receipts against one policy. Safe to share across threads; chain decisions are cached by the exact
/// certificate bytes, so the same Apple certificates are decoded and verified once.
public final class ReceiptValidator: Sendable {
    public let policy: ValidationPolicy
    private let trust: TrustEvaluator

    public init(policy: ValidationPolicy) {
        self.policy = policy
        self.trust = TrustEvaluator(additionalAnchors: policy.additionalTrustAnchors)
    }

    /// Validates DER or BER receipt bytes. Never throws: every failure is a verdict in the result.
    /// - Parameters:
    ///   - deviceIdentifier: checks the receipt's SHA-1 device hash when given.
    ///   - expectedBundleID: when given, the bundle id must equal it (instead of matching one of the policy's apps).
    ///   - requiredKind: when another kind than `.receipt`, a receipt that is otherwise valid is `kind_mismatch`.
    ///   - validationTime: "now" for subscription activity. The chain is checked at the receipt's creation date.
    public func validate(
        _ bytes: [UInt8], deviceIdentifier: DeviceIdentifier? = nil, expectedBundleID: String? = nil,
        requiredKind: SignedDataKind? = nil, at validationTime: Date = Date()
    ) -> ValidationResult {
        var result = verdict(
            on: bytes, deviceIdentifier: deviceIdentifier, expectedBundleID: expectedBundleID, at: validationTime)
        if let requiredKind, requiredKind.envelope == .jws, result.isValid {
            result.error = .kindMismatch(required: requiredKind, found: .receipt)
        }
        return result
    }

    private func verdict(
        on bytes: [UInt8], deviceIdentifier: DeviceIdentifier?, expectedBundleID: String?, at validationTime: Date
    ) -> ValidationResult {
        var result = ValidationResult()
        func fail(_ error: ValidationError) -> ValidationResult {
            result.error = error
            return result
        }

        guard !bytes.isEmpty else {
            return fail(ValidationError(.malformedReceipt, "the receipt is empty", detail: .empty))
        }
        guard bytes.count <= policy.maximumReceiptBytes else {
            return fail(ValidationError(
                .malformedReceipt, "the receipt is larger than \(policy.maximumReceiptBytes) bytes", detail: .tooLarge))
        }
        let container: ReceiptContainer
        do {
            container = try ReceiptContainer(parsing: bytes)
        } catch {
            return fail(
                MalformedInput.diagnosis(of: bytes)
                    ?? ValidationError(
                        .malformedReceipt, "not a PKCS#7 signed receipt: \(Self.reason(error))", detail: Self.detail(error)))
        }

        let chain: TrustedChain
        switch trust.evaluate(container) {
        case .untrusted(let failure):
            result.checks.signature = .failed
            return fail(ValidationError(untrusted: failure))
        case .trusted(let trusted):
            chain = trusted
        }
        if let error = Self.signatureError(container, chain.signerKey) {
            result.checks.signature = .failed
            return fail(error)
        }

        let payload: ReceiptPayload
        do {
            payload = try ReceiptPayload(decoding: container.content)
        } catch {
            result.checks.signature = .passed
            return fail(ValidationError(
                .malformedReceipt, "the signed payload is not a valid receipt: \(Self.reason(error))",
                detail: Self.detail(error)))
        }
        let receipt = payload.receipt
        result.receipt = receipt
        result.subscriptions = SubscriptionStatus.summarize(receipt.inAppPurchases, at: ReceiptDate(validationTime))

        let window = SigningWindowCheck(
            validFrom: ReceiptDate(millisecondsSince1970: chain.validFrom),
            validUntil: ReceiptDate(millisecondsSince1970: chain.validUntil))
        if case .failed(let error) = window.evaluate(signedAt: receipt.creationDate) {
            result.checks.signature = .failed
            return fail(error)
        }
        result.checks.signature = .passed

        var findings = CheckFindings(kind: .receipt)
        let claims = SignedClaims(
            kind: .receipt, bundleID: receipt.bundleID, environment: receipt.environment,
            environmentText: receipt.environment?.rawValue, applicationVersion: receipt.applicationVersion,
            deviceBinding: .receiptHash(
                payload.deviceHash, opaqueValue: payload.opaqueValue, bundleIDEncoding: payload.bundleIDEncoding))
        SignedDataChecks(policy: policy, device: deviceIdentifier, expectedBundleID: expectedBundleID)
            .evaluate(claims, into: &result.checks, findings: &findings)
        result.error = findings.firstError
        return result
    }

    /// The signature over the content, or over signed attributes that hold the content's digest (RFC 5652 §5.4).
    private static func signatureError(_ container: ReceiptContainer, _ key: PublicKey) -> ValidationError? {
        let signedBytes: [UInt8]
        if let attributes = container.signedAttributes {
            guard container.digest.hash(container.content) == container.signedMessageDigest else {
                return ValidationError(.signatureInvalid, "the signed message digest does not match the content")
            }
            signedBytes = attributes
        } else {
            signedBytes = container.content
        }
        guard key.verify(signature: container.signature, over: signedBytes, digest: container.digest) else {
            return ValidationError(.signatureInvalid, "the signature does not verify with the signing certificate")
        }
        return nil
    }

    private static func reason(_ error: any Error) -> String {
        (error as? ASN1ReadError)?.reason ?? "\(error)"
    }

    private static func detail(_ error: any Error) -> ValidationError.Detail? {
        (error as? ASN1ReadError)?.detail.map(ValidationError.Detail.init(rawValue:))
    }
}
