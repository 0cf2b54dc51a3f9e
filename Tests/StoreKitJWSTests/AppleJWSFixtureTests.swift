import Foundation
import JSONText
import ReceiptEngine
import ReceiptService
import StoreKitJWS
import TestSupport
import Testing

@Suite(.enabled(if: AppleJWSFixtures.available, "../shared/fixtures/apple-jws is not here: real Apple JWS not checked"))
struct AppleJWSFixtureTests {
    @Test func manifest_decodes() throws {
        let entries = try AppleJWSFixtures.decodeManifest()
        #expect(!entries.isEmpty)
    }

    @Test(arguments: AppleJWSFixtures.entries)
    func realJWS_givesManifestVerdictAndFields(_ entry: AppleJWSFixtures.Entry) throws {
        let verifier = JWSVerifier(policy: ValidationPolicy())
        let result = verifier.verify(try AppleJWSFixtures.text(entry.file))
        if entry.expected.valid {
            #expect(result.error == nil, "\(result.error?.description ?? "")")
            try checkFields(entry, result)
        } else {
            #expect(result.error?.code.rawValue == entry.expected.error)
            #expect(result.payload == nil)
        }
    }

    /// Xcode's data verifies once its own certificate is trusted and Xcode is accepted, and still gives its fields.
    @Test(arguments: AppleJWSFixtures.entries.filter { $0.environment == "Xcode" })
    func realXcodeJWS_withItsCertificateTrusted_isValid(_ entry: AppleJWSFixtures.Entry) throws {
        let text = try AppleJWSFixtures.text(entry.file)
        let anchor = try TrustAnchor(derEncoded: try Self.firstCertificate(of: text))
        let trusted = JWSVerifier(policy: ValidationPolicy(additionalTrustAnchors: [anchor], environments: [.xcode]))
        let result = trusted.verify(text)
        #expect(result.error == nil, "\(result.error?.description ?? "")")
        try checkFields(entry, result)
        #expect(result.checks.signature == .passed)

        let xcodeNotAccepted = JWSVerifier(policy: ValidationPolicy(additionalTrustAnchors: [anchor]))
        #expect(xcodeNotAccepted.verify(text).error?.code == .certificateUntrusted)
    }

    static func firstCertificate(of jws: String) throws -> [UInt8] {
        var header = String(jws.split(separator: ".")[0]).replacingOccurrences(of: "-", with: "+")
            .replacingOccurrences(of: "_", with: "/")
        while header.count % 4 != 0 { header += "=" }
        let json = try JSONValue(parsing: Array(try #require(Data(base64Encoded: header))))
        guard case .string(let certificate)? = json["x5c"].flatMap({ if case .array(let a) = $0 { a.first } else { nil } })
        else { throw CocoaError(.coderInvalidValue) }
        return Array(try #require(Data(base64Encoded: certificate)))
    }

    private func checkFields(_ entry: AppleJWSFixtures.Entry, _ result: JWSValidationResult) throws {
        #expect(result.kind?.rawValue == entry.kind)
        #expect(result.environment?.rawValue == entry.environment)
        #expect(result.signedDate?.rfc3339 == entry.signed_date)
        #expect(result.payload != nil)
        let json = JWSResultJSON.value(of: result)
        #expect(json["kind"] == .string(entry.kind))
        switch result.kind {
        case .transaction?:
            let transaction = try #require(result.transaction)
            #expect(transaction.bundleID == entry.bundle_id)
            #expect(transaction.transactionID == entry.transaction_id)
            #expect(transaction.originalTransactionID == entry.original_transaction_id)
            #expect(transaction.productID == entry.product_id)
            #expect(transaction.type == entry.type)
            #expect(transaction.expiresDate?.rfc3339 == entry.expires_date)
            #expect(transaction.purchaseDate?.rfc3339 == entry.purchase_date)
            #expect(result.subscriptions.count == (entry.expires_date == nil ? 0 : 1))
        case .renewalInfo?:
            let info = try #require(result.renewalInfo)
            #expect(info.originalTransactionID == entry.original_transaction_id)
            #expect(info.productID == entry.product_id)
            #expect(info.autoRenewStatus == entry.auto_renew_status)
            #expect(json["renewal_info"]?["auto_renew_status"] == entry.auto_renew_status.map(JSONValue.bool))
            #expect(result.checks.bundleID == .skipped)
        case .appTransaction?:
            let app = try #require(result.appTransaction)
            #expect(app.bundleID == entry.bundle_id)
            #expect(app.appAppleID == entry.app_apple_id)
            #expect(app.applicationVersion == entry.application_version)
            #expect(app.originalApplicationVersion == entry.original_application_version)
        case .notification?:
            let notification = try #require(result.notification)
            #expect(notification.bundleID == entry.bundle_id)
            #expect(notification.notificationType == entry.notification_type)
            #expect(notification.subtype == entry.subtype)
            #expect(notification.notificationUUID == entry.notification_uuid)
            #expect(notification.appAppleID == entry.app_apple_id)
            #expect(result.nestedPayloads.map(\.member) == entry.nested ?? [])
            if entry.nested?.contains("signedTransactionInfo") == true { #expect(result.transaction != nil) }
            if entry.nested?.contains("signedRenewalInfo") == true { #expect(result.renewalInfo != nil) }
        case .receipt?, nil:
            Issue.record("no JWS kind")
        }
    }
}
