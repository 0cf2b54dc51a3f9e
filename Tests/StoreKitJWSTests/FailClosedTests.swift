import Foundation
import JSONText
import ReceiptEngine
import ReceiptForge
import ReceiptService
import StoreKitJWS
import TestSupport
import Testing

/// Issue 18: signed data that names no environment or no app is refused as Apple's libraries refuse it
/// (INVALID_ENVIRONMENT, INVALID_APP_IDENTIFIER), whatever the configuration accepts.
struct FailClosedTests {
    let verifier = JWSPKI.verifier()
    /// Accepts every environment and any app: nothing configured can excuse a missing claim.
    let permissive = JWSPKI.verifier(apps: [], environments: [.production, .sandbox, .xcode])

    func sign(_ payload: JSONValue) throws -> String { try JWSPKI.standard.sign(payload) }

    @Test(arguments: SignedDataKind.jwsKinds)
    func noEnvironment_isEnvironmentNotAccepted(_ kind: SignedDataKind) throws {
        let payload: JSONValue
        switch kind {
        case .transaction:
            var blueprint = JWSPKI.transaction()
            blueprint.edits.omitted = ["environment"]
            payload = blueprint.payload
        case .renewalInfo:
            var blueprint = JWSPKI.renewalInfo()
            blueprint.edits.omitted = ["environment"]
            payload = blueprint.payload
        case .appTransaction:
            var blueprint = JWSPKI.appTransaction()
            blueprint.edits.omitted = ["receiptType"]
            payload = blueprint.payload
        case .notification:
            var blueprint = try JWSPKI.notification(type: "TEST")
            blueprint.signedTransactionInfo = nil
            blueprint.signedRenewalInfo = nil
            payload = removing("environment", inSection: "data", of: blueprint.payload)
        case .receipt: preconditionFailure("a receipt is not a JWS")
        }
        for candidate in [verifier, permissive] {
            let result = candidate.verify(try sign(payload), requiredKind: kind)
            #expect(result.error?.code == .environmentNotAccepted, "\(result.error?.description ?? "valid")")
            #expect(result.error?.reason == .missing)
            #expect(result.checks.environment == .failed)
            #expect(JWSResultJSON.value(of: result)["error"]?["reason"] == .string("missing"))
        }
    }

    @Test(arguments: ["Staging", "", "sandbox"])
    func unknownEnvironment_isEnvironmentNotAccepted(_ environment: String) throws {
        let result = permissive.verify(try sign(JWSPKI.transaction(environment: environment).payload))
        #expect(result.error?.code == .environmentNotAccepted)
        #expect(result.checks.environment == .failed)
    }

    @Test(arguments: NotificationBlueprint.Section.allCases, [true, false])
    func notificationNamingNoApp_isBundleIDMismatchMissing(_ section: NotificationBlueprint.Section, _ appsConfigured: Bool) throws {
        var blueprint = NotificationBlueprint(
            type: "TEST", bundleID: JWSPKI.bundleID, signedDate: JWSPKI.signedDate, environment: "Sandbox")
        blueprint.section = section
        let payload = removing("bundleId", inSection: section.rawValue, of: blueprint.payload)
        let result = (appsConfigured ? verifier : permissive).verify(try sign(payload))
        #expect(result.error?.code == .bundleIDMismatch, "\(result.error?.description ?? "valid")")
        #expect(result.error?.reason == .missing)
        #expect(result.checks.bundleID == .failed)
    }

    @Test func notificationWithNoSection_isRefused() throws {
        let payload = JSONValue.object([
            ("notificationType", .string("TEST")), ("notificationUUID", .string(UUID().uuidString.lowercased())),
            ("version", .string("2.0")), ("signedDate", .integer(milliseconds(JWSPKI.signedDate))),
        ])
        let result = permissive.verify(try sign(payload))
        #expect(result.kind == .notification)
        #expect(result.error?.code == .environmentNotAccepted || result.error?.code == .bundleIDMismatch)
        #expect(result.checks.bundleID == .failed)
        #expect(result.checks.environment == .failed)
    }

    @Test(arguments: [SignedDataKind.transaction, .appTransaction])
    func transactionNamingNoApp_isBundleIDMismatchMissing(_ kind: SignedDataKind) throws {
        let payload: JSONValue
        if kind == .transaction {
            var blueprint = JWSPKI.transaction()
            blueprint.edits.omitted = ["bundleId"]
            payload = blueprint.payload
        } else {
            var blueprint = JWSPKI.appTransaction(receiptType: "Sandbox")
            blueprint.edits.omitted = ["bundleId"]
            payload = blueprint.payload
        }
        let result = permissive.verify(try sign(payload))
        #expect(result.error?.code == .bundleIDMismatch)
        #expect(result.error?.reason == .missing)
    }

    @Test func nestedTransactionNamingNoEnvironment_failsTheNotification() throws {
        var blueprint = try JWSPKI.notification()
        var transaction = JWSPKI.transaction(environment: "Production")
        transaction.edits.omitted = ["environment"]
        blueprint.signedTransactionInfo = try sign(transaction.payload)
        let result = verifier.verify(try sign(blueprint.payload))
        #expect(result.error?.code == .environmentNotAccepted)
    }

    @Test func renewalInfo_stillNamesNoApp_andPasses() throws {
        let result = permissive.verify(try JWSPKI.forged(.renewalInfo))
        #expect(result.isValid)
        #expect(result.checks.bundleID == .skipped)
    }

    @Test func xcodeData_isStillVerifiedNotSkipped() throws {
        let trusted = JWSPKI.verifier([JWSPKI.xcode], environments: [.xcode])
        let result = trusted.verify(try JWSPKI.xcode.sign(JWSPKI.transaction(environment: "Xcode").payload))
        #expect(result.isValid)
        #expect(result.checks.signature == .passed)
        #expect(result.checks.environment == .passed)
    }

    private func removing(_ member: String, inSection section: String, of payload: JSONValue) -> JSONValue {
        guard case .object(let members) = payload else { return payload }
        return .object(members.map { entry in
            guard entry.key == section, case .object(let inner) = entry.value else { return entry }
            return (entry.key, .object(inner.filter { $0.key != member }))
        })
    }
}

func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

extension FailClosedTests {
    /// Apple's mock `wrongBundleId` notification names another app and no environment: Apple's libraries answer
    /// INVALID_APP_IDENTIFIER, judging the app first; so does this verifier, while both checks fail.
    @Test func wrongAppAndNoEnvironment_isBundleIDMismatchFirst() throws {
        let payload = JSONValue.object([
            ("data", .object([("bundleId", .string("com.example.wrong"))])),
            ("notificationUUID", .string(UUID().uuidString.lowercased())), ("notificationType", .string("TEST")),
            ("signedDate", .integer(milliseconds(JWSPKI.signedDate))),
        ])
        let result = verifier.verify(try sign(payload))
        #expect(result.error?.code == .bundleIDMismatch)
        #expect(result.checks.bundleID == .failed)
        #expect(result.checks.environment == .failed)
    }
}
