import Foundation
import Testing

@testable import ReceiptEngine
import TestSupport

@Suite(.enabled(if: AppleFixtures.available, "../shared/fixtures/apple is not here"))
struct AppleFixtureTests {
    @Test func manifest_decodesAndListsReceipts() throws {
        let entries = try AppleFixtures.manifest.get()
        #expect(!entries.isEmpty)
    }

    @Test(arguments: AppleFixtures.entries)
    func realReceipt_givesManifestVerdictAndFields(_ entry: AppleFixtures.Entry) throws {
        let validator = ReceiptValidator(policy: ValidationPolicy())
        let result = validator.validate(try AppleFixtures.bytes(entry.file))
        if entry.expected_verdict == "valid" {
            #expect(result.error == nil, "\(result.error?.description ?? "")")
        } else {
            #expect(result.error?.code == .certificateUntrusted, "\(result.error?.description ?? "valid")")
        }
        if entry.expected_verdict.hasPrefix("certificate_untrusted (leaf") { return }
        if entry.environment == "Xcode" {
            // Untrusted by default; its payload is checked below once the StoreKit certificate is trusted.
            return try checkFields(entry, of: xcodeResult(entry))
        }
        try checkFields(entry, of: result)
    }

    private func xcodeResult(_ entry: AppleFixtures.Entry) throws -> ValidationResult {
        let policy = ValidationPolicy(additionalTrustAnchors: [try AppleFixtures.storeKitAnchor()], environments: [.xcode])
        let result = ReceiptValidator(policy: policy).validate(try AppleFixtures.bytes(entry.file))
        #expect(result.error == nil, "\(result.error?.description ?? "")")
        return result
    }

    private func checkFields(_ entry: AppleFixtures.Entry, of result: ValidationResult) throws {
        let receipt = try #require(result.receipt)
        #expect(receipt.receiptType == entry.environment)
        #expect(receipt.bundleID == entry.bundle_id)
        #expect(receipt.applicationVersion == entry.application_version)
        #expect(receipt.originalApplicationVersion == entry.original_application_version)
        #expect(receipt.creationDate == ReceiptDate(rfc3339: entry.creation_date))
        #expect(receipt.expirationDate == entry.expiration_date.flatMap { ReceiptDate(rfc3339: $0) })
        #expect(receipt.inAppPurchases.count == entry.in_app_count)
        #expect(Set(receipt.inAppPurchases.compactMap(\.productID)) == Set(entry.product_ids))
    }

    @Test(arguments: AppleFixtures.entries.filter { $0.device_id != nil })
    func realReceipt_deviceHashMatchesManifest(_ entry: AppleFixtures.Entry) throws {
        let device = try #require(DeviceIdentifier(entry.device_id!))
        let result = ReceiptValidator(policy: ValidationPolicy()).validate(try AppleFixtures.bytes(entry.file), deviceIdentifier: device)
        let matches = try #require(entry.device_hash_matches as Bool?)
        #expect(result.checks.deviceHash == (matches ? .passed : .failed))
        #expect(result.error?.code == (matches ? nil : .deviceHashMismatch))
    }

    @Test func realReceipt_withoutStoreKitAnchor_xcodeReceiptIsUntrusted() throws {
        let result = ReceiptValidator(policy: ValidationPolicy()).validate(try AppleFixtures.bytes("receipts/tpinapp_4.der"))
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.receipt == nil)
        #expect(result.error?.reason == .noTrustedRoot)
        // The config keys that make it trusted in a test setup are named, so the user knows what to change.
        #expect(result.error?.message.contains("trusted_roots") == true)
        #expect(result.error?.message.contains("\"Xcode\"") == true)
    }

    @Test func trustedStoreKitAnchor_xcodeEnvironmentNotListed_isNotAccepted() throws {
        let policy = ValidationPolicy(additionalTrustAnchors: [try AppleFixtures.storeKitAnchor()])
        let result = ReceiptValidator(policy: policy).validate(try AppleFixtures.bytes("receipts/tpinapp_4.der"))
        #expect(result.error?.code == .environmentNotAccepted)
        #expect(result.checks.signature == .passed)
    }

    @Test func appleSample_leafWithoutMarker_isUntrusted() throws {
        let result = ReceiptValidator(policy: ValidationPolicy()).validate(try AppleFixtures.bytes("receipts/mikestew_1.der"))
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .markerMissing)
    }

    @Test func largeSandboxReceipt_decodesEveryPurchase() throws {
        let result = ReceiptValidator(policy: ValidationPolicy()).validate(try AppleFixtures.bytes("receipts/tpinapp_3.der"))
        #expect(result.isValid)
        #expect(result.receipt?.inAppPurchases.count == 187)
        #expect(result.environment == .sandbox)
    }
}
