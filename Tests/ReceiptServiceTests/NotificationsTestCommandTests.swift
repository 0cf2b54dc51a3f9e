import JSONText
import Ledger
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService
@testable import receiptd

/// `receiptd notifications test` against the fake App Store Server API.
struct NotificationsTestCommandTests {
    static func testNotification(_ uuid: String) throws -> String {
        var blueprint = try JWSPKI.notification(type: "TEST", environment: "Production")
        blueprint.notificationUUID = uuid
        return try JWSPKI.standard.sign(blueprint.payload)
    }

    @Test func testNotification_thatReachedTheLedger_exitsZero() throws {
        let payload = try Self.testNotification("test-arrived")
        let scene = try StoreSyncTests.scene(history: [])
        try scene.fake.update([("testNotification", .string(payload))])
        // Apple's delivery through the configured URL, as POST /v1/notifications takes it.
        guard case .recorded = try StoreSyncTests.routes(scene).intake.takeNotification(payload) else {
            Issue.record("the test notification was not recorded")
            return
        }
        #expect(runReceiptd(["notifications", "test", "--app", JWSPKI.bundleID, "--config", scene.configPath, "--timeout", "5"]) == ExitStatus.success)
        let paths = try scene.fake.requests().map { $0["path"] }
        #expect(paths.first == .string("/inApps/v1/notifications/test"))
        #expect(paths.dropFirst().allSatisfy { $0 == .string("/inApps/v1/notifications/test/test-token-1") })
    }

    @Test func testNotification_thatNeverArrives_exitsOne() throws {
        let scene = try StoreSyncTests.scene(history: [])
        try scene.fake.update([("testNotification", .string(try Self.testNotification("test-lost")))])
        #expect(runReceiptd(["notifications", "test", "--app", JWSPKI.bundleID, "--config", scene.configPath, "--timeout", "0.5"]) == ExitStatus.failure)
    }

    @Test(arguments: [["test"], ["test", "--app", "a", "--environment", "Xcode"], ["test", "--app", "a", "--timeout", "0"], ["send"]])
    func notifications_usageErrors_exitTwo(arguments: [String]) {
        #expect(runReceiptd(["notifications"] + arguments) == ExitStatus.usage)
    }
}
