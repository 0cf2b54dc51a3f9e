import Foundation
import JSONText
import ReceiptEngine
import ReceiptForge
import StoreKitJWS
import TestSupport
import Testing

/// A payload or header that names a member twice is refused (`duplicate_member`), however many members it has: other
/// verifiers would read the first or the last, and receiptd must not read it differently from them.
struct DuplicateMemberJWSTests {
    static func payload(members count: Int, repeating name: String?) -> JSONValue {
        guard case .object(var members) = JWSPKI.transaction().payload else { return .null }
        for index in 0..<count { members.append(("filler\(index)", .integer(Int64(index)))) }
        if let name { members.append((name, .string("again"))) }
        return .object(members)
    }

    @Test(arguments: [0, 40, 100])
    func repeatedPayloadMember_isMalformed(fillers: Int) throws {
        let verifier = JWSPKI.verifier()
        for name in ["bundleId", "environment", "signedDate", "filler0"] where fillers > 0 || name != "filler0" {
            let result = verifier.verify(try JWSPKI.standard.sign(Self.payload(members: fillers, repeating: name)))
            #expect(result.error?.code == .malformedJWS, "\(name)")
            #expect(result.error?.detail == .duplicateMember, "\(name)")
        }
        #expect(verifier.verify(try JWSPKI.standard.sign(Self.payload(members: fillers, repeating: nil))).isValid)
    }

    @Test func namesAlikeInLengthAndEnds_areNotRepeats() throws {
        let verifier = JWSPKI.verifier()
        guard case .object(var members) = JWSPKI.transaction().payload else { return }
        members += [("axb", .integer(1)), ("ayb", .integer(2)), ("azb", .integer(3))]
        #expect(verifier.verify(try JWSPKI.standard.sign(.object(members))).isValid)
    }

    @Test func repeatedHeaderMember_isMalformed() throws {
        var options = JWSSigningOptions()
        options.extraHeader = [("alg", .string("ES256"))]
        let result = JWSPKI.verifier().verify(try JWSPKI.standard.sign(JWSPKI.transaction().payload, options))
        #expect(result.error?.code == .malformedJWS)
        #expect(result.error?.detail == .duplicateMember)
    }
}
