import Foundation
import JSONText
import ReceiptEngine
import ReceiptForge
import ReceiptService
import StoreKitJWS
import TestSupport
import Testing

/// Issue 18: every documented field reaches the normalized objects, snake_case, as Apple sends it: each field of the
/// reference's lists (`../shared/reference/STOREKIT2.md`, extended below where it lacks one) is forged, verified and
/// read back from the JSON answer.
@Suite(.enabled(if: StoreKitReference.text != nil, "../shared/reference/STOREKIT2.md is not here"))
struct FieldCoverageTests {
    static var reference: String? { StoreKitReference.text }

    /// Fields Apple documents that the reference's lists leave out.
    static let extensions: [SignedDataKind: [String]] = [
        .renewalInfo: ["advancedCommerceInfo", "commitmentInfo", "renewalBillingPlanType"],
        .notification: [
            "requestIdentifier", "succeededCount", "failedCount", "productId", "storefrontCountryCodes",
            "externalPurchaseId", "tokenCreationDate",
        ],
    ]

    /// Members that are not fields of the normalized object: the notification's sections (their fields are the
    /// object's) and the nested JWS (verified into their own objects).
    static let containers: Set = [
        "data", "summary", "appData", "externalPurchaseToken", "signedTransactionInfo", "signedRenewalInfo",
        "signedAppTransactionInfo",
    ]

    /// The backticked field names of one bullet of "## Payload fields".
    static func referenceFields(_ kind: SignedDataKind) -> [String] {
        guard let reference, let section = reference.range(of: "## Payload fields") else { return [] }
        let title = switch kind {
        case .transaction: "- **Transaction**"
        case .renewalInfo: "- **Renewal info**"
        case .appTransaction: "- **AppTransaction**"
        case .notification: "- **Notification**"
        case .receipt: preconditionFailure("a receipt is not a JWS")
        }
        let rest = reference[section.upperBound...]
        guard let start = rest.range(of: title) else { return [] }
        var bullet = rest[start.upperBound...]
        if let end = bullet.range(of: "\n- **") ?? bullet.range(of: "\n## ") { bullet = bullet[..<end.lowerBound] }
        let names = bullet.split(separator: "`", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 1 }.map { String($0.element) }
            .filter { $0.first?.isLowercase == true && $0.allSatisfy { $0.isLetter || $0.isNumber } }
            .filter { !$0.hasSuffix("DecodedPayload") && !containers.contains($0) }
        var seen = Set<String>()
        return names.filter { seen.insert($0).inserted }
    }

    static func fields(_ kind: SignedDataKind) -> [String] { referenceFields(kind) + (extensions[kind] ?? []) }

    static let cases: [(SignedDataKind, String)] = SignedDataKind.jwsKinds.flatMap { kind in fields(kind).map { (kind, $0) } }

    @Test func referenceListsAreRead() {
        #expect(Self.fields(.transaction).count >= 35)
        #expect(Self.fields(.renewalInfo).count >= 24)
        #expect(Self.fields(.appTransaction).count >= 13)
        #expect(Self.fields(.notification).count >= 18)
    }

    /// A date with milliseconds, as Apple's are: `2023-10-19T01:45:36.049Z`.
    static let someDate: Int64 = 1_697_679_936_049

    /// What to sign for a field, and what the answer must show.
    static func sample(_ field: String) -> (sent: JSONValue, shown: JSONValue) {
        switch field {
        case "environment", "receiptType": return (.string("Sandbox"), .string("Sandbox"))
        case "autoRenewStatus": return (.integer(1), .bool(true))
        case "isUpgraded", "isInBillingRetryPeriod": return (.bool(true), .bool(true))
        case "version": return (.string("2.0"), .string("2.0"))
        // The version check runs on it: one of the app's accepted versions.
        case "applicationVersion": return (.string("1.1"), .string("1.1"))
        case "quantity", "price", "revocationReason", "revocationPercentage", "offerType", "expirationIntent",
            "priceIncreaseStatus", "renewalPrice", "appAppleId", "versionExternalIdentifier", "status",
            "succeededCount", "failedCount":
            return (.integer(field == "appAppleId" ? JWSPKI.appAppleID : 3), .integer(field == "appAppleId" ? JWSPKI.appAppleID : 3))
        case "eligibleWinBackOfferIds", "storefrontCountryCodes":
            return (.array([.string("a1"), .string("b2")]), .array([.string("a1"), .string("b2")]))
        case "commitmentInfo", "advancedCommerceInfo":
            return (
                .object([("billingPeriodNumber", .integer(3)), ("items", .array([.object([("SKU", .string("s"))])]))]),
                .object([("billing_period_number", .integer(3)), ("items", .array([.object([("sku", .string("s"))])]))])
            )
        case "bundleId": return (.string(JWSPKI.bundleID), .string(JWSPKI.bundleID))
        case "signedDate", "receiptCreationDate":
            let sent = milliseconds(JWSPKI.signedDate)
            return (.integer(sent), JWSResultJSON.date(ReceiptDate(millisecondsSince1970: sent)))
        case "externalPurchaseId": return (.string("SANDBOX_e1"), .string("SANDBOX_e1"))
        case _ where field.hasSuffix("Date"):
            return (.integer(someDate), .string("2023-10-19T01:45:36.049Z"))
        default: return (.string("v-\(field)"), .string("v-\(field)"))
        }
    }

