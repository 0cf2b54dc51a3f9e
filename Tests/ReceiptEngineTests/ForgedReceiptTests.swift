import Foundation
import TestSupport
import Testing

@testable import CryptoFloor
@testable import ReceiptEngine
import ReceiptForge

struct SignatureAndContainerTests {
    @Test(arguments: SignatureDigest.allCases)
    func forgedReceipt_signedWithEitherDigest_isValid(_ digest: SignatureDigest) throws {
        let receipt = try TestPKI.blueprint().forge(with: TestPKI.standard, digest: digest)
        let result = TestPKI.validator().validate(receipt)
        #expect(result.error == nil)
        #expect(result.checks.signature == .passed)
        #expect(result.receipt?.bundleID == "com.example.app")
    }

    @Test(arguments: SignatureDigest.allCases)
    func signedAttributes_asOpenSSLToolsWrite_areValid(_ digest: SignatureDigest) throws {
        let payload = TestPKI.blueprint().payload
        let receipt = try TestPKI.standard.sign(payload: payload, digest: digest, signedAttributes: true)
        let result = TestPKI.validator().validate(receipt)
        #expect(result.error == nil)
        #expect(result.checks.signature == .passed)
    }

    @Test func signedAttributes_overOtherContent_isSignatureInvalid() throws {
        let blueprint = TestPKI.blueprint()
        var receipt = try TestPKI.standard.sign(payload: blueprint.payload, signedAttributes: true)
        let at = try #require(receipt.firstRange(of: Array(blueprint.bundleID.utf8))).lowerBound
        receipt[at] ^= 0x01
        let result = TestPKI.validator().validate(receipt)
        #expect(result.error?.code == .signatureInvalid)
        #expect(result.error?.message.contains("digest") == true)
    }

    @Test func berIndefiniteLengthsAndChunkedContent_areValid() throws {
        var blueprint = TestPKI.blueprint()
        blueprint.purchases = (0..<20).map {
            PurchaseBlueprint(productID: "p\($0)", transactionID: "\($0)", purchaseDate: blueprint.creationDate)
        }
        let der = try blueprint.forge(with: TestPKI.standard)
        let ber = try indefiniteLengthReceipt(der, chunkSize: 100)
        #expect(ber != der)
        #expect(ber.count > der.count)
        let result = TestPKI.validator().validate(ber)
        #expect(result.error == nil)
        #expect(result.receipt?.inAppPurchases.count == 20)
    }

