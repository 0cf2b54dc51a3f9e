import Foundation
import JSONText
import ReceiptEngine
import ReceiptForge
import ReceiptService
import StoreKitJWS
import TestSupport
import Testing

/// Rule 7: a notification is valid only when its envelope and every nested JWS verify, each with its own chain.
struct NotificationTests {
    let verifier = JWSPKI.verifier()

    @Test func notificationWithNestedTransactionAndRenewal_isValidAndShowsThem() throws {
        let result = verifier.verify(try JWSPKI.forged(.notification))
        #expect(result.error == nil, "\(result.error?.description ?? "")")
        #expect(result.kind == .notification)
        #expect(result.environment == .production)
        #expect(result.checks.appAppleID == .passed)
        #expect(result.nestedPayloads.map(\.member) == ["signedTransactionInfo", "signedRenewalInfo"])
        #expect(result.transaction?.bundleID == JWSPKI.bundleID)
        #expect(result.renewalInfo?.autoRenewStatus == true)
        #expect(result.notification?.notificationType == "DID_RENEW")
        #expect(result.notification?.status == 1)
        #expect(result.subscriptions.count == 1)
        let json = JWSResultJSON.value(of: result)
        #expect(json["notification"]?["app_apple_id"] == .integer(JWSPKI.appAppleID))
        #expect(json["transaction"] != nil && json["renewal_info"] != nil)
    }

