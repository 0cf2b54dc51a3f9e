import Foundation
import JSONText
import ReceiptEngine
import ReceiptForge
import ReceiptService
import StoreKitJWS
import TestSupport
import Testing

/// Issue 18: the caller's kind is authoritative, and without one every payload shape of Apple's own test data is
/// recognised where its members allow; a well-signed payload of no kind is `unknown_kind`, never `malformed_jws`.
struct KindTests {
    let verifier = JWSPKI.verifier(environments: [.production, .sandbox, .xcode])

    func sign(_ members: [(key: String, value: JSONValue)]) throws -> String {
        try JWSPKI.standard.sign(.object(members))
    }

    var signed: JSONValue { .integer(milliseconds(JWSPKI.signedDate)) }

    /// The shape of Apple's mock transaction (app-store-server-library's `mock_signed_data/transactionInfo`): no
    /// `transactionId`, nothing but the claims.
    var appleMockTransaction: [(key: String, value: JSONValue)] {
        [("environment", .string("Sandbox")), ("bundleId", .string(JWSPKI.bundleID)), ("signedDate", signed)]
    }

    /// The shape of Apple's mock renewal info: environment and signing date only.
    var appleMockRenewalInfo: [(key: String, value: JSONValue)] {
        [("environment", .string("Sandbox")), ("signedDate", signed)]
    }

    @Test func appleMockTransaction_isATransaction_withOrWithoutKind() throws {
        let jws = try sign(appleMockTransaction)
        for required in [nil, SignedDataKind.transaction] {
            let result = verifier.verify(jws, requiredKind: required)
            #expect(result.isValid, "\(result.error?.description ?? "")")
            #expect(result.kind == .transaction)
            #expect(result.transaction?.bundleID == JWSPKI.bundleID)
            #expect(result.transaction?.transactionID == nil)
        }
    }

    @Test func appleMockRenewalInfo_withKind_isRenewalInfo() throws {
        let result = verifier.verify(try sign(appleMockRenewalInfo), requiredKind: .renewalInfo)
        #expect(result.isValid, "\(result.error?.description ?? "")")
        #expect(result.kind == .renewalInfo)
        #expect(result.renewalInfo?.environment == "Sandbox")
    }

    @Test func appleMockRenewalInfo_withoutKind_isUnknownKind() throws {
        let result = verifier.verify(try sign(appleMockRenewalInfo))
        #expect(result.error?.code == .unknownKind)
        #expect(result.checks.signature == .passed)
        #expect(result.kind == nil)
        #expect(result.payload != nil)
        let json = JWSResultJSON.value(of: result)
        #expect(json["error"]?["code"] == .string("unknown_kind"))
        #expect(json["kind"] == .null)
    }

    @Test(arguments: [
        [("foo", JSONValue.integer(1))], [("version", JSONValue.string("2.0")), ("environment", .string("Sandbox"))],
    ] as [[(key: String, value: JSONValue)]])
    func wellSignedPayloadOfNoKind_isUnknownKindNotMalformed(_ members: [(key: String, value: JSONValue)]) throws {
        let result = verifier.verify(try sign(members))
        #expect(result.error?.code == .unknownKind, "\(result.error?.description ?? "valid")")
    }

    /// Members as Apple's models carry them, each kind with only the members that kind alone has besides the shared
    /// ones.
    static let shapes: [(SignedDataKind, [(key: String, value: JSONValue)])] = [
        (.transaction, [("productId", .string("p")), ("purchaseDate", .integer(1)), ("environment", .string("Sandbox")),
                        ("bundleId", .string(JWSPKI.bundleID))]),
        (.renewalInfo, [("originalTransactionId", .string("1")), ("renewalDate", .integer(1)),
                        ("environment", .string("Sandbox"))]),
        (.renewalInfo, [("expirationIntent", .integer(1)), ("priceIncreaseStatus", .integer(0)),
                        ("environment", .string("Sandbox"))]),
        (.appTransaction, [("receiptType", .string("Sandbox")), ("bundleId", .string(JWSPKI.bundleID)),
                           ("applicationVersion", .string("1.0"))]),
        (.notification, [("notificationType", .string("TEST")),
                         ("data", .object([("bundleId", .string(JWSPKI.bundleID)), ("environment", .string("Sandbox"))]))]),
    ]

    @Test(arguments: 0..<shapes.count)
    func appleShapes_areRecognisedWithoutKind(_ index: Int) throws {
        let (kind, members) = Self.shapes[index]
        let result = verifier.verify(try sign(members + [("signedDate", signed)]))
        #expect(result.kind == kind)
        #expect(result.isValid, "\(result.error?.description ?? "")")
    }

    /// A kind's own member under another kind is kind_mismatch; members every kind may carry are not.
    @Test(arguments: 0..<shapes.count)
    func anotherKindsDiscriminator_isKindMismatch(_ index: Int) throws {
        let (kind, members) = Self.shapes[index]
        let jws = try sign(members + [("signedDate", signed)])
        for other in SignedDataKind.jwsKinds where other != kind {
            let result = verifier.verify(jws, requiredKind: other)
            #expect(result.error?.code == .kindMismatch, "\(kind) asked as \(other)")
            #expect(result.kind == kind)
        }
    }

    @Test func sharedMembersOnly_readAsTheAskedKind() throws {
        let jws = try sign([
            ("originalTransactionId", .string("1")), ("productId", .string("p")), ("environment", .string("Sandbox")),
            ("signedDate", signed), ("offerType", .integer(1)), ("currency", .string("EUR")),
        ])
        #expect(verifier.verify(jws, requiredKind: .renewalInfo).kind == .renewalInfo)
        #expect(verifier.verify(jws, requiredKind: .renewalInfo).isValid)
        // As a transaction it names no app, which is refused, but it is not a kind mismatch.
        #expect(verifier.verify(jws, requiredKind: .transaction).error?.code == .bundleIDMismatch)
    }
}