    @Test func forgedReceipt_rootNotConfigured_isUntrusted() throws {
        let receipt = try TestPKI.blueprint().forge(with: TestPKI.standard)
        let result = ReceiptValidator(policy: ValidationPolicy()).validate(receipt)
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .noTrustedRoot)
        #expect(result.receipt == nil)
        #expect(result.checks.signature == .failed)
    }

    @Test func receiptFromAnotherTestPKI_isUntrusted() throws {
        let receipt = try TestPKI.blueprint().forge(with: TestPKI.expired)
        let error = TestPKI.validator([TestPKI.standard]).validate(receipt).error
        #expect(error?.code == .certificateUntrusted)
        #expect(error?.reason == .noTrustedRoot)
    }

    @Test func chainExpiredToday_butValidAtCreation_isValid() throws {
        let receipt = try TestPKI.blueprint(created: TestPKI.now.addingTimeInterval(-30 * TestPKI.day))
            .forge(with: TestPKI.expired)
        let result = TestPKI.validator([TestPKI.expired]).validate(receipt)
        #expect(result.error == nil)
    }

    @Test func receiptCreatedAfterChainExpiry_isUntrusted() throws {
        let receipt = try TestPKI.blueprint(created: TestPKI.now).forge(with: TestPKI.expired)
        let result = TestPKI.validator([TestPKI.expired]).validate(receipt)
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .outsideValidity)
        // The signature verified, so staff still see what the receipt says.
        #expect(result.receipt != nil)
    }

    @Test func receiptCreatedBeforeChainValidity_isUntrusted() throws {
        let receipt = try TestPKI.blueprint(created: TestPKI.now.addingTimeInterval(-5 * 365 * TestPKI.day))
            .forge(with: TestPKI.standard)
        let error = TestPKI.validator().validate(receipt).error
        #expect(error?.code == .certificateUntrusted)
        #expect(error?.reason == .outsideValidity)
    }

    @Test func leafWithoutReceiptSigningMarker_chainingToTrustedRoot_isUntrusted() throws {
        let receipt = try TestPKI.blueprint().forge(with: TestPKI.leafWithoutMarker)
        let result = TestPKI.validator([TestPKI.leafWithoutMarker]).validate(receipt)
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .markerMissing)
    }

    @Test func intermediateWithoutMarker_isUntrusted() throws {
        let receipt = try TestPKI.blueprint().forge(with: TestPKI.intermediateWithoutMarker)
        let result = TestPKI.validator([TestPKI.intermediateWithoutMarker]).validate(receipt)
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .markerMissing)
    }

    @Test func tamperedPayloadByte_isSignatureInvalid() throws {
        let blueprint = TestPKI.blueprint()
        var receipt = try blueprint.forge(with: TestPKI.standard)
        let bundle = Array(blueprint.bundleID.utf8)
        let at = try #require(receipt.firstRange(of: bundle)).lowerBound
        receipt[at] ^= 0x01
        let result = TestPKI.validator().validate(receipt)
        #expect(result.error?.code == .signatureInvalid)
        #expect(result.receipt == nil)
    }

    @Test func everySingleByteFlip_isNeverValid() throws {
        let receipt = try TestPKI.blueprint().forge(with: TestPKI.standard)
        let validator = TestPKI.validator()
        // Container headers, payload, certificates, signer info and signature: no byte is outside the verdict.
        for index in 0..<receipt.count {
            var tampered = receipt
            tampered[index] ^= 0x40
            #expect(!validator.validate(tampered).isValid, "flipping byte \(index) left the receipt valid")
        }
    }

    /// Named by its description alone: swift-testing otherwise prints every byte of every argument, and the deep
    /// nesting case alone made a 900,000-character line in the test log.
    struct Garbage: Sendable, CustomTestStringConvertible {
        let name: String
        let bytes: [UInt8]
        var testDescription: String { "\(name) (\(bytes.count) bytes)" }
    }

    static let garbage: [Garbage] = [
        Garbage(name: "empty", bytes: []),
        Garbage(name: "random", bytes: (0..<4096).map { _ in UInt8.random(in: 0...255) }),
        Garbage(name: "sequence of nothing", bytes: [0x30, 0x00]),
        Garbage(name: "huge length", bytes: [0x30, 0x84, 0x7F, 0xFF, 0xFF, 0xFF, 0x00]),
        Garbage(name: "indefinite without end", bytes: [0x30, 0x80, 0x30, 0x80, 0x02, 0x01, 0x00]),
        Garbage(name: "deep nesting", bytes: Array((0..<100_000).map { _ in [UInt8(0x30), 0x80] }.joined())),
        Garbage(name: "base64 text, not DER", bytes: Array("MIIT".utf8)),
    ]

    @Test(arguments: garbage)
    func garbage_isMalformed(_ garbage: Garbage) {
        let result = TestPKI.validator().validate(garbage.bytes)
        #expect(result.error?.code == .malformedReceipt, "\(garbage.name)")
    }

    @Test func truncatedReceipt_isMalformedAtEveryLength() throws {
        let receipt = try TestPKI.blueprint().forge(with: TestPKI.standard)
        let validator = TestPKI.validator()
        for length in stride(from: 0, to: receipt.count, by: 13) {
            #expect(validator.validate(Array(receipt.prefix(length))).error?.code == .malformedReceipt)
        }
    }

    @Test func oversizedReceipt_isMalformedWithoutParsing() throws {
        let receipt = try TestPKI.blueprint().forge(with: TestPKI.standard)
        var policy = TestPKI.policy()
        policy.maximumReceiptBytes = receipt.count - 1
        let result = ReceiptValidator(policy: policy).validate(receipt)
        #expect(result.error?.code == .malformedReceipt)
        #expect(result.error?.detail == .tooLarge)
    }

    @Test func trailingBytesAfterContainer_isMalformed() throws {
        let receipt = try TestPKI.blueprint().forge(with: TestPKI.standard)
        #expect(TestPKI.validator().validate(receipt + [0]).error?.code == .malformedReceipt)
    }
}

