public import Foundation

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
    ///   - validationTime: "now" for subscription activity. The chain is checked at the receipt's creation date.
    public func validate(
        _ bytes: [UInt8], deviceIdentifier: DeviceIdentifier? = nil, expectedBundleID: String? = nil,
        at validationTime: Date = Date()
    ) -> ValidationResult {
        var result = ValidationResult()
        func fail(_ code: ValidationError.Code, _ message: String) -> ValidationResult {
            result.error = ValidationError(code, message)
            return result
        }

        guard !bytes.isEmpty else { return fail(.malformedReceipt, "the receipt is empty") }
        guard bytes.count <= policy.maximumReceiptBytes else {
            return fail(.malformedReceipt, "the receipt is larger than \(policy.maximumReceiptBytes) bytes")
        }
        let container: ReceiptContainer
        do {
            container = try ReceiptContainer(parsing: bytes)
        } catch {
            return fail(.malformedReceipt, "not a PKCS#7 signed receipt: \(Self.reason(error))")
        }

        let signer: TrustedSigner
        switch trust.evaluate(container) {
        case .untrusted(let reason):
            result.checks.signature = .failed
            return fail(.certificateUntrusted, reason)
        case .trusted(let trusted):
            signer = trusted
        }

        let digest = container.digest.digest
        let signedBytes: [UInt8]
        if let attributes = container.signedAttributes {
            guard digest.hash(container.content) == container.signedMessageDigest else {
                result.checks.signature = .failed
                return fail(.signatureInvalid, "the signed message digest does not match the content")
            }
            signedBytes = attributes
        } else {
            signedBytes = container.content
        }
        guard signer.key.verify(signature: container.signature, over: signedBytes, digest: digest) else {
            result.checks.signature = .failed
            return fail(.signatureInvalid, "the signature does not verify with the signing certificate")
        }

        let payload: ReceiptPayload
        do {
            payload = try ReceiptPayload(decoding: container.content)
        } catch {
            result.checks.signature = .passed
            return fail(.malformedReceipt, "the signed payload is not a valid receipt: \(Self.reason(error))")
        }
        let receipt = payload.receipt
        result.receipt = receipt
        result.subscriptions = SubscriptionStatus.summarize(receipt.inAppPurchases, at: ReceiptDate(validationTime))

        // Apple's guidance: the chain must have been valid when the receipt was issued, not now (all have expired).
        let created = receipt.creationDate.millisecondsSince1970
        guard created >= signer.validFrom, created <= signer.validUntil else {
            result.checks.signature = .failed
            return fail(
                .certificateUntrusted,
                "the receipt was created (\(receipt.creationDate.rfc3339)) outside its signing chain's validity "
                    + "(\(ReceiptDate(millisecondsSince1970: signer.validFrom).rfc3339) to "
                    + "\(ReceiptDate(millisecondsSince1970: signer.validUntil).rfc3339))")
        }
        result.checks.signature = .passed

        var failures: [ValidationError] = []
        if let environment = receipt.environment {
            let accepted = policy.environments.contains(environment)
            result.checks.environment = accepted ? .passed : .failed
            if !accepted {
                failures.append(ValidationError(.environmentNotAccepted, "\(environment.rawValue) receipts are not accepted"))
            }
        }

        let app: AppPolicy?
        if let expectedBundleID {
            let matches = receipt.bundleID == expectedBundleID
            result.checks.bundleID = matches ? .passed : .failed
            if !matches {
                failures.append(ValidationError(
                    .bundleIDMismatch, "the receipt is for \(receipt.bundleID), not \(expectedBundleID)"))
            }
            app = matches ? policy.apps.first { $0.bundleID == expectedBundleID } : nil
        } else if !policy.apps.isEmpty {
            app = policy.apps.first { $0.bundleID == receipt.bundleID }
            result.checks.bundleID = app == nil ? .failed : .passed
            if app == nil {
                failures.append(ValidationError(
                    .bundleIDMismatch, "the receipt is for \(receipt.bundleID), which is not a configured app"))
            }
        } else {
            app = nil
        }

        if let app, !app.acceptedVersions.isEmpty {
            let accepted = app.acceptedVersions.contains(receipt.applicationVersion)
            result.checks.version = accepted ? .passed : .failed
            if !accepted {
                failures.append(ValidationError(
                    .versionNotAccepted, "version \(receipt.applicationVersion) of \(app.bundleID) is not accepted"))
            }
        }

        if let deviceIdentifier {
            let expected = Digest.sha1.hash(deviceIdentifier.bytes + payload.opaqueValue + payload.bundleIDEncoding)
            let matches = expected == payload.deviceHash
            result.checks.deviceHash = matches ? .passed : .failed
            if !matches {
                failures.append(ValidationError(.deviceHashMismatch, "the receipt was not issued to this device"))
            }
        }

        let order = ValidationError.Code.all
        result.error = failures.min { order.firstIndex(of: $0.code)! < order.firstIndex(of: $1.code)! }
        return result
    }

    private static func reason(_ error: any Error) -> String {
        (error as? ASN1ReadError)?.reason ?? "\(error)"
    }
}
