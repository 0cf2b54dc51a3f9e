import Foundation
import TestSupport
import Testing

@testable import CryptoFloor
@testable import ReceiptEngine
import ReceiptForge

/// Receipts at the edges of the clock and of the input: each must get a clean verdict (a result, never a trap),
/// and the verdict must be the right one.
struct ClockEdgeTests {
    /// Test PKIs whose validity windows reach the far past or the far future, made once.
    static let farFuture: TestCertificateAuthority = authority(from: "2020-01-01T00:00:00Z", until: "3000-01-01T00:00:00Z")
    static let lastCentury: TestCertificateAuthority = authority(from: "1980-01-01T00:00:00Z", until: "2030-01-01T00:00:00Z")
    static let beforeEpoch: TestCertificateAuthority = authority(from: "1960-01-01T00:00:00Z", until: "2030-01-01T00:00:00Z")

    static func authority(from: String, until: String) -> TestCertificateAuthority {
        var options = TestCertificateAuthority.Options()
        options.notBefore = TestPKI.date(from).date
        options.notAfter = TestPKI.date(until).date
        return try! .generate(options)
    }

    static func receipt(created: String, by authority: TestCertificateAuthority) throws -> [UInt8] {
        try ReceiptBlueprint(bundleID: "com.example.app", applicationVersion: "1.1", creationDate: TestPKI.date(created))
            .forge(with: authority)
    }

    /// The blueprint's payload with its creation date (attribute 12) replaced by `creationDate` as written.
    static func payload(
        _ blueprint: ReceiptBlueprint, creationDate: String, adding extra: [ReceiptAttributeBlueprint] = []
    ) -> [UInt8] {
        let creation = ReceiptAttributeBlueprint(type: 12, value: DERWriter.ia5String(creationDate))
        return DERWriter.set(of: (blueprint.attributes.filter { $0.type != 12 } + [creation] + extra).map(\.encoded))
    }

    @Test(arguments: ["2999-12-31T23:59:59Z", "2100-02-28T12:00:00Z", "2038-01-19T03:14:08Z", "2050-01-01T00:00:00Z"])
    func creationDateInFarFuture_insideChainWindow_isValid(_ created: String) throws {
        let result = TestPKI.validator([Self.farFuture]).validate(try Self.receipt(created: created, by: Self.farFuture))
        #expect(result.error == nil)
        #expect(result.receipt?.creationDate.rfc3339 == created)
    }

    @Test(arguments: ["1999-12-31T23:59:59Z", "1980-01-01T00:00:01Z", "2000-02-29T00:00:00Z"])
    func creationDateBefore2000_insideChainWindow_isValid(_ created: String) throws {
        let result = TestPKI.validator([Self.lastCentury]).validate(try Self.receipt(created: created, by: Self.lastCentury))
        #expect(result.error == nil)
        #expect(result.receipt?.creationDate.rfc3339 == created)
    }

    @Test func creationDateBefore1970_insideChainWindow_isValid() throws {
        let created = "1969-07-20T20:17:40Z"
        let result = TestPKI.validator([Self.beforeEpoch]).validate(try Self.receipt(created: created, by: Self.beforeEpoch))
        #expect(result.error == nil)
        #expect(result.receipt?.creationDate.rfc3339 == created)
        #expect(try #require(result.receipt).creationDate.millisecondsSince1970 < 0)
    }