struct PayloadTests {
    @Test func payloadNotASet_isMalformedAfterTheSignatureVerifies() throws {
        let receipt = try TestPKI.standard.sign(payload: DERWriter.sequence(DERWriter.integer(1)))
        let result = TestPKI.validator().validate(receipt)
        #expect(result.error?.code == .malformedReceipt)
        #expect(result.checks.signature == .passed)
    }

    @Test(arguments: [Int64(2), 3, 4, 5, 12])
    func missingRequiredAttribute_isMalformed(_ type: Int64) throws {
        var blueprint = TestPKI.blueprint()
        blueprint.omittedTypes = [type]
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error?.code == .malformedReceipt)
        #expect(result.error?.detail == .missingAttribute)
    }

    @Test func downloadID_isReadFromAttribute15_andAbsentWithoutIt() throws {
        var blueprint = TestPKI.blueprint()
        #expect(TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard)).receipt?.downloadID == nil)
        blueprint.downloadID = 64_031_548_855_196
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error == nil)
        #expect(result.receipt?.downloadID == 64_031_548_855_196)
    }

    @Test func emptyBundleID_readsAsAbsent_andIsMalformed() throws {
        var blueprint = TestPKI.blueprint()
        blueprint.bundleID = ""
        #expect(TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard)).error?.code == .malformedReceipt)
    }

    @Test func unknownAttributeTypes_areIgnored() throws {
        var blueprint = TestPKI.blueprint()
        blueprint.extraAttributes = [
            ReceiptAttributeBlueprint(type: 99, value: [0xFF, 0x00]),
            ReceiptAttributeBlueprint(type: 1_000_000, value: DERWriter.utf8String("future")),
            ReceiptAttributeBlueprint(type: -1, value: []),
        ]
        var purchase = PurchaseBlueprint(productID: "p", transactionID: "1", purchaseDate: blueprint.creationDate)
        purchase.promotionalOfferID = "offer"
        blueprint.purchases = [purchase]
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error == nil)
        #expect(result.receipt?.inAppPurchases.first?.promotionalOfferID == "offer")
    }

    @Test func brokenInAppSet_isMalformed() throws {
        var blueprint = TestPKI.blueprint()
        blueprint.extraAttributes = [ReceiptAttributeBlueprint(type: 17, value: DERWriter.utf8String("not a set"))]
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error?.code == .malformedReceipt)
        #expect(result.error?.detail == .inAppPurchaseNotASet)
    }

    @Test func unparseableDate_isMalformed() throws {
        var blueprint = TestPKI.blueprint()
        blueprint.omittedTypes = [12]
        blueprint.extraAttributes = [ReceiptAttributeBlueprint(type: 12, value: DERWriter.ia5String("yesterday"))]
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error?.code == .malformedReceipt)
    }

    @Test func threeThousandPurchases_allDecodeInOrder() throws {
        var blueprint = TestPKI.blueprint()
        blueprint.purchases = (0..<3000).map {
            PurchaseBlueprint(productID: "product.\($0 % 7)", transactionID: "\(100_000 + $0)", purchaseDate: blueprint.creationDate)
        }
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error == nil)
        let purchases = try #require(result.receipt?.inAppPurchases)
        #expect(purchases.count == 3000)
        #expect(Set(purchases.compactMap(\.transactionID)).count == 3000)
    }

    @Test func everyInAppField_decodes() throws {
        var blueprint = TestPKI.blueprint()
        blueprint.receiptType = "ProductionSandbox"
        blueprint.appItemID = 123_456_789
        blueprint.originalApplicationVersion = "0.9"
        blueprint.expirationDate = TestPKI.date("4001-01-01T00:00:00Z")
        let spec = "product=pro.monthly,transaction=1001,original=1000,purchased=2026-01-01T00:00:00Z,"
            + "original_purchased=2025-12-01T00:00:00Z,expires=2026-02-01T00:00:00+01:00,cancelled=2026-01-15T00:00:00Z,"
            + "quantity=3,web_order=77,trial=true,intro=1,offer=summer"
        blueprint.purchases = [try PurchaseBlueprint(spec: spec, defaultDate: blueprint.creationDate)]
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        let receipt = try #require(result.receipt)
        #expect(result.environment == .sandbox)
        #expect(receipt.appItemID == 123_456_789)
        #expect(receipt.originalApplicationVersion == "0.9")
        #expect(receipt.expirationDate?.rfc3339 == "4001-01-01T00:00:00Z")
        let purchase = try #require(receipt.inAppPurchases.first)
        #expect(purchase.productID == "pro.monthly")
        #expect(purchase.transactionID == "1001")
        #expect(purchase.originalTransactionID == "1000")
        #expect(purchase.quantity == 3)
        #expect(purchase.purchaseDate?.rfc3339 == "2026-01-01T00:00:00Z")
        #expect(purchase.originalPurchaseDate?.rfc3339 == "2025-12-01T00:00:00Z")
        #expect(purchase.expiresDate?.rfc3339 == "2026-01-31T23:00:00Z")
        #expect(purchase.cancellationDate?.rfc3339 == "2026-01-15T00:00:00Z")
        #expect(purchase.webOrderLineItemID == 77)
        #expect(purchase.isTrialPeriod)
        #expect(purchase.isInIntroOfferPeriod)
        #expect(purchase.promotionalOfferID == "summer")
    }
}

