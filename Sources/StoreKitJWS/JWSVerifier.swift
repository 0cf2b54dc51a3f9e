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
/// Safe to share across threads. Trusted chain decisions are cached by the exact `x5c` text, and by the exact header
/// text, which is then not decoded again; refusals are not cached but cost at most one signature verification before
/// any certificate is decoded.
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
        var start = 0
        var end = bytes.count
        while start < end, bytes[start].isASCIIWhitespace { start += 1 }
        while end > start, bytes[end - 1].isASCIIWhitespace { end -= 1 }
        // Every request body passes here: one table load and one OR per byte, no branch, the verdict taken every
        // 64 bytes (a DER receipt or base64 with `+` stops within the first block).
        var seen: UInt8 = 0
        base64URLOrDot.withUnsafeBufferPointer { table in
            var blockStart = start
            while blockStart < end, seen & outsideAlphabet == 0 {
                let blockEnd = min(blockStart + 64, end)
                // Two accumulators, so that the ORs of neighbouring bytes do not wait on each other.
                var even: UInt8 = 0
                var odd: UInt8 = 0
                var index = blockStart
                while index + 1 < blockEnd {
                    even |= table[Int(bytes[index])]
                    odd |= table[Int(bytes[index + 1])]
                    index += 2
                }
                if index < blockEnd { even |= table[Int(bytes[index])] }
                seen |= even | odd
                blockStart = blockEnd
            }
        }
        // Dots alone are no JWS.
        guard seen & outsideAlphabet == 0, seen & inAlphabet != 0 else { return false }
        if seen & dot != 0 { return true }
        // "eyJ": `{"` in base64url, a header cut short before its first dot.
        return end - start >= 3 && bytes[start] == UInt8(ascii: "e") && bytes[start + 1] == UInt8(ascii: "y")
            && bytes[start + 2] == UInt8(ascii: "J")
    }

    private static let dot: UInt8 = 1
    private static let outsideAlphabet: UInt8 = 2
    private static let inAlphabet: UInt8 = 4

    /// By byte value: `inAlphabet` for base64url's alphabet, `dot` for the dot, `outsideAlphabet` for anything else.
    private static let base64URLOrDot: [UInt8] = (0...255).map { value in
        switch UInt8(value) {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            inAlphabet
        case UInt8(ascii: "."): dot
        default: outsideAlphabet
        }
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
        let readAs = requiredKind?.envelope == .jws ? requiredKind : nil
        // One conversion at the public edge (none for an array), so everything below runs specialized for [UInt8].
        var result = verify(
            Array(text), deviceIdentifier: deviceIdentifier, requiredKind: readAs, now: ReceiptDate(validationTime),
            nested: false)
        if requiredKind?.envelope == .pkcs7, result.isValid {
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
        _ text: [UInt8], deviceIdentifier: DeviceIdentifier?, requiredKind: SignedDataKind?, now: ReceiptDate,
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
            jws = try CompactJWS(parsing: text, knownSigner: trust.knownSigner(header:))
        } catch {
            return fail(error)
        }

        // The signing time is read from the still-untrusted payload only to pick the instant the chain must have
        // been valid at (Apple's libraries do the same); nothing else is read before the signature verifies.
        let shownKinds = SignedDataKind.kindsShownAsMask(by: jws.payload)
        let shownKind = SignedDataKind(payload: jws.payload, shown: shownKinds)
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

        let decision: JWSTrustDecision
        switch jws.header {
        case .known(let signer): decision = .trusted(signer)
        case .decoded(let header): decision = trust.evaluate(header, segment: jws.headerSegment)
        }
        let signer: JWSSigner
        switch decision {
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
        result.setPayload(jws.payload, text: jws.payloadText)
        result.signedDate = signedDate

        let kind: SignedDataKind
        var mismatch: ValidationError?
        if let requiredKind {
            if !shownKinds.isEmpty, !shownKinds.contains(requiredKind), let shownKind {
                kind = shownKind
                mismatch = .kindMismatch(required: requiredKind, found: kind)
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
        var findings = CheckFindings(kind: kind)
        if let mismatch { _ = findings.record(.failed(mismatch)) }

        let claims = Self.claims(of: kind, payload: jws.payload, signedByXcode: signer.isXcode)
        result.environment = claims.environment
        switch kind {
        case .transaction:
            var members = PayloadMembers(jws.payload, namesAreUnique: true)
            result.transaction = SignedTransaction(members: &members)
        case .renewalInfo:
            var members = PayloadMembers(jws.payload, namesAreUnique: true)
            result.renewalInfo = SignedRenewalInfo(members: &members)
        case .appTransaction: result.appTransaction = SignedAppTransaction(payload: jws.payload)
        case .notification: result.notification = SignedNotification(payload: jws.payload)
        case .receipt: break
        }
        SignedDataChecks(policy: policy, device: deviceIdentifier)
            .evaluate(claims, into: &result.checks, findings: &findings)

        if kind.carriesNestedJWS {
            verifyNested(in: jws.payload, now: now, into: &result, findings: &findings)
        }
        if let status = result.transaction?.subscriptionStatus(at: now) { result.subscriptions = [status] }
        result.error = findings.firstError
        return result
    }

    /// The claims rule 6 compares, from wherever the kind keeps them.
    private static func claims(of kind: SignedDataKind, payload: JSONValue, signedByXcode: Bool) -> SignedClaims {
        let bundleID: String?
        let environmentText: String?
        let environment: ReceiptEnvironment?
        var appAppleID: Int64?
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
            environmentText = PayloadField.string(payload, "environment")
            environment = PayloadField.environment(environmentText)
        }
        var binding: DeviceBinding?
        if let verification = PayloadField.string(payload, "deviceVerification"),
            let nonce = PayloadField.string(payload, "deviceVerificationNonce")
        {
            // Undecodable bytes cannot equal any hash: the check fails rather than being skipped.
            let bytes = Base64.decode(verification.utf8, alphabet: .standard, padded: true) ?? []
            binding = .verification(bytes, nonce: nonce)
        }
        return SignedClaims(
            kind: kind, bundleID: bundleID, environment: environment, environmentText: environmentText,
            appAppleID: appAppleID,
            applicationVersion: kind.carriesApplicationVersion ? PayloadField.string(payload, "applicationVersion") : nil,
            deviceBinding: binding, signedByXcode: signedByXcode)
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
            result.nestedPayloads.append(
                NestedPayload(member: slot.member, payload: nestedPayload, payloadText: nested.payloadText))
            if let transaction = nested.transaction { result.transaction = transaction }
            if let renewalInfo = nested.renewalInfo { result.renewalInfo = renewalInfo }
            if let appTransaction = nested.appTransaction { result.appTransaction = appTransaction }
        }
    }
}