    @Test(arguments: ["0000-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "1899-12-31T23:59:59Z", "9999-12-31T23:59:59Z"])
    func creationDateOutsideAnyChain_isUntrusted_withTheDateIntact(_ created: String) throws {
        let result = TestPKI.validator().validate(try Self.receipt(created: created, by: TestPKI.standard))
        #expect(result.error?.code == .certificateUntrusted)
        #expect(result.error?.reason == .outsideValidity)
        #expect(result.receipt?.creationDate.rfc3339 == created)
    }

    @Test func leapSecond_countsAsTheFirstSecondOfTheNextMinute() throws {
        let authority = Self.lastCentury
        let blueprint = ReceiptBlueprint(bundleID: "com.example.app", applicationVersion: "1.1")
        let purchase = DERWriter.set(of: [
            ReceiptAttributeBlueprint.utf8(1702, "pro.monthly").encoded,
            ReceiptAttributeBlueprint.utf8(1703, "1").encoded,
            ReceiptAttributeBlueprint(type: 1704, value: DERWriter.ia5String("2016-12-31T23:59:60Z")).encoded,
            ReceiptAttributeBlueprint(type: 1708, value: DERWriter.ia5String("2016-12-31T23:59:60.500Z")).encoded,
        ])
        let payload = Self.payload(
            blueprint,
            creationDate: "2016-12-31T23:59:60Z",
            adding: [ReceiptAttributeBlueprint(type: 17, value: purchase)])
        let result = TestPKI.validator([authority]).validate(try authority.sign(payload: payload))
        #expect(result.error == nil)
        let receipt = try #require(result.receipt)
        #expect(receipt.creationDate.rfc3339 == "2017-01-01T00:00:00Z")
        #expect(receipt.inAppPurchases.first?.purchaseDate == TestPKI.date("2017-01-01T00:00:00Z"))
        #expect(receipt.inAppPurchases.first?.expiresDate?.millisecondsSince1970 == 1_483_228_800_500)
    }

    @Test(arguments: ["2016-12-31T23:59:61Z", "2016-12-31T23:60:00Z", "2016-12-31T24:00:00Z", "2017-02-29T00:00:00Z"])
    func impossibleTimeOfDay_isMalformed(_ text: String) throws {
        let payload = Self.payload(TestPKI.blueprint(), creationDate: text)
        let result = TestPKI.validator().validate(try TestPKI.standard.sign(payload: payload))
        #expect(result.error?.code == .malformedReceipt)
        #expect(result.error?.detail == .dateNotRFC3339)
        #expect(result.checks.signature == .passed)
    }

    @Test(arguments: [Date.distantPast, Date(timeIntervalSince1970: 0), Date.distantFuture] as [Date])
    func extremeValidationTimes_giveAVerdictAndSubscriptionState(_ now: Date) throws {
        var blueprint = TestPKI.blueprint()
        blueprint.purchases = [
            PurchaseBlueprint(
                productID: "m", transactionID: "1", purchaseDate: blueprint.creationDate,
                expiresDate: TestPKI.date("2500-01-01T00:00:00Z"))
        ]
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard), at: now)
        #expect(result.error == nil)
        #expect(result.subscriptions.map(\.isActive) == [now != .distantFuture])
    }
}