    /// `transactionId` → `transaction_id`, `notificationUUID` → `notification_uuid`.
    static func snakeCase(_ name: String) -> String {
        var out = ""
        let characters = Array(name)
        for (index, character) in characters.enumerated() {
            if character.isUppercase, index > 0,
                !characters[index - 1].isUppercase
                    || (index + 1 < characters.count && characters[index + 1].isLowercase)
            {
                out.append("_")
            }
            out.append(character.lowercased())
        }
        return out
    }

    static func payload(_ kind: SignedDataKind, setting field: String, to value: JSONValue) -> JSONValue {
        func with(_ members: JSONValue, _ key: String, _ value: JSONValue) -> JSONValue {
            guard case .object(var list) = members else { return members }
            if let index = list.firstIndex(where: { $0.key == key }) { list[index].value = value } else { list.append((key, value)) }
            return .object(list)
        }
        switch kind {
        case .transaction: return with(JWSPKI.transaction().payload, field, value)
        case .renewalInfo: return with(JWSPKI.renewalInfo().payload, field, value)
        case .appTransaction: return with(JWSPKI.appTransaction(receiptType: "Sandbox").payload, field, value)
        case .notification:
            let sectionFields: [NotificationBlueprint.Section: Set<String>] = [
                .summary: ["requestIdentifier", "succeededCount", "failedCount", "productId", "storefrontCountryCodes"],
                .externalPurchaseToken: ["externalPurchaseId", "tokenCreationDate"],
            ]
            let section = sectionFields.first { $0.value.contains(field) }?.key ?? .data
            var blueprint = NotificationBlueprint(
                type: "TEST", bundleID: JWSPKI.bundleID, signedDate: JWSPKI.signedDate, environment: "Sandbox")
            blueprint.appAppleID = JWSPKI.appAppleID
            blueprint.section = section
            let topLevel: Set = ["notificationType", "subtype", "notificationUUID", "version", "signedDate"]
            if topLevel.contains(field) { return with(blueprint.payload, field, value) }
            let payload = blueprint.payload
            return with(payload, section.rawValue, with(payload[section.rawValue] ?? .object([]), field, value))
        case .receipt: preconditionFailure("a receipt is not a JWS")
        }
    }

    static func objectKey(_ kind: SignedDataKind) -> String {
        kind.rawValue
    }

    @Test(arguments: cases)
    func field_isForgedVerifiedAndShown(_ kind: SignedDataKind, _ field: String) throws {
        let verifier = JWSPKI.verifier(environments: [.production, .sandbox])
        let sample = Self.sample(field)
        let jws = try JWSPKI.standard.sign(Self.payload(kind, setting: field, to: sample.sent))
        let result = verifier.verify(jws, requiredKind: kind)
        #expect(result.isValid, "\(field): \(result.error?.description ?? "")")
        let object = JWSResultJSON.value(of: result)[Self.objectKey(kind)]
        let key = Self.snakeCase(field)
        #expect(object?.keys.contains(key) == true, "\(kind.rawValue) lacks \(key)")
        #expect(object?[key] == sample.shown, "\(kind.rawValue).\(key)")
    }

    @Test func datesKeepMillisecondsOnlyWhenTheyHaveThem() {
        #expect(JWSResultJSON.date(ReceiptDate(millisecondsSince1970: Self.someDate)) == .string("2023-10-19T01:45:36.049Z"))
        #expect(JWSResultJSON.date(ReceiptDate(millisecondsSince1970: 1_697_679_936_000)) == .string("2023-10-19T01:45:36Z"))
        #expect(JWSResultJSON.date(ReceiptDate(millisecondsSince1970: 1_697_679_936_005)) == .string("2023-10-19T01:45:36.005Z"))
        #expect(JWSResultJSON.date(ReceiptDate(millisecondsSince1970: -1)) == .string("1969-12-31T23:59:59.999Z"))
    }
}

/// The facts file beside the fixtures, read in place.
enum StoreKitReference {
    static let url = AppleFixtures.directory.deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("reference/STOREKIT2.md")
    static let text: String? = try? String(contentsOf: url, encoding: .utf8)
}

extension JSONValue {
    fileprivate var keys: [String] {
        if case .object(let members) = self { return members.map(\.key) }
        return []
    }
}
