import Foundation
import JSONText
import ReceiptEngine
import ReceiptForge
import ReceiptService
import StoreKitJWS
import TestSupport
import Testing

/// Rules 1–6 and 8 of StoreKit 2 verification, on JWS forged at test time with an EC test PKI.
struct ForgedJWSTests {
    let verifier = JWSPKI.verifier()

    @Test(arguments: SignedDataKind.jwsKinds)
    func forgedJWSOfEachKind_isValid(_ kind: SignedDataKind) throws {
        let result = verifier.verify(try JWSPKI.forged(kind))
        #expect(result.error == nil, "\(result.error?.description ?? "")")
        #expect(result.kind == kind)
        #expect(result.checks.signature == .passed)
        #expect(result.payload != nil)
        #expect(JWSResultJSON.value(of: result)["kind"] == .string(kind.rawValue))
    }

    @Test(arguments: [JWSSigningOptions.Algorithm.none, .hs256, .rs256])
    func algorithmOtherThanES256_isMalformed(_ algorithm: JWSSigningOptions.Algorithm) throws {
        var options = JWSSigningOptions()
        options.algorithm = algorithm
        let result = verifier.verify(try JWSPKI.standard.sign(JWSPKI.transaction().payload, options))
        #expect(result.error?.code == .malformedJWS)
        #expect(result.payload == nil)
    }

    @Test(arguments: [1, 2, 4])
    func x5cOfOtherThanThreeCertificates_isMalformed(_ count: Int) throws {
        let chain = JWSPKI.standard.certificatesDER
        var options = JWSSigningOptions()
        options.certificates = Array((chain + chain).prefix(count))
        let result = verifier.verify(try JWSPKI.standard.sign(JWSPKI.transaction().payload, options))
        #expect(result.error?.code == .malformedJWS)
    }

    @Test(arguments: [JWSSigningOptions.SignatureForm.der, .truncated])
    func signatureNotRawRS_isMalformed(_ form: JWSSigningOptions.SignatureForm) throws {
        var options = JWSSigningOptions()
        options.signatureForm = form
        let result = verifier.verify(try JWSPKI.standard.sign(JWSPKI.transaction().payload, options))
        #expect(result.error?.code == .malformedJWS)
    }

    @Test func criticalHeader_isMalformed() throws {
        var options = JWSSigningOptions()
        options.extraHeader = [("crit", .array([.string("exp")])), ("exp", .integer(1))]
        let result = verifier.verify(try JWSPKI.standard.sign(JWSPKI.transaction().payload, options))
        #expect(result.error?.code == .malformedJWS)
    }

    @Test func tamperedPayloadByte_isSignatureInvalid() throws {
        var options = JWSSigningOptions()
        options.tamperPayload = true
        let result = verifier.verify(try JWSPKI.standard.sign(JWSPKI.transaction().payload, options))
        #expect(result.error?.code == .signatureInvalid)
        #expect(result.checks.signature == .failed)
        #expect(result.payload == nil)
    }

    @Test func surroundingWhitespace_isTrimmed() throws {
        let jws = try JWSPKI.forged(.transaction)
        #expect(verifier.verify(" \r\n\t" + jws + "\n\n").isValid)
    }

    /// The signing input is read in place, after the whitespace: it must still be exactly `header.payload`, whether
    /// the header is decoded or known from before, so that one changed byte of either part fails.
    @Test func signingInputReadInPlace_afterWhitespace_coversHeaderAndPayloadExactly() throws {
        let jws = try JWSPKI.forged(.transaction)
        let wrapped = "\n  " + jws + " "
        #expect(verifier.verify(wrapped).isValid)
        // The header's chain is known now: the second verification takes the remembered signer.
        #expect(verifier.verify(wrapped).isValid)
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var payload = Array(parts[1].utf8)
        let middle = payload.count / 2
        payload[middle] = payload[middle] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let changed = parts[0] + "." + String(decoding: payload, as: UTF8.self) + "." + parts[2]
        let result = verifier.verify("\n  " + changed + " ")
        #expect(result.error?.code == .signatureInvalid || result.error?.code == .malformedJWS)
        #expect(!result.isValid)
        #expect(verifier.verify("\t" + parts[0] + "." + parts[1] + "X." + parts[2]).isValid == false)
    }