struct AbsurdValueTests {
    @Test(arguments: [Int64.max, Int64.min, 0, -1, (1 << 53) + 1] as [Int64])
    func absurdQuantityAndWebOrder_decodeExactly(_ value: Int64) throws {
        var blueprint = TestPKI.blueprint()
        var purchase = PurchaseBlueprint(productID: "coins", transactionID: "1", purchaseDate: blueprint.creationDate)
        purchase.quantity = value
        purchase.webOrderLineItemID = value
        blueprint.purchases = [purchase]
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error == nil)
        #expect(result.receipt?.inAppPurchases.first?.quantity == value)
        #expect(result.receipt?.inAppPurchases.first?.webOrderLineItemID == value)
    }

    /// INTEGERs one byte past 64 bits and far past them.
    @Test(arguments: [9, 1000])
    func quantityBeyond64Bits_isMalformed(_ byteCount: Int) throws {
        let integer = DERWriter.element(tag: 0x02, [0x7F] + [UInt8](repeating: 0xFF, count: byteCount - 1))
        let name = "\(byteCount)-byte INTEGER"
        var blueprint = TestPKI.blueprint()
        let purchase = DERWriter.set(of: [
            ReceiptAttributeBlueprint.utf8(1702, "coins").encoded,
            ReceiptAttributeBlueprint(type: 1701, value: integer).encoded,
        ])
        blueprint.extraAttributes = [ReceiptAttributeBlueprint(type: 17, value: purchase)]
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error?.code == .malformedReceipt, "\(name)")
        #expect(result.error?.detail == .integerTooLarge, "\(name)")
    }

    @Test func attributeTypeBeyond64Bits_isMalformed() throws {
        let attribute = DERWriter.sequence(
            [0x02, 0x09, 0x01, 0, 0, 0, 0, 0, 0, 0, 2] + DERWriter.integer(1) + DERWriter.octetString([]))
        let payload = DERWriter.set(of: TestPKI.blueprint().attributes.map(\.encoded) + [attribute])
        let result = TestPKI.validator().validate(try TestPKI.standard.sign(payload: payload))
        #expect(result.error?.code == .malformedReceipt)
    }

    /// Attribute 2 (the bundle id) in shapes Apple does not write but BER allows, each read as it always was: the
    /// payload walk reads Apple's DER shape in one pass and hands every other shape to the header-by-header reader.
    @Test(arguments: [
        ("constructed version", [0x22, 0x03] + DERWriter.integer(1)),
        ("long-form version length", [0x02, 0x81, 0x01, 0x01]),
        ("two-byte version", DERWriter.integer(300)),
    ] as [(String, [UInt8])])
    func bundleIDAttributeInAnotherAcceptedShape_readsTheSameBundleID(_ shape: String, _ version: [UInt8]) throws {
        let blueprint = TestPKI.blueprint()
        let attribute = DERWriter.sequence(
            DERWriter.integer(2) + version + DERWriter.octetString(DERWriter.utf8String(blueprint.bundleID)))
        let payload = DERWriter.set(of: blueprint.attributes.filter { $0.type != 2 }.map(\.encoded) + [attribute])
        let result = TestPKI.validator().validate(try TestPKI.standard.sign(payload: payload))
        #expect(result.error == nil, "\(shape)")
        #expect(result.receipt?.bundleID == blueprint.bundleID, "\(shape)")
    }

    /// Attributes that are not (type, version, value) exactly, each refused whichever reader reads it.
    @Test(arguments: [
        ("a byte after the value", DERWriter.sequence(DERWriter.integer(2) + DERWriter.integer(1) + DERWriter.octetString([]) + [0x05, 0x00])),
        ("no value", DERWriter.sequence(DERWriter.integer(2) + DERWriter.integer(1))),
        ("an empty type", DERWriter.sequence([0x02, 0x00] + DERWriter.integer(1) + DERWriter.octetString([]))),
        ("a value that is not an OCTET STRING", DERWriter.sequence(DERWriter.integer(2) + DERWriter.integer(1) + DERWriter.integer(5))),
        ("a SET, not a SEQUENCE", DERWriter.element(tag: 0x31, DERWriter.integer(2) + DERWriter.integer(1) + DERWriter.octetString([]))),
        ("a value longer than the attribute", [0x30, 0x08] + DERWriter.integer(2) + DERWriter.integer(1) + [0x04, 0x05, 0x00]),
    ] as [(String, [UInt8])])
    func attributeOfAnotherShape_isMalformed(_ shape: String, _ attribute: [UInt8]) throws {
        let payload = DERWriter.set(of: TestPKI.blueprint().attributes.map(\.encoded) + [attribute])
        let result = TestPKI.validator().validate(try TestPKI.standard.sign(payload: payload))
        #expect(result.error?.code == .malformedReceipt, "\(shape)")
    }

    @Test func megabyteBundleID_isReadWhole() throws {
        var blueprint = TestPKI.blueprint()
        blueprint.bundleID = String(repeating: "a", count: 1 << 20)
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error == nil)
        #expect(result.receipt?.bundleID.utf8.count == 1 << 20)
    }
}

