#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AppStoreServerAPI
import ArgumentParser
import Ledger
import ReceiptEngine
import ReceiptService
import StoreKitJWS

/// `receiptd notifications`.
struct Notifications: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Checks App Store Server Notifications end to end.", subcommands: [NotificationsTest.self])
}

/// `receiptd notifications test`: checks the whole path from Apple to the ledger.
struct NotificationsTest: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Asks Apple for a TEST notification and waits until it is in the ledger.",
        discussion: """
            Asks Apple (App Store Server API, the app's "server_api" key) to send a TEST notification to the URL \
            configured for that environment in App Store Connect, then waits until it is in the ledger, delivered \
            through that URL to POST /v1/notifications. Prints the round trip, or Apple's delivery attempts and \
            their results when it does not arrive.
            Exit status: 0 arrived; 1 did not arrive in time, Apple could not be reached or refused the key, or no \
            store is configured; 2 a usage error.
            """ + Store.environment)

    @Option(help: ArgumentHelp("The app (a bundle id with a server_api key).", valueName: "bundle"))
    var app: String

    @Option(
        help: ArgumentHelp("Production or Sandbox.", valueName: "environment"),
        transform: { text in try parsed(text, expecting: "Production or Sandbox", AppStoreEnvironment.init(rawValue:)) })
    var environment: AppStoreEnvironment = .production

    @Option(
        help: ArgumentHelp("How long to wait for the notification, above 0 and at most 3600.", valueName: "seconds"),
        transform: { text in
            try parsed(text, expecting: "seconds above 0, at most 3600") { Double($0).flatMap { $0 > 0 && $0 <= 3600 ? $0 : nil } }
        })
    var timeout: Double = 60

    @OptionGroup var config: ConfigOption

    func validate() throws {
        guard !app.isEmpty else { throw ArgumentParser.ValidationError("--app: expected a bundle id") }
    }

    func execute() -> Int32 {
        let bundleID = app
        guard
            let configuration = serverAPICommandConfiguration("notifications test", configPath: config.config),
            let ledger = serverAPICommandLedger(
                "notifications test", configuration, neededFor: "the test notification could not be seen arriving")
        else { return ExitStatus.failure }
        let routes = ReceiptRoutes(
            configuration: configuration, validator: configuration.makeValidator(),
            jwsVerifier: configuration.makeJWSVerifier(), ledger: ledger, metrics: ServiceMetrics())
        do throws(AppStoreServerAPIError) {
            let client = try routes.serverAPIClients.client(bundleID: bundleID, environment: environment)
            let started = wallClockSeconds()
            let token = try client.requestTestNotification()
            print("\(bundleID) \(environment.rawValue): Apple accepted the request for a test notification")
            var status: TestNotificationStatus?
            repeat {
                // Apple's status has the signed notification once it has tried to send it; the ledger says it arrived.
                if let current = try? client.testNotificationStatus(token: token) {
                    status = current
                    if let uuid = verifiedUUID(current.signedPayload, routes: routes), arrived(uuid, in: ledger) {
                        let seconds = Int((wallClockSeconds() - started).rounded())
                        print("test notification \(uuid) arrived in the ledger after \(seconds) s")
                        return ExitStatus.success
                    }
                }
                sleepSeconds(min(2, timeout / 10))
            } while wallClockSeconds() - started < timeout
            let attempts = status?.sendAttempts.map { "\(syncDateText($0.attemptDate)) \($0.sendAttemptResult)" } ?? []
            printError(
                "receiptd notifications test: the test notification did not arrive within \(Int(timeout)) s; Apple's "
                    + "delivery attempts: " + (attempts.isEmpty ? "none yet" : attempts.joined(separator: ", ")))
            return ExitStatus.failure
        } catch {
            printError("receiptd notifications test: \(error)")
            return ExitStatus.failure
        }
    }
}

/// The uuid of a notification that passes verification; nil for anything else.
private func verifiedUUID(_ signedPayload: String, routes: ReceiptRoutes) -> String? {
    let result = routes.jwsVerifier.verify(signedPayload, requiredKind: .notification, at: Date())
    guard result.isValid else { return nil }
    return result.notification?.notificationUUID
}

private func arrived(_ uuid: String, in ledger: PurchaseLedger) -> Bool {
    (try? ledger.withStore { (store) throws(LedgerError) in try store.notification(uuid: uuid) != nil }) ?? false
}
