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

    /// Whether `bytes`, once surrounding whitespace is trimmed, have the look of a compact JWS rather than a
    /// receipt: base64url text with at least one dot (base64 of a receipt never has one), or starting `eyJ` (a JSON
    /// object's base64url: a JWS header cut short before its first dot; a receipt's base64 starts `MI`). A cut-short
    /// or damaged JWS looks like one too, so `verify` can say which part failed. One pass, constant work per byte.
    public static func looksLikeJWS(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer(hasTheLookOfJWS)
    }

    /// `looksLikeJWS` on part of a request body.
    public static func looksLikeJWS(_ bytes: ArraySlice<UInt8>) -> Bool {
        bytes.withUnsafeBufferPointer(hasTheLookOfJWS)
    }

    /// `looksLikeJWS` on a JSON member's text.
    public static func looksLikeJWS(_ text: String) -> Bool {
        var text = text
        return text.withUTF8(hasTheLookOfJWS)
    }

    private static func hasTheLookOfJWS(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var dots = 0
        var letters = 0
        var trailingSpace = false
        // The first three bytes of text, for the `eyJ` test.
        var opening: UInt32 = 0
        for byte in bytes {
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D:
                if dots > 0 || letters > 0 { trailingSpace = true }
            case UInt8(ascii: "."):
                if trailingSpace { return false }
                dots += 1
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                if trailingSpace { return false }
                if dots == 0, letters < 3 { opening = opening << 8 | UInt32(byte) }
                letters += 1
            default: return false
            }
        }
        // "eyJ" as three bytes.
        return letters > 0 && (dots > 0 || opening == 0x65_79_4A)
    }

    /// Verifies one compact JWS (surrounding whitespace is trimmed). Never throws: every failure is a verdict.
    /// - Parameters:
    ///   - deviceIdentifier: checks `deviceVerification` when given and the JWS carries it.
    ///   - requiredKind: the payload is read as this kind (every member optional, as Apple's libraries read it);
    ///     `kind_mismatch` only when it carries another kind's own members and none of this one's. Without it, a
    ///     payload that shows no kind is `unknown_kind`. `.receipt`: any JWS that is otherwise valid is
    ///     `kind_mismatch`.
    ///   - validationTime: when the payload has no signing time, the chain is checked at it; subscriptions are
    ///     active relative to it.
    public func verify(
        _ text: some Collection<UInt8>, deviceIdentifier: DeviceIdentifier? = nil, requiredKind: SignedDataKind? = nil,
        at validationTime: Date = Date()
    ) -> JWSValidationResult {
        let readAs = requiredKind == .receipt ? nil : requiredKind
        var result = verify(
            text, deviceIdentifier: deviceIdentifier, requiredKind: readAs, now: ReceiptDate(validationTime),
            nested: false)
        if requiredKind == .receipt, result.isValid {
            result.error = .kindMismatch(required: .receipt, found: result.kind)
        }
        return result
    }

    /// `verify` on a string.
    public func verify(
        _ text: String, deviceIdentifier: DeviceIdentifier? = nil, requiredKind: SignedDataKind? = nil,
        at validationTime: Date = Date()
    ) -> JWSValidationResult {
        verify(Array(text.utf8), deviceIdentifier: deviceIdentifier, requiredKind: requiredKind, at: validationTime)
    }

    /// - Parameter requiredKind: a JWS kind, never `.receipt`.
    private func verify(
        _ text: some Collection<UInt8>, deviceIdentifier: DeviceIdentifier?, requiredKind: SignedDataKind?, now: ReceiptDate,
        nested: Bool
    ) -> JWSValidationResult {
        var result = JWSValidationResult()
        func fail(_ error: ValidationError) -> JWSValidationResult {
            result.error = error
            return result
        }

        guard text.count <= policy.maximumReceiptBytes else {
            return fail(CompactJWS.malformed(.tooLarge, "the JWS is larger than \(policy.maximumReceiptBytes) bytes"))
        }
        let jws: CompactJWS
        do {
            jws = try CompactJWS(parsing: text)
        } catch {
            return fail(error)
        }

        // The signing time is read from the still-untrusted payload only to pick the instant the chain must have
        // been valid at (Apple's libraries do the same); nothing else is read before the signature verifies.
        let shownKinds = SignedDataKind.kindsShown(by: jws.payload)
        let shownKind = SignedDataKind(payload: jws.payload)
        let timeMember = (requiredKind ?? shownKind ?? .transaction).signingTimeMember
        var signedDate: ReceiptDate?
        if let value = jws.payload[timeMember] {
            guard let date = PayloadField.date(value) else {
                return fail(
                    CompactJWS.malformed(.signingTimeNotANumber, "\(timeMember) is not a number of milliseconds"))
            }
            signedDate = date
        }
        let signingTime = signedDate ?? now

        let signer: JWSSigner
        switch trust.evaluate(jws.header) {
        case .malformed(let message):
            return fail(CompactJWS.malformed(.headerInvalid, message))
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

        var findings = CheckFindings()
        let kind: SignedDataKind
        if let requiredKind {
            if !shownKinds.isEmpty, !shownKinds.contains(requiredKind), let shownKind {
                kind = shownKind
                _ = findings.record(.failed(.kindMismatch(required: requiredKind, found: kind)))
            } else {
                kind = requiredKind
            }
        } else if let shownKind {
            kind = shownKind
        } else {
            return fail(ValidationError(
                .unknownKind,
                "the payload is signed but shows no kind (no transactionId, autoRenewStatus, receiptType, "
                    + "notificationType or bundleId…): name its kind (?kind=, --kind)"))
        }
        result.kind = kind
        if nested, shownKinds.contains(.notification) {
            // A notification inside a notification is never what Apple sends; refusing it also bounds recursion.
            return fail(.kindMismatch(required: requiredKind ?? kind, found: .notification))
        }

        let claims = Claims(kind: kind, payload: jws.payload)
        result.environment = claims.environment
        switch kind {
        case .transaction: result.transaction = SignedTransaction(payload: jws.payload)
        case .renewalInfo: result.renewalInfo = SignedRenewalInfo(payload: jws.payload)
        case .appTransaction: result.appTransaction = SignedAppTransaction(payload: jws.payload)
        case .notification: result.notification = SignedNotification(payload: jws.payload)
        case .receipt: break
        }
        check(claims, signer: signer, device: deviceIdentifier, into: &result, findings: &findings)

        if kind == .notification {
            verifyNested(in: jws.payload, now: now, into: &result, findings: &findings)
        }
        if let status = result.transaction?.subscriptionStatus(at: now) { result.subscriptions = [status] }
        result.error = findings.failures.min { Self.precedence($0.code) < Self.precedence($1.code) }
        return result
    }

    /// Which failure a verdict names when several checks fail. Apple's libraries judge the app before the
    /// environment (INVALID_APP_IDENTIFIER before INVALID_ENVIRONMENT), so data failing both gets Apple's answer.
    private static func precedence(_ code: ValidationError.Code) -> Int {
        failureOrder.firstIndex(of: code) ?? failureOrder.count
    }

    private static let failureOrder: [ValidationError.Code] = [
        .malformedJWS, .certificateUntrusted, .signatureInvalid, .unknownKind, .kindMismatch, .bundleIDMismatch,
        .appAppleIDMismatch, .environmentNotAccepted, .versionNotAccepted, .deviceHashMismatch,
    ]

    /// The claims rule 6 compares, from wherever the kind keeps them.
    private struct Claims {
        let kind: SignedDataKind
        let bundleID: String?
        let environmentText: String?
        let environment: ReceiptEnvironment?
        let appAppleID: Int64?
        let applicationVersion: String?
        let deviceVerification: String?
        let deviceVerificationNonce: String?

        init(kind: SignedDataKind, payload: JSONValue) {
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
            case .transaction, .renewalInfo, .receipt:
                bundleID = PayloadField.string(payload, "bundleId")
                appAppleID = nil
                environmentText = PayloadField.string(payload, "environment")
                environment = PayloadField.environment(environmentText)
            }
            applicationVersion = kind == .appTransaction ? PayloadField.string(payload, "applicationVersion") : nil
            deviceVerification = PayloadField.string(payload, "deviceVerification")
            deviceVerificationNonce = PayloadField.string(payload, "deviceVerificationNonce")
        }

        var subject: String { kind.subject }
    }

    private func check(
        _ claims: Claims, signer: JWSSigner, device: DeviceIdentifier?, into result: inout JWSValidationResult,
        findings: inout CheckFindings
    ) {
        result.checks.environment = findings.record(environmentVerdict(claims, signer: signer))

        // Renewal info names no app. Anything else that names none is refused whatever the configuration, as Apple's
        // libraries refuse it (INVALID_APP_IDENTIFIER): signed data for no app is no app's to grant.
        var app: AppPolicy?
        if claims.kind == .renewalInfo {
            result.checks.bundleID = .skipped
        } else if claims.bundleID == nil {
            result.checks.bundleID = findings.record(.failed(ValidationError(
                .bundleIDMismatch, "the \(claims.subject) names no app (no bundleId)", reason: .missing)))
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
        // Apple's libraries refuse signed data that names no environment (INVALID_ENVIRONMENT): it could be anyone's.
        guard let text = claims.environmentText else {
            return .failed(ValidationError(
                .environmentNotAccepted, "the \(claims.subject) names no environment", reason: .missing))
        }
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
        let slots: [(section: String, member: String, kind: SignedDataKind)] = [
            ("data", "signedTransactionInfo", .transaction),
            ("data", "signedRenewalInfo", .renewalInfo),
            ("appData", "signedAppTransactionInfo", .appTransaction),
        ]
        for slot in slots {
            guard let value = payload[slot.section]?[slot.member] else { continue }
            guard case .string(let text) = value else {
                _ = findings.record(
                    .failed(CompactJWS.malformed(.nestedJWSNotAString, "\(slot.member) is not a JWS string")))
                continue
            }
            let nested = verify(Array(text.utf8), deviceIdentifier: nil, requiredKind: slot.kind, now: now, nested: true)
            result.checks.absorb(nested.checks)
            if let error = nested.error {
                _ = findings.record(.failed(ValidationError(
                    error.code, "\(slot.member): \(error.message)", reason: error.reason, detail: error.detail)))
            }
            guard let nestedPayload = nested.payload else { continue }
            result.nestedPayloads.append(NestedPayload(member: slot.member, payload: nestedPayload))
            if let transaction = nested.transaction { result.transaction = transaction }
            if let renewalInfo = nested.renewalInfo { result.renewalInfo = renewalInfo }
            if let appTransaction = nested.appTransaction { result.appTransaction = appTransaction }
        }
    }
}