struct InputSizeEdgeTests {
    @Test func hundredThousandTinyAttributes_areSkipped_andTheReceiptIsValid() throws {
        var blueprint = TestPKI.blueprint()
        blueprint.extraAttributes = (0..<100_000).map { ReceiptAttributeBlueprint(type: 10_000 + Int64($0), value: []) }
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error == nil)
        #expect(result.receipt?.bundleID == "com.example.app")
    }

    @Test func hundredThousandEmptyInAppSets_decodeAsEmptyPurchases() throws {
        var blueprint = TestPKI.blueprint()
        let empty = ReceiptAttributeBlueprint(type: 17, value: DERWriter.set(of: []))
        blueprint.extraAttributes = Array(repeating: empty, count: 100_000)
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error == nil)
        #expect(result.receipt?.inAppPurchases.count == 100_000)
        #expect(result.receipt?.inAppPurchases.allSatisfy { $0 == InAppPurchase() } == true)
        #expect(result.subscriptions.isEmpty)
    }

    @Test func moreAttributesThanTheBudget_isMalformed() throws {
        // 250,001 in-app sets of one attribute each: 500,002 attributes counted across the nesting.
        var blueprint = TestPKI.blueprint()
        let one = ReceiptAttributeBlueprint(
            type: 17, value: DERWriter.set(of: [ReceiptAttributeBlueprint(type: 1, value: []).encoded]))
        blueprint.extraAttributes = Array(repeating: one, count: ReceiptPayload.maximumAttributes / 2 + 1)
        var policy = TestPKI.policy()
        policy.maximumReceiptBytes = 16 << 20
        let result = ReceiptValidator(policy: policy).validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error?.code == .malformedReceipt)
        #expect(result.error?.detail == .tooManyAttributes)
    }
}

struct NestingEdgeTests {
    /// `depth` definite-length elements each holding the next, built from the inside out without re-copying.
    static func nested(_ depth: Int, tag: UInt8, innermost: [UInt8]) -> [UInt8] {
        var headers: [[UInt8]] = []
        var length = innermost.count
        for _ in 0..<depth {
            var header = [tag]
            DERWriter.appendLength(length, to: &header)
            headers.append(header)
            length += header.count
        }
        return headers.reversed().flatMap { $0 } + innermost
    }

    @Test func deeplyNestedIndefiniteLengthPayload_isMalformed_afterTheSignatureVerifies() throws {
        let payload = [0x31, 0x80] + Array(repeating: [UInt8]([0x30, 0x80]), count: 100_000).joined()
            + Array(repeating: 0, count: 200_002)
        let result = TestPKI.validator().validate(try TestPKI.standard.sign(payload: payload))
        #expect(result.error?.code == .malformedReceipt)
        #expect(result.checks.signature == .passed)
        #expect(result.error?.detail == .nestingTooDeep)
    }

    @Test func deeplyNestedOctetStringChunks_inTheBundleID_areMalformed() throws {
        let blueprint = TestPKI.blueprint()
        let chunked = Self.nested(10_000, tag: 0x24, innermost: DERWriter.octetString(DERWriter.utf8String("x")))
        let bundleID = DERWriter.sequence(DERWriter.integer(2) + DERWriter.integer(1) + chunked)
        let payload = DERWriter.set(of: blueprint.attributes.filter { $0.type != 2 }.map(\.encoded) + [bundleID])
        let result = TestPKI.validator().validate(try TestPKI.standard.sign(payload: payload))
        #expect(result.error?.code == .malformedReceipt)
        #expect(result.error?.detail == .nestingTooDeep)
    }

    @Test func deeplyNestedSetsInAnUnknownAttribute_areNeverParsed_andTheReceiptIsValid() throws {
        var blueprint = TestPKI.blueprint()
        blueprint.extraAttributes = [ReceiptAttributeBlueprint(type: 4242, value: Self.nested(50_000, tag: 0x31, innermost: []))]
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error == nil)
    }

    @Test func deeplyNestedSetsAsAnInAppPurchase_areMalformed() throws {
        var blueprint = TestPKI.blueprint()
        blueprint.extraAttributes = [ReceiptAttributeBlueprint(type: 17, value: Self.nested(50_000, tag: 0x31, innermost: []))]
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        #expect(result.error?.code == .malformedReceipt)
        #expect(result.checks.signature == .passed)
    }

    @Test func deeplyNestedDefiniteLengthContainer_isMalformed() {
        let container = Self.nested(20_000, tag: 0x30, innermost: [0x05, 0x00])
        #expect(TestPKI.validator().validate(container).error?.code == .malformedReceipt)
    }
}
