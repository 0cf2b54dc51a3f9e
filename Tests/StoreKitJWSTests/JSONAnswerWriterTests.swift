import Foundation
import JSONText
import ReceiptEngine
import ReceiptForge
import ReceiptService
import StoreKitJWS
import TestSupport
import Testing

/// `/v1/validate` writes a JWS verdict's compact text straight from the verdict; it must be, byte for byte, the text
/// of the verdict's `JSONValue`, which the ledger and the CLI edit and print.
struct JSONAnswerWriterTests {
    static let verifier = JWSPKI.verifier()

    static func everyMember() throws -> String {
        var transaction = JWSPKI.transaction()
        transaction.productID = "quote \" backslash \\ <script> & é 🍎 \u{7}"
        transaction.expiresDate = JWSPKI.now.addingTimeInterval(30 * JWSPKI.day + 0.049)
        transaction.revocationDate = Date(timeIntervalSince1970: -1.5)
        transaction.edits.set = [
            ("price", .integer(-49_990)), ("currency", .string("EUR")), ("isUpgraded", .bool(false)),
            ("offerPeriod", .null), ("revocationPercentage", .number(12.5)),
            ("commitmentInfo", .object([
                ("commitmentPeriod", .string("P1Y")), ("dependentSKUs", .array([.string("a"), .integer(2)])),
                ("nested", .object([("deeperName", .object([]))])), ("empty", .array([])),
            ])),
        ]
        return try JWSPKI.standard.sign(transaction.payload)
    }

    static func verdicts() throws -> [JWSValidationResult] {
        let at = JWSPKI.now
        return [
            verifier.verify(try everyMember(), at: at),
            verifier.verify(try JWSPKI.forged(.renewalInfo), at: at),
            verifier.verify(try JWSPKI.forged(.appTransaction), at: at),
            verifier.verify(try JWSPKI.forged(.notification), at: at),
            verifier.verify(try JWSPKI.forged(.transaction), requiredKind: .receipt, at: at),
            verifier.verify(try JWSPKI.rogue.sign(JWSPKI.transaction().payload), at: at),
            verifier.verify("eyJhbGciOiJFUzI1NiJ9.e30", at: at),
            JWSValidationResult(),
        ]
    }

    @Test func writtenText_isTheVerdictValueSerialized() throws {
        for result in try Self.verdicts() {
            let written = JWSResultJSON.encode(result)
            let serialized = JWSResultJSON.value(of: result).serialized()
            #expect(
                written == serialized,
                "\(String(decoding: written, as: UTF8.self))\n\(String(decoding: serialized, as: UTF8.self))")
        }
    }

    @Test func payloadChangedAfterVerification_isWrittenAsChanged() throws {
        var result = Self.verifier.verify(try JWSPKI.forged(.transaction), at: JWSPKI.now)
        result.payload = .object([("changed", .bool(true))])
        #expect(JWSResultJSON.encode(result) == JWSResultJSON.value(of: result).serialized())
        #expect(JWSResultJSON.value(of: result)["payload"] == .object([("changed", .bool(true))]))
    }

    @Test func prettyText_isTheVerdictValueSerializedPretty() throws {
        let result = try Self.verdicts()[0]
        #expect(JWSResultJSON.encode(result, pretty: true) == JWSResultJSON.value(of: result).serialized(pretty: true))
    }
}
