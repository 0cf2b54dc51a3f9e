#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import ReceiptEngine
internal import CryptoFloor
internal import JSONText

/// Verifies StoreKit 2 signed data (transactions, renewal info, app transactions, App Store Server Notifications V2)
/// against one policy, with the receipt engine's trust model and checks.
///
/// Safe to share across threads. Trusted chain decisions are cached by the exact `x5c` text; refusals are not
/// cached but cost at most one signature verification before any certificate is decoded.
public final class JWSVerifier: Sendable {
    public let policy: ValidationPolicy
    private let trust: JWSTrustEvaluator

    public init(policy: ValidationPolicy) {
        self.policy = policy
        trust = JWSTrustEvaluator(policy: policy)
    }

    /// Whether `bytes`, once surrounding whitespace is trimmed, look like a compact JWS rather than a receipt: a
    /// base64url JSON object header (`eyJ`) and two dots. A cheap test for routing; `verify` decides.
    public static func looksLikeJWS(_ bytes: some Collection<UInt8>) -> Bool {
        var dots = 0
        var seenText = false
        var prefix: [UInt8] = []
        for byte in bytes {
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D: if seenText, dots < 2 { return false }
            case UInt8(ascii: "."): dots += 1
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                seenText = true
                if prefix.count < 3 { prefix.append(byte) }
            default: return false
            }
        }
        return dots == 2 && prefix == Array("eyJ".utf8)
    }

    /// Verifies one compact JWS (surrounding whitespace is trimmed). Never throws: every failure is a verdict.
    /// - Parameters:
    ///   - deviceIdentifier: checks `deviceVerification` when given and the JWS carries it.
    ///   - requiredKind: another kind is `kind_mismatch`.
    ///   - validationTime: when the payload has no signing time, the chain is checked at it; subscriptions are
    ///     active relative to it.
    public func verify(
        _ text: some Collection<UInt8>, deviceIdentifier: DeviceIdentifier? = nil, requiredKind: JWSKind? = nil,
        at validationTime: Date = Date()
    ) -> JWSValidationResult {
        verify(
            text, deviceIdentifier: deviceIdentifier, requiredKind: requiredKind, now: ReceiptDate(validationTime),
            nested: false)
    }

    /// `verify` on a string.
    public func verify(
        _ text: String, deviceIdentifier: DeviceIdentifier? = nil, requiredKind: JWSKind? = nil,
        at validationTime: Date = Date()
    ) -> JWSValidationResult {
        verify(Array(text.utf8), deviceIdentifier: deviceIdentifier, requiredKind: requiredKind, at: validationTime)
    }

    private func verify(
        _ text: some Collection<UInt8>, deviceIdentifier: DeviceIdentifier?, requiredKind: JWSKind?, now: ReceiptDate,
        nested: Bool
    ) -> JWSValidationResult {
        var result = JWSValidationResult()
        func fail(_ error: ValidationError) -> JWSValidationResult {
            result.error = error
            return result
        }

        guard text.count <= policy.maximumReceiptBytes else {
            return fail(CompactJWS.malformed("the JWS is larger than \(policy.maximumReceiptBytes) bytes"))
        }
        let jws: CompactJWS
        do {
            jws = try CompactJWS(parsing: text)
        } catch {
            return fail(error)
        }

        // The signing time is read from the still-untrusted payload only to pick the instant the chain must have
        // been valid at (Apple's libraries do the same); nothing else is read before the signature verifies.
        let timeMember = (JWSKind(payload: jws.payload) ?? .transaction).signingTimeMember
        var signedDate: ReceiptDate?
        if let value = jws.payload[timeMember] {
            guard let date = PayloadField.date(value) else {
                return fail(CompactJWS.malformed("\(timeMember) is not a number of milliseconds"))
            }
            signedDate = date
        }
        let signingTime = signedDate ?? now

        let signer: JWSSigner
        switch trust.evaluate(jws.header) {
        case .malformed(let message):
            return fail(CompactJWS.malformed(message))
        case .untrusted(let failure):
            result.checks.signature = .failed
            return fail(ValidationError(
                .certificateUntrusted, failure.message, reason: ValidationError.Reason(rawValue: failure.reason.rawValue)))
        case .trusted(let trusted):
            signer = trusted
        }
        let window = SigningWindowCheck(
            validFrom: ReceiptDate(millisecondsSince1970: signer.chain.validFrom),
            validUntil: ReceiptDate(millisecondsSince1970: signer.chain.validUntil))
        if case .failed(let error) = window.evaluate(signedAt: signingTime, subject: "JWS") {
            result.checks.signature = .failed
            return fail(error)
        }
        guard signer.signsES256, signer.chain.signerKey.verifyES256(signature: jws.signature, over: jws.signingInput)
        else {
            result.checks.signature = .failed
            return fail(ValidationError(.signatureInvalid, "the ES256 signature does not verify with the leaf's key"))
        }
        result.checks.signature = .passed
        result.payload = jws.payload
        result.signedDate = signedDate

        guard let kind = JWSKind(payload: jws.payload) else {
            return fail(CompactJWS.malformed(
                "the payload is not a transaction, renewal info, app transaction or notification"))
        }
        result.kind = kind
        var findings = CheckFindings()
        if let requiredKind, requiredKind != kind {
            _ = findings.record(.failed(ValidationError(
                .kindMismatch, "the JWS is \(kind.rawValue), not \(requiredKind.rawValue)")))
        }
        if nested, kind == .notification {
            // A notification inside a notification is never what Apple sends; refusing it also bounds recursion.
            return fail(ValidationError(.kindMismatch, "a notification's nested JWS is itself a notification"))
        }

        let claims = Claims(kind: kind, payload: jws.payload)
        result.environment = claims.environment
        switch kind {
        case .transaction: result.transaction = SignedTransaction(payload: jws.payload)
        case .renewalInfo: result.renewalInfo = SignedRenewalInfo(payload: jws.payload)
        case .appTransaction: result.appTransaction = SignedAppTransaction(payload: jws.payload)
        case .notification: result.notification = SignedNotification(payload: jws.payload)
        }
        check(claims, signer: signer, device: deviceIdentifier, into: &result, findings: &findings)

        if kind == .notification {
            verifyNested(in: jws.payload, now: now, into: &result, findings: &findings)
        }
        if let status = result.transaction?.subscriptionStatus(at: now) { result.subscriptions = [status] }
        result.error = findings.firstError
        return result
    }

    /// The claims rule 6 compares, from wherever the kind keeps them.
    private struct Claims {
        let kind: JWSKind
        let bundleID: String?
        let environmentText: String?
        let environment: ReceiptEnvironment?
        let appAppleID: Int64?
        let applicationVersion: String?
        let deviceVerification: String?
        let deviceVerificationNonce: String?

        init(kind: JWSKind, payload: JSONValue) {
            self.kind = kind
            switch kind {
            case .notification:
                let section = SignedNotification.section(of: payload)
                bundleID = section.flatMap { PayloadField.string($0.value, "bundleId") }
                appAppleID = section.flatMap { PayloadField.integer($0.value, "appAppleId") }
                environment = SignedNotification.environment(of: section)
                environmentText = environment?.rawValue ?? section.flatMap { PayloadField.string($0.value, "environment") }
            case .appTransaction:
                bundleID = PayloadField.string(payload, "bundleId")
                appAppleID = PayloadField.integer(payload, "appAppleId")
                environmentText = PayloadField.string(payload, "receiptType")
                environment = PayloadField.environment(environmentText)
            case .transaction, .renewalInfo:
                bundleID = PayloadField.string(payload, "bundleId")
                appAppleID = nil
                environmentText = PayloadField.string(payload, "environment")
                environment = PayloadField.environment(environmentText)
            }
            applicationVersion = kind == .appTransaction ? PayloadField.string(payload, "applicationVersion") : nil
            deviceVerification = PayloadField.string(payload, "deviceVerification")
            deviceVerificationNonce = PayloadField.string(payload, "deviceVerificationNonce")
        }

        var subject: String { kind.rawValue.replacing("_", with: " ") }
    }

    private func check(
        _ claims: Claims, signer: JWSSigner, device: DeviceIdentifier?, into result: inout JWSValidationResult,
        findings: inout CheckFindings
    ) {
        result.checks.environment = findings.record(environmentVerdict(claims, signer: signer))

        // Renewal info names no app; a notification that carries no section names none either.
        var app: AppPolicy?
        if claims.kind == .renewalInfo || (claims.kind == .notification && claims.bundleID == nil) {
            result.checks.bundleID = .skipped
        } else {
            let bundle = BundleIDCheck(apps: policy.apps).evaluate(claims.bundleID ?? "", subject: claims.subject)
            app = bundle.app
            result.checks.bundleID = findings.record(bundle.verdict)
        }

        var appAppleID = CheckVerdict.skipped
        if claims.kind == .notification || claims.kind == .appTransaction, claims.environment == .production,
            let expected = app?.appAppleID
        {
            appAppleID = claims.appAppleID == expected
                ? .passed
                : .failed(ValidationError(
                    .appAppleIDMismatch,
                    "the \(claims.subject) is for app \(claims.appAppleID.map(String.init) ?? "(none)"), "
                        + "not \(expected)"))
        }
        result.checks.appAppleID = findings.record(appAppleID)

        if claims.kind == .appTransaction {
            result.checks.version = findings.record(VersionCheck(app: app).evaluate(claims.applicationVersion ?? ""))
        }

        let deviceVerification = claims.deviceVerification.map {
            // Undecodable bytes cannot equal any hash: the check fails rather than being skipped.
            Base64.decode($0.utf8, alphabet: .standard, padded: true) ?? []
        }
        result.checks.deviceHash = findings.record(
            DeviceHashCheck(device: device).evaluate(
                deviceVerification: deviceVerification, nonce: claims.deviceVerificationNonce, subject: claims.subject))
    }

    private func environmentVerdict(_ claims: Claims, signer: JWSSigner) -> CheckVerdict {
        if signer.isXcode, claims.environment != .xcode {
            // Xcode's testing certificate is anyone's to make: it vouches for Xcode data only.
            return .failed(ValidationError(
                .environmentNotAccepted,
                "Xcode's StoreKit testing certificate signed \(claims.environmentText ?? "unnamed") data"))
        }
        guard let text = claims.environmentText else { return .skipped }
        guard let environment = claims.environment else {
            return .failed(ValidationError(.environmentNotAccepted, "the environment \(text) is not known"))
        }
        return EnvironmentCheck(accepted: policy.environments).evaluate(environment, subject: "\(claims.subject)s")
    }

    /// Rule 7: every nested JWS is verified as its own, with its own chain and time; any failure fails the
    /// notification.
    private func verifyNested(
        in payload: JSONValue, now: ReceiptDate, into result: inout JWSValidationResult, findings: inout CheckFindings
    ) {
        let slots: [(section: String, member: String, kind: JWSKind)] = [
            ("data", "signedTransactionInfo", .transaction),
            ("data", "signedRenewalInfo", .renewalInfo),
            ("appData", "signedAppTransactionInfo", .appTransaction),
        ]
        for slot in slots {
            guard let value = payload[slot.section]?[slot.member] else { continue }
            guard case .string(let text) = value else {
                _ = findings.record(.failed(CompactJWS.malformed("\(slot.member) is not a JWS string")))
                continue
            }
            let nested = verify(Array(text.utf8), deviceIdentifier: nil, requiredKind: slot.kind, now: now, nested: true)
            result.checks.absorb(nested.checks)
            if let error = nested.error {
                _ = findings.record(.failed(ValidationError(
                    error.code, "\(slot.member): \(error.message)", reason: error.reason)))
            }
            guard let nestedPayload = nested.payload else { continue }
            result.nestedPayloads.append(NestedPayload(member: slot.member, payload: nestedPayload))
            if let transaction = nested.transaction { result.transaction = transaction }
            if let renewalInfo = nested.renewalInfo { result.renewalInfo = renewalInfo }
            if let appTransaction = nested.appTransaction { result.appTransaction = appTransaction }
        }
    }
}
