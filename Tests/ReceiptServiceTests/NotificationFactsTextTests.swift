import Foundation
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import StoreKitJWS
import TestSupport
import Testing

@testable import ReceiptService

/// A notification's nested payloads are stored from the text the verifier kept when that text is what writing the
/// payload again would give, byte for byte (issue 25's ingest speed), and written again otherwise: either way the
/// ledger holds the same bytes it held when every payload was written again.
struct NotificationFactsTextTests {
    let verifier = JWSPKI.verifier()

    /// The facts of `blueprint` signed, with what writing each nested payload again gives.
    func facts(_ blueprint: NotificationBlueprint) throws -> (NotificationFacts, JWSValidationResult) {
        let signed = try JWSPKI.standard.sign(blueprint.payload)
        let result = verifier.verify(signed, requiredKind: .notification)
        #expect(result.isValid, "\(result.error?.description ?? "")")
        return (try #require(LedgerFacts.notification(result, signedPayload: signed)), result)
    }

    func written(_ result: JWSValidationResult, _ member: String) throws -> String {
        let payload = try #require(result.nestedPayloads.first { $0.member == member }?.payload)
        return String(decoding: payload.serialized(), as: UTF8.self)
    }

    @Test func nestedPayloadsSignedCompact_areStoredAsSigned_whichIsWhatWritingThemGives() throws {
        var blueprint = try JWSPKI.notification()
        let transaction = JWSPKI.transaction(environment: "Production").payload
        let renewal = JWSPKI.renewalInfo(environment: "Production").payload
        blueprint.signedTransactionInfo = try JWSPKI.standard.sign(transaction)
        blueprint.signedRenewalInfo = try JWSPKI.standard.sign(renewal)
        let (facts, result) = try facts(blueprint)
        #expect(result.nestedPayloads.count == 2)
        #expect(result.nestedPayloads.allSatisfy { $0.payloadText != nil })
        #expect(facts.transaction?.payloadJSON == String(decoding: transaction.serialized(), as: UTF8.self))
        #expect(facts.transaction?.payloadJSON == (try written(result, "signedTransactionInfo")))
        #expect(facts.renewal?.payloadJSON == String(decoding: renewal.serialized(), as: UTF8.self))
        #expect(facts.renewal?.payloadJSON == (try written(result, "signedRenewalInfo")))
    }

    @Test func nestedAppTransactionSignedCompact_isStoredAsWritingItGives() throws {
        var blueprint = try JWSPKI.notification()
        blueprint.section = .appData
        let appTransaction = JWSPKI.appTransaction().payload
        blueprint.signedAppTransactionInfo = try JWSPKI.standard.sign(appTransaction)
        let (facts, result) = try facts(blueprint)
        #expect(result.nestedPayloads.map(\.member) == ["signedAppTransactionInfo"])
        #expect(result.nestedPayloads.first?.payloadText != nil)
        #expect(facts.appTransactionJSON == String(decoding: appTransaction.serialized(), as: UTF8.self))
        #expect(facts.appTransactionJSON == (try written(result, "signedAppTransactionInfo")))
    }

    /// A space after each colon: valid JSON that `serialized()` writes otherwise, so the stored text is the payload
    /// written again, never the signed bytes.
    @Test func nestedPayloadsSignedInAnotherForm_areStoredWrittenAgain() throws {
        var blueprint = try JWSPKI.notification()
        func loosened(_ payload: JSONValue) -> [UInt8] {
            var text = String(decoding: payload.serialized(), as: UTF8.self)
            text = text.replacingOccurrences(of: "\":", with: "\": ")
            return Array(text.utf8)
        }
        blueprint.signedTransactionInfo = try JWSPKI.standard.sign(
            payloadBytes: loosened(JWSPKI.transaction(environment: "Production").payload))
        blueprint.signedRenewalInfo = try JWSPKI.standard.sign(
            payloadBytes: loosened(JWSPKI.renewalInfo(environment: "Production").payload))
        let (facts, result) = try facts(blueprint)
        #expect(result.nestedPayloads.count == 2)
        #expect(result.nestedPayloads.allSatisfy { $0.payloadText == nil })
        let transaction = try written(result, "signedTransactionInfo")
        #expect(facts.transaction?.payloadJSON == transaction)
        #expect(!transaction.contains("\": "))
        #expect(facts.renewal?.payloadJSON == (try written(result, "signedRenewalInfo")))
    }
}
