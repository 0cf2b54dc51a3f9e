#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AppStoreServerAPI
import Ledger
import ReceiptEngine
import ReceiptService
import StoreKitJWS

let notificationsUsage = """
    usage: receiptd notifications test --app BUNDLE [--environment Production|Sandbox] [--timeout SECONDS]
                                       [--config PATH]
      Asks Apple (App Store Server API, the app's "server_api" key) to send a TEST notification to the URL configured
      for that environment in App Store Connect, then waits (60 s by default) until it is in the ledger, delivered
      through that URL to POST /v1/notifications. Prints the round trip, or Apple's delivery attempts and their
      results when it does not arrive. The environment defaults to Production.
      exit status: 0 arrived; 1 did not arrive in time, Apple could not be reached or refused the key, or no store
      is configured; 2 usage error
    """

/// `receiptd notifications test`: checks the whole path from Apple to the ledger.
func runNotifications(_ arguments: [String]) -> Int32 {
    guard arguments.first == "test" else {
        if ["--help", "-h", "help"].contains(arguments.first ?? "") {
            print(notificationsUsage)
            return ExitStatus.success
        }
        printError("receiptd notifications: expected test\n\n\(notificationsUsage)")
        return ExitStatus.usage
    }
    let reader: ArgumentReader
    let environment: AppStoreEnvironment
    let timeout: Double
    do {
        reader = try ArgumentReader(Array(arguments.dropFirst()), options: ["--config", "--app", "--environment", "--timeout"])
        if reader.wantsHelp {
            print(notificationsUsage)
            return ExitStatus.success
        }
        try reader.expectPositional(atMost: 0)
        _ = try reader.required("--app")
        guard let chosen = AppStoreEnvironment(rawValue: reader.value("--environment") ?? "Production") else {
            throw UsageError("--environment: expected Production or Sandbox")
        }
        environment = chosen
        guard let seconds = Double(reader.value("--timeout") ?? "60"), seconds > 0, seconds <= 3600 else {
            throw UsageError("--timeout: expected seconds above 0, at most 3600")
        }
        timeout = seconds
    } catch {
        printError("receiptd notifications test: \(error)\n\n\(notificationsUsage)")
        return ExitStatus.usage
    }
    let bundleID = reader.value("--app") ?? ""
    guard
        let configuration = serverAPICommandConfiguration("notifications test", configPath: reader.value("--config")),
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

/// The uuid of a notification that passes verification; nil for anything else.
private func verifiedUUID(_ signedPayload: String, routes: ReceiptRoutes) -> String? {
    let result = routes.jwsVerifier.verify(signedPayload, requiredKind: .notification, at: Date())
    guard result.isValid else { return nil }
    return result.notification?.notificationUUID
}

private func arrived(_ uuid: String, in ledger: PurchaseLedger) -> Bool {
    (try? ledger.withStore { (store) throws(LedgerError) in try store.notification(uuid: uuid) != nil }) ?? false
}
