#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import JSONText
import Ledger

// TEMPORARY until branch accounts-rules lands: its AccountReport and AccountLinkRules(configuration:) replace these.
struct AccountReport {
    struct Entitlement {
        var name: String
        var isActive: Bool
        var until: Int64?
        var why: String
    }

    var json: JSONValue
    var entitlements: [Entitlement] = []

    init(snapshot: AccountSnapshot, configuration: ServiceConfiguration, at: Date) {
        json = .object([
            ("account", .string(snapshot.record.account)), ("entitlements", .object([])),
            ("app_account_tokens", .array(snapshot.record.appAccountTokens.map(JSONValue.string))),
        ])
    }
}

extension AccountLinkRules {
    init(configuration: ServiceConfiguration) { self = .transferAlways }
}
