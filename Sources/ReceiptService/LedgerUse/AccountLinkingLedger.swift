#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Ledger
internal import CryptoFloor

extension ServiceConfiguration {
    /// The ledger `store` names (opened on first use), linking purchases to accounts under the apps'
    /// `restore_behavior` and entitlement rules; a stateless one without `store`. What every command that serves or
    /// stores opens.
    // TEMPORARY: `makeLedger()` in ServiceConfiguration.swift (another branch's file this round) should pass
    // `linkRules: accountLinkRules` to `openLedger` itself; then this goes and its callers call `makeLedger()`.
    public func makeAccountLinkingLedger() -> PurchaseLedger {
        let (timeout, linkRules) = (storeTimeout, accountLinkRules)
        switch store {
        case nil: return .none
        case .sqlite(let path)?:
            return PurchaseLedger(opening: { () throws(LedgerError) in
                // The folder is part of the default config (git-ignored): make it rather than fail the first run.
                let folder = path.deletingLastPathComponent
                if !folder.isEmpty { try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
                return try openLedger(.sqlite(path: path), timeout: timeout, linkRules: linkRules)
            }, isExclusiveWriter: true, storeTimeout: timeout)
        case .postgres(let connectionString)?:
            return PurchaseLedger(opening: { () throws(LedgerError) in
                try openLedger(.postgres(connectionString: connectionString), timeout: timeout, linkRules: linkRules)
            }, storeTimeout: timeout)
        }
    }
}
