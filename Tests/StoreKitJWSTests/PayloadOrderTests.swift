import Foundation
import JSONText
import ReceiptEngine
import ReceiptForge
import StoreKitJWS
import TestSupport
import Testing

/// Normalized objects are read in Apple's member order for speed; what they say must not depend on that order.
struct PayloadOrderTests {
    static func members(_ payload: JSONValue) -> [(key: String, value: JSONValue)] {
        guard case .object(let members) = payload else { return [] }
        return members
    }

    @Test func transactionAndRenewalInfo_inAnyMemberOrder_readTheSame() throws {
        let verifier = JWSPKI.verifier()
        var transaction = JWSPKI.transaction()
        transaction.edits.set = [("offerType", .integer(1)), ("isUpgraded", .bool(true)), ("price", .integer(990))]
        for payload in [transaction.payload, JWSPKI.renewalInfo().payload] {
            let inOrder = verifier.verify(try JWSPKI.standard.sign(payload))
            let members = Self.members(payload)
            for reordered in [Array(members.reversed()), Array(members.dropFirst(3) + members.prefix(3))] {
                let result = verifier.verify(try JWSPKI.standard.sign(.object(reordered)))
                #expect(result.isValid)
                #expect(result.transaction == inOrder.transaction)
                #expect(result.renewalInfo == inOrder.renewalInfo)
                if let normalized = inOrder.transaction {
                    #expect(SignedTransaction(payload: .object(reordered)) == normalized)
                }
            }
        }
    }

    @Test func normalizedFromAValue_takesTheFirstOfRepeatedMembers() {
        let payload = JSONValue.object([
            ("productId", .string("first")), ("transactionId", .string("1")), ("productId", .string("second")),
        ])
        #expect(SignedTransaction(payload: payload).productID == "first")
        #expect(SignedRenewalInfo(payload: payload).productID == "first")
    }
}