struct CheckTests {
    static let app = AppPolicy(bundleID: "com.example.app", acceptedVersions: ["1.0", "1.1"])

    @Test func allChecksPass_whenEverythingMatches() throws {
        let blueprint = TestPKI.blueprint()
        let result = TestPKI.validator(apps: [Self.app])
            .validate(try blueprint.forge(with: TestPKI.standard), deviceIdentifier: blueprint.deviceIdentifier)
        #expect(result.error == nil)
        #expect(result.checks == {
            var checks = ValidationChecks()
            checks.signature = .passed
            checks.bundleID = .passed
            checks.version = .passed
            checks.deviceHash = .passed
            checks.environment = .passed
            return checks
        }())
    }

    @Test func otherBundleID_failsOnlyThatCheck() throws {
        let blueprint = TestPKI.blueprint()
        let result = TestPKI.validator(apps: [AppPolicy(bundleID: "com.example.other")])
            .validate(try blueprint.forge(with: TestPKI.standard), deviceIdentifier: blueprint.deviceIdentifier)
        #expect(result.error?.code == .bundleIDMismatch)
        #expect(result.checks.bundleID == .failed)
        #expect(result.checks.deviceHash == .passed)
        #expect(result.receipt != nil)
    }

    @Test func expectedBundleID_overridesConfiguredApps() throws {
        let receipt = try TestPKI.blueprint().forge(with: TestPKI.standard)
        let validator = TestPKI.validator(apps: [AppPolicy(bundleID: "com.example.other")])
        #expect(validator.validate(receipt, expectedBundleID: "com.example.app").error == nil)
        #expect(validator.validate(receipt, expectedBundleID: "com.example.x").error?.code == .bundleIDMismatch)
    }

    @Test func noAppsConfigured_skipsBundleCheck() throws {
        let result = TestPKI.validator().validate(try TestPKI.blueprint().forge(with: TestPKI.standard))
        #expect(result.error == nil)
        #expect(result.checks.bundleID == .skipped)
        #expect(result.checks.version == .skipped)
    }

    @Test func versionNotListed_failsOnlyThatCheck() throws {
        var blueprint = TestPKI.blueprint()
        blueprint.applicationVersion = "2.0"
        let result = TestPKI.validator(apps: [Self.app]).validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error?.code == .versionNotAccepted)
        #expect(result.checks.bundleID == .passed)
        #expect(result.checks.version == .failed)
    }

    @Test func otherDevice_isDeviceHashMismatch() throws {
        let receipt = try TestPKI.blueprint().forge(with: TestPKI.standard)
        let other = try #require(DeviceIdentifier("3B76A7BD-8F5B-46A4-BCB1-CCE8DBD1B3CD"))
        let result = TestPKI.validator(apps: [Self.app]).validate(receipt, deviceIdentifier: other)
        #expect(result.error?.code == .deviceHashMismatch)
        #expect(result.checks.bundleID == .passed)
    }

    @Test func macAddressDevice_matches() throws {
        let mac = try #require(DeviceIdentifier("6c:40:08:b5:94:5e"))
        var blueprint = TestPKI.blueprint()
        blueprint.deviceIdentifier = mac
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard), deviceIdentifier: mac)
        #expect(result.checks.deviceHash == .passed)
    }

    @Test func sandboxReceipt_whenOnlyProductionAccepted_isEnvironmentNotAccepted() throws {
        var blueprint = TestPKI.blueprint()
        blueprint.receiptType = "ProductionSandbox"
        let result = TestPKI.validator(environments: [.production]).validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error?.code == .environmentNotAccepted)
        #expect(result.checks.environment == .failed)
        #expect(result.environment == .sandbox)
    }

    @Test func severalChecksFail_theFirstInCheckOrderIsReported() throws {
        var blueprint = TestPKI.blueprint()
        blueprint.applicationVersion = "9"
        let other = try #require(DeviceIdentifier("00:17:f2:c4:bc:c0"))
        let result = TestPKI.validator(apps: [Self.app]).validate(try blueprint.forge(with: TestPKI.standard), deviceIdentifier: other)
        #expect(result.error?.code == .versionNotAccepted)
        #expect(result.checks.deviceHash == .failed)
    }
}

