#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Ledger
import ReceiptService

// What the commands that talk to Apple (`store sync`, `lookup`, `notifications test`) share before they do.

/// The configuration those commands run on, with backfill off: a command exits when done, and a backfill queued
/// behind it would be cut off mid-request (`serve` backfills). nil once the reason is printed; the command exits 1.
func serverAPICommandConfiguration(_ command: String, configPath: String?) -> ServiceConfiguration? {
    var configuration: ServiceConfiguration
    do {
        configuration = try ServiceConfiguration.resolve(
            configPath: configPath, environment: ProcessInfo.processInfo.environment,
            fileExists: { FileManager.default.fileExists(atPath: $0) })
    } catch {
        printError("receiptd \(command): \(error)")
        return nil
    }
    configuration.serverAPI.backfill = false
    return configuration
}

/// The configured ledger, opened. `neededFor` says why the command cannot run without one: then a missing or
/// unusable ledger is printed and nil returned (exit 1). Without it, a command that only stores what it found goes
/// on and says that nothing is stored.
func serverAPICommandLedger(
    _ command: String, _ configuration: ServiceConfiguration, neededFor purpose: String?
) -> PurchaseLedger? {
    let ledger = configuration.makeLedger()
    if let purpose, !ledger.isConfigured {
        printError("receiptd \(command): no store configured: \(purpose)")
        return nil
    }
    do throws(LedgerError) {
        if let failure = try ledger.openNow() { throw failure }
    } catch {
        let description = "receiptd \(command): store \(configuration.storeDescription): \(error.message)"
        guard purpose == nil else {
            printError(description)
            return nil
        }
        printError(description + "; nothing is stored")
    }
    return ledger
}