    @Test(arguments: ["", "   ", "abc", "a.b", "a.b.c", "a.b.c.d", "eyJ.eyJ.", "e30.e30.AAAA"])
    func nonsense_isMalformed(_ text: String) {
        #expect(verifier.verify(text).error?.code == .malformedJWS)
    }

    @Test func rogueRootCarryingBothMarkers_isUntrusted() throws {
        let result = verifier.verify(try JWSPKI.rogue.sign(JWSPKI.transaction().payload))
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .noTrustedRoot)
        #expect(result.payload == nil)
    }

    @Test(arguments: ["leaf", "intermediate"])
    func markerMissing_isUntrusted(_ which: String) throws {
        let authority = which == "leaf" ? JWSPKI.leafWithoutMarker : JWSPKI.intermediateWithoutMarker
        let result = verifier.verify(try authority.sign(JWSPKI.transaction().payload))
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .markerMissing)
    }

    @Test func chainExpiredToday_validAtSignedDate_isValid() throws {
        let signed = JWSPKI.now.addingTimeInterval(-2 * JWSPKI.day)
        let result = verifier.verify(try JWSPKI.expired.sign(JWSPKI.transaction(signed: signed).payload))
        #expect(result.error == nil, "\(result.error?.description ?? "")")
    }

    @Test func chainUsedAfterItsExpiry_isUntrusted() throws {
        let result = verifier.verify(try JWSPKI.expired.sign(JWSPKI.transaction(signed: JWSPKI.now).payload))
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .outsideValidity)
        #expect(JWSResultJSON.value(of: result)["error"]?["reason"] == .string("outside_validity"))
    }

    @Test func withoutSignedDate_chainIsCheckedAtValidationTime() throws {
        var blueprint = JWSPKI.transaction(signed: JWSPKI.now.addingTimeInterval(-2 * JWSPKI.day))
        blueprint.edits.omitted = ["signedDate"]
        let jws = try JWSPKI.expired.sign(blueprint.payload)
        #expect(verifier.verify(jws).error?.reason == .outsideValidity)
        #expect(verifier.verify(jws, at: JWSPKI.now.addingTimeInterval(-2 * JWSPKI.day)).isValid)
    }

    @Test func fractionalSignedDate_isAccepted() throws {
        var blueprint = JWSPKI.transaction()
        let milliseconds = (JWSPKI.signedDate.timeIntervalSince1970 * 1000).rounded(.down)
        blueprint.edits.set = [("signedDate", .number(milliseconds + 0.485)), ("purchaseDate", .number(milliseconds + 0.7297))]
        let result = verifier.verify(try JWSPKI.standard.sign(blueprint.payload))
        #expect(result.error == nil, "\(result.error?.description ?? "")")
        #expect(result.signedDate == ReceiptDate(millisecondsSince1970: Int64(milliseconds)))
        #expect(result.transaction?.purchaseDate == ReceiptDate(millisecondsSince1970: Int64(milliseconds)))
    }

    @Test func signedDateNotANumber_isMalformed() throws {
        var blueprint = JWSPKI.transaction()
        blueprint.edits.set = [("signedDate", .string("yesterday"))]
        #expect(verifier.verify(try JWSPKI.standard.sign(blueprint.payload)).error?.code == .malformedJWS)
    }

    @Test(arguments: SignedDataKind.jwsKinds)
    func requiredKindDiffers_isKindMismatch(_ kind: SignedDataKind) throws {
        let other = SignedDataKind.jwsKinds.first { $0 != kind }!
        let result = verifier.verify(try JWSPKI.forged(kind), requiredKind: other)
        #expect(result.error?.code == .kindMismatch)
        #expect(result.kind == kind)
        #expect(verifier.verify(try JWSPKI.forged(kind), requiredKind: kind).isValid)
    }

    // MARK: Claims, each failing alone

    @Test func bundleIDNotConfigured_isBundleIDMismatch() throws {
        var blueprint = JWSPKI.transaction()
        blueprint.bundleID = "com.example.other"
        let result = verifier.verify(try JWSPKI.standard.sign(blueprint.payload))
        #expect(result.error?.code == .bundleIDMismatch)
        #expect(result.checks == expectedChecks(bundleID: .failed, environment: .passed))
    }

    @Test func renewalInfo_bundleIDCheckIsSkipped() throws {
        let result = verifier.verify(try JWSPKI.forged(.renewalInfo))
        #expect(result.checks.bundleID == .skipped)
        #expect(result.isValid)
    }

    @Test(arguments: ["Sandbox", "Production"])
    func environmentNotAccepted_isRefused(_ environment: String) throws {
        let only: ReceiptEnvironment = environment == "Sandbox" ? .production : .sandbox
        let strict = JWSPKI.verifier(environments: [only])
        let result = strict.verify(try JWSPKI.standard.sign(JWSPKI.transaction(environment: environment).payload))
        #expect(result.error?.code == .environmentNotAccepted)
        #expect(result.checks == expectedChecks(bundleID: .passed, environment: .failed))
    }

    @Test func localTesting_countsAsXcode() throws {
        let xcodeAccepted = JWSPKI.verifier(environments: [.xcode])
        let result = xcodeAccepted.verify(try JWSPKI.standard.sign(JWSPKI.transaction(environment: "LocalTesting").payload))
        #expect(result.error == nil, "\(result.error?.description ?? "")")
        #expect(result.environment == .xcode)
        #expect(verifier.verify(try JWSPKI.standard.sign(JWSPKI.transaction(environment: "LocalTesting").payload))
            .error?.code == .environmentNotAccepted)
    }

    @Test func productionAppTransactionForAnotherApp_isAppAppleIDMismatch() throws {
        var blueprint = JWSPKI.appTransaction()
        blueprint.appAppleID = 42
        let result = verifier.verify(try JWSPKI.standard.sign(blueprint.payload))
        #expect(result.error?.code == .appAppleIDMismatch)
        var expected = expectedChecks(bundleID: .passed, environment: .passed)
        expected.appAppleID = .failed
        expected.version = .passed
        #expect(result.checks == expected)
    }

    @Test func sandboxAppTransaction_appAppleIDIsSkipped() throws {
        var blueprint = JWSPKI.appTransaction(receiptType: "Sandbox")
        blueprint.appAppleID = 42
        let result = verifier.verify(try JWSPKI.standard.sign(blueprint.payload))
        #expect(result.isValid)
        #expect(result.checks.appAppleID == .skipped)
    }

    @Test func appAppleIDNotConfigured_isSkipped() throws {
        let unconfigured = JWSPKI.verifier(apps: [AppPolicy(bundleID: JWSPKI.bundleID)])
        let result = unconfigured.verify(try JWSPKI.forged(.appTransaction))
        #expect(result.isValid)
        #expect(result.checks.appAppleID == .skipped)
    }

    @Test func appTransactionVersionNotListed_isVersionNotAccepted() throws {
        var blueprint = JWSPKI.appTransaction()
        blueprint.applicationVersion = "9.9"
        let result = verifier.verify(try JWSPKI.standard.sign(blueprint.payload))
        #expect(result.error?.code == .versionNotAccepted)
        #expect(result.checks.version == .failed)
        #expect(result.checks.appAppleID == .passed)
    }

    @Test(arguments: [true, false])
    func deviceVerification_matchesOnlyItsDevice(_ sameDevice: Bool) throws {
        let device = DeviceIdentifier("6E1D8A9C-2B1F-4D3E-9A7B-0C5D4E3F2A1B")!
        let other = DeviceIdentifier("00000000-2B1F-4D3E-9A7B-0C5D4E3F2A1B")!
        var blueprint = JWSPKI.appTransaction()
        blueprint.bind(to: device)
        let jws = try JWSPKI.standard.sign(blueprint.payload)
        let result = verifier.verify(jws, deviceIdentifier: sameDevice ? device : other)
        #expect(result.checks.deviceHash == (sameDevice ? .passed : .failed))
        #expect(result.error?.code == (sameDevice ? nil : .deviceHashMismatch))
        #expect(verifier.verify(jws).checks.deviceHash == .skipped)
    }

    @Test func transactionDeviceVerification_isChecked() throws {
        let device = DeviceIdentifier("6E1D8A9C-2B1F-4D3E-9A7B-0C5D4E3F2A1B")!
        var blueprint = JWSPKI.transaction()
        let nonce = UUID()
        blueprint.deviceVerification = (deviceVerification(device: device, nonce: nonce), nonce)
        let jws = try JWSPKI.standard.sign(blueprint.payload)
        #expect(verifier.verify(jws, deviceIdentifier: device).checks.deviceHash == .passed)
    }

    // MARK: Xcode

    @Test func xcodeSigned_trustedAndXcodeAccepted_isValid() throws {
        let trusted = JWSPKI.verifier([JWSPKI.xcode], environments: [.xcode])
        var blueprint = JWSPKI.transaction(environment: "Xcode")
        let milliseconds = (JWSPKI.signedDate.timeIntervalSince1970 * 1000).rounded(.down)
        blueprint.edits.set = [("signedDate", .number(milliseconds + 0.485))]
        let jws = try JWSPKI.xcode.sign(blueprint.payload)
        let result = trusted.verify(jws)
        #expect(result.error == nil, "\(result.error?.description ?? "")")
        #expect(result.environment == .xcode)
    }

    @Test func xcodeSigned_notTrusted_isUntrusted() throws {
        let jws = try JWSPKI.xcode.sign(JWSPKI.transaction(environment: "Xcode").payload)
        #expect(JWSPKI.verifier(environments: [.xcode]).verify(jws).error?.code == .certificateUntrusted)
        // Trusted, but Xcode is not an accepted environment.
        #expect(JWSPKI.verifier([JWSPKI.xcode]).verify(jws).error?.code == .certificateUntrusted)
    }

    @Test func xcodeSigned_trusted_stillVerifiesItsSignature() throws {
        var options = JWSSigningOptions()
        options.tamperPayload = true
        let jws = try JWSPKI.xcode.sign(JWSPKI.transaction(environment: "Xcode").payload, options)
        let result = JWSPKI.verifier([JWSPKI.xcode], environments: [.xcode]).verify(jws)
        #expect(result.error?.code == .signatureInvalid)
    }

    @Test func xcodeSigned_claimingProduction_isNotAccepted() throws {
        let trusted = JWSPKI.verifier([JWSPKI.xcode], environments: [.xcode, .production])
        let result = trusted.verify(try JWSPKI.xcode.sign(JWSPKI.transaction(environment: "Production").payload))
        #expect(result.error?.code == .environmentNotAccepted)
    }

    @Test func singleCertificateWithoutXcodeKeyID_isMalformed() throws {
        var options = JWSSigningOptions()
        options.certificates = [JWSPKI.standard.certificatesDER[2]]
        #expect(verifier.verify(try JWSPKI.standard.sign(JWSPKI.transaction().payload, options)).error?.code == .malformedJWS)
    }

    // MARK: Subscriptions and the answer

    @Test func revokedSubscription_isCancelledAndInactive() throws {
        var blueprint = JWSPKI.transaction()
        blueprint.revocationDate = JWSPKI.signedDate
        blueprint.revocationReason = 1
        let result = verifier.verify(try JWSPKI.standard.sign(blueprint.payload))
        let status = try #require(result.subscriptions.first)
        #expect(status.isCancelled)
        #expect(!status.isActive)
        #expect(verifier.verify(try JWSPKI.forged(.transaction)).subscriptions.first?.isActive == true)
    }

    @Test func answerJSON_hasTheContractKeysInOrder() throws {
        let result = verifier.verify(try JWSPKI.forged(.transaction))
        guard case .object(let members) = JWSResultJSON.value(of: result) else { throw CocoaError(.coderInvalidValue) }
        #expect(members.map(\.key) == [
            "valid", "kind", "environment", "checks", "signed_date", "payload", "transaction", "subscriptions",
        ])
        let json = JWSResultJSON.value(of: result)
        guard case .object(let checks)? = json["checks"], case .object(let transaction)? = json["transaction"] else {
            throw CocoaError(.coderInvalidValue)
        }
        #expect(checks.map(\.key) == ["signature", "bundle_id", "environment", "app_apple_id", "version", "device_hash"])
        #expect(transaction.map(\.key) == [
            "transaction_id", "original_transaction_id", "web_order_line_item_id", "product_id", "bundle_id", "type",
            "quantity", "purchase_date", "original_purchase_date", "expires_date", "revocation_date",
            "revocation_reason", "in_app_ownership_type", "app_account_token", "offer_type", "environment",
            "signed_date",
            // Issue 18: every documented field, after the older ones.
            "price", "currency", "storefront", "storefront_id", "transaction_reason", "is_upgraded",
            "subscription_group_identifier", "offer_identifier", "offer_discount_type", "offer_period",
            "app_transaction_id", "revocation_type", "revocation_percentage", "billing_plan_type", "commitment_info",
            "advanced_commerce_info", "device_verification", "device_verification_nonce",
        ])
        #expect(json["transaction"]?["quantity"] == .integer(1))
        #expect(json["transaction"]?["revocation_date"] == .null)
        #expect(json["payload"]?["price"] == .integer(4990))

        let invalid = JWSResultJSON.value(of: verifier.verify(try JWSPKI.rogue.sign(JWSPKI.transaction().payload)))
        guard case .object(let invalidMembers) = invalid, case .object(let error)? = invalid["error"] else {
            throw CocoaError(.coderInvalidValue)
        }
        #expect(invalidMembers.map(\.key) == ["valid", "kind", "error", "environment", "checks", "signed_date", "subscriptions"])
        #expect(error.map(\.key) == ["code", "message", "reason"])
    }

    @Test func renewalInfoAnswer_autoRenewStatusIsABoolean() throws {
        let json = JWSResultJSON.value(of: verifier.verify(try JWSPKI.forged(.renewalInfo)))
        #expect(json["renewal_info"]?["auto_renew_status"] == .bool(true))
    }

    @Test func oversizedJWS_isMalformedWithoutParsing() {
        let small = JWSVerifier(policy: ValidationPolicy(maximumReceiptBytes: 1024))
        let text = "eyJ" + String(repeating: "A", count: 2048) + ".e30.AAAA"
        #expect(small.verify(text).error?.code == .malformedJWS)
    }

    @Test func looksLikeJWS_tellsJWSFromReceipts() throws {
        #expect(JWSVerifier.looksLikeJWS(Array(try JWSPKI.forged(.transaction).utf8)))
        #expect(JWSVerifier.looksLikeJWS(Array((" " + (try JWSPKI.forged(.transaction)) + "\n").utf8)))
        #expect(!JWSVerifier.looksLikeJWS([0x30, 0x82, 0x01, 0x00]))
        #expect(!JWSVerifier.looksLikeJWS(Array("MIAGCSqGSIb3DQEHAqCAMIACAQEx".utf8)))
    }

    @Test func directoryRoundTrip_signsForTheSameRoot() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jws-ca-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try TestCertificateAuthority.generate().write(toDirectory: directory)
        try JWSPKI.standard.write(toDirectory: directory)
        let read = try JWSTestAuthority(directory: directory)
        #expect(read.certificatesDER == JWSPKI.standard.certificatesDER)
        #expect(try TestCertificateAuthority(directory: directory).rootCertificateDER.isEmpty == false)
        #expect(verifier.verify(try read.sign(JWSPKI.transaction().payload)).isValid)
    }

    private func expectedChecks(bundleID: CheckOutcome, environment: CheckOutcome) -> ValidationChecks {
        var checks = ValidationChecks()
        checks.signature = .passed
        checks.bundleID = bundleID
        checks.environment = environment
        return checks
    }
}