struct SubscriptionTests {
    @Test func subscriptions_latestRenewalPerOriginalTransaction() throws {
        var blueprint = TestPKI.blueprint()
        let now = ReceiptDate(TestPKI.now)
        func at(_ days: Double) -> ReceiptDate {
            ReceiptDate(millisecondsSince1970: now.millisecondsSince1970 + Int64(days * 86_400_000))
        }
        var first = PurchaseBlueprint(productID: "m", transactionID: "1", originalTransactionID: "1", purchaseDate: at(-60), expiresDate: at(-30))
        var renewal = PurchaseBlueprint(productID: "m", transactionID: "2", originalTransactionID: "1", purchaseDate: at(-30), expiresDate: at(1))
        var cancelled = PurchaseBlueprint(productID: "y", transactionID: "5", originalTransactionID: "5", purchaseDate: at(-3), expiresDate: at(300))
        cancelled.cancellationDate = at(-1)
        let expired = PurchaseBlueprint(productID: "w", transactionID: "7", originalTransactionID: "7", purchaseDate: at(-14), expiresDate: at(-7))
        let consumable = PurchaseBlueprint(productID: "coins", transactionID: "9", purchaseDate: at(-2))
        first.isTrialPeriod = true
        renewal.webOrderLineItemID = 2
        blueprint.purchases = [renewal, consumable, first, cancelled, expired]
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard), at: TestPKI.now)
        #expect(result.subscriptions.map(\.originalTransactionID) == ["1", "5", "7"])
        #expect(result.subscriptions.map(\.latestTransactionID) == ["2", "5", "7"])
        #expect(result.subscriptions.map(\.isActive) == [true, false, false])
        #expect(result.subscriptions.map(\.isCancelled) == [false, true, false])
        #expect(result.subscriptions[0].expiresDate.secondsSince1970 == at(1).secondsSince1970)
    }

    @Test func summarize_renewalsExpiringTogether_keepTheFirstListed() {
        let expiry = ReceiptDate(millisecondsSince1970: 1_000_000)
        let purchases = [
            InAppPurchase(productID: "a", transactionID: "t2", originalTransactionID: "o", expiresDate: expiry),
            InAppPurchase(productID: "b", transactionID: "t3", originalTransactionID: "o", expiresDate: expiry),
            InAppPurchase(productID: "c", transactionID: "k", expiresDate: expiry),
            InAppPurchase(
                productID: "d", transactionID: "t4", originalTransactionID: "o",
                expiresDate: ReceiptDate(millisecondsSince1970: 999)),
        ]
        let statuses = SubscriptionStatus.summarize(purchases, at: ReceiptDate(millisecondsSince1970: 0))
        #expect(statuses.map(\.originalTransactionID) == ["k", "o"])
        #expect(statuses.map(\.latestTransactionID) == ["k", "t2"])
        #expect(statuses.map(\.productID) == ["c", "a"])
    }
}