    @Test func nestedTransactionSignedByRogueChain_makesNotificationUntrusted() throws {
        var blueprint = try JWSPKI.notification()
        blueprint.signedTransactionInfo = try JWSPKI.rogue.sign(JWSPKI.transaction(environment: "Production").payload)
        let result = verifier.verify(try JWSPKI.standard.sign(blueprint.payload))
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .noTrustedRoot)
        #expect(result.checks.signature == .failed)
        #expect(result.transaction == nil)
        #expect(!result.isValid)
    }

    @Test func nestedRenewalInfoTampered_makesNotificationInvalid() throws {
        var blueprint = try JWSPKI.notification()
        var options = JWSSigningOptions()
        options.tamperPayload = true
        blueprint.signedRenewalInfo = try JWSPKI.standard.sign(JWSPKI.renewalInfo(environment: "Production").payload, options)
        #expect(verifier.verify(try JWSPKI.standard.sign(blueprint.payload)).error?.code == .signatureInvalid)
    }

    @Test func nestedJWSOfTheWrongKind_isKindMismatch() throws {
        var blueprint = try JWSPKI.notification()
        blueprint.signedTransactionInfo = blueprint.signedRenewalInfo
        #expect(verifier.verify(try JWSPKI.standard.sign(blueprint.payload)).error?.code == .kindMismatch)
    }

    @Test func nestedJWSNotAString_isMalformed() throws {
        var blueprint = try JWSPKI.notification()
        blueprint.edits.set = [("data", .object([("bundleId", .string(JWSPKI.bundleID)),
            ("environment", .string("Production")), ("appAppleId", .integer(JWSPKI.appAppleID)),
            ("signedTransactionInfo", .integer(7))]))]
        #expect(verifier.verify(try JWSPKI.standard.sign(blueprint.payload)).error?.code == .malformedJWS)
    }

    @Test func nestedTransactionSignedAfterItsChainExpired_isUntrusted() throws {
        var blueprint = try JWSPKI.notification()
        blueprint.signedTransactionInfo = try JWSPKI.expired.sign(
            JWSPKI.transaction(environment: "Production", signed: JWSPKI.now).payload)
        let result = verifier.verify(try JWSPKI.standard.sign(blueprint.payload))
        #expect(result.error?.reason == .outsideValidity)
    }

    @Test func testNotification_withoutTransaction_isValid() throws {
        var blueprint = NotificationBlueprint(
            type: "TEST", bundleID: JWSPKI.bundleID, signedDate: JWSPKI.signedDate, environment: "Sandbox")
        blueprint.appAppleID = nil
        let result = verifier.verify(try JWSPKI.standard.sign(blueprint.payload))
        #expect(result.error == nil, "\(result.error?.description ?? "")")
        #expect(result.notification?.notificationType == "TEST")
        #expect(result.transaction == nil)
        #expect(result.subscriptions.isEmpty)
    }

    @Test(arguments: [("SOMETHING_APPLE_ADDS_IN_2027", "NEW_SUBTYPE"), ("DID_RENEW", "BRAND_NEW"), ("ONE_TIME_CHARGE", nil)])
    func unknownTypeOrSubtype_isValid(_ type: String, _ subtype: String?) throws {
        let blueprint = try JWSPKI.notification(type: type, subtype: subtype)
        let result = verifier.verify(try JWSPKI.standard.sign(blueprint.payload))
        #expect(result.error == nil, "\(result.error?.description ?? "")")
        #expect(result.notification?.notificationType == type)
        #expect(result.notification?.subtype == subtype)
    }

    @Test func productionNotificationForAnotherAppleID_isAppAppleIDMismatch() throws {
        var blueprint = try JWSPKI.notification()
        blueprint.appAppleID = 7
        let result = verifier.verify(try JWSPKI.standard.sign(blueprint.payload))
        #expect(result.error?.code == .appAppleIDMismatch)
        #expect(result.checks.appAppleID == .failed)
    }

    @Test func notificationForAnotherBundle_isBundleIDMismatch() throws {
        var blueprint = try JWSPKI.notification()
        blueprint.bundleID = "com.example.other"
        #expect(verifier.verify(try JWSPKI.standard.sign(blueprint.payload)).error?.code == .bundleIDMismatch)
    }

    @Test(arguments: [("SANDBOX_1234", ReceiptEnvironment.sandbox), ("1234", .production)])
    func externalPurchaseToken_environmentFromItsID(_ id: String, _ environment: ReceiptEnvironment) throws {
        var blueprint = NotificationBlueprint(
            type: "EXTERNAL_PURCHASE_TOKEN", subtype: "UNREPORTED", bundleID: JWSPKI.bundleID,
            signedDate: JWSPKI.signedDate)
        blueprint.section = .externalPurchaseToken
        blueprint.externalPurchaseID = id
        blueprint.appAppleID = JWSPKI.appAppleID
        let result = verifier.verify(try JWSPKI.standard.sign(blueprint.payload))
        #expect(result.error == nil, "\(result.error?.description ?? "")")
        #expect(result.environment == environment)
        #expect(result.notification?.bundleID == JWSPKI.bundleID)
    }

    @Test func summaryNotification_readsItsApp() throws {
        var blueprint = NotificationBlueprint(
            type: "RENEWAL_EXTENSION", subtype: "SUMMARY", bundleID: "com.example.other", signedDate: JWSPKI.signedDate)
        blueprint.section = .summary
        #expect(verifier.verify(try JWSPKI.standard.sign(blueprint.payload)).error?.code == .bundleIDMismatch)
    }

    @Test func appDataNotification_verifiesItsAppTransaction() throws {
        var blueprint = NotificationBlueprint(
            type: "RESCIND_CONSENT", bundleID: JWSPKI.bundleID, signedDate: JWSPKI.signedDate, environment: "Production")
        blueprint.section = .appData
        blueprint.appAppleID = JWSPKI.appAppleID
        blueprint.signedAppTransactionInfo = try JWSPKI.standard.sign(JWSPKI.appTransaction().payload)
        let result = verifier.verify(try JWSPKI.standard.sign(blueprint.payload))
        #expect(result.error == nil, "\(result.error?.description ?? "")")
        #expect(result.appTransaction?.bundleID == JWSPKI.bundleID)

        blueprint.signedAppTransactionInfo = try JWSPKI.rogue.sign(JWSPKI.appTransaction().payload)
        #expect(verifier.verify(try JWSPKI.standard.sign(blueprint.payload)).error?.code == .certificateUntrusted)
    }
}
