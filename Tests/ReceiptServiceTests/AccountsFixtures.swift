import JSONText
@testable import Ledger
import ReceiptEngine

@testable import ReceiptService

/// One app's catalogue and an account's facts built by hand, for the entitlement rules (issue 24).
enum Shop {
    static let bundleID = "com.example.app"
    static let day: Int64 = 86_400_000
    /// 2025-01-01T00:00:00Z.
    static let t0: Int64 = 1_735_689_600_000

    static let monthly = "com.example.pro.monthly"
    static let yearly = "com.example.pro.yearly"
    static let lifetime = "com.example.pro.lifetime"
    static let basic = "com.example.basic.monthly"
    static let noAds = "com.example.noads"
    static let monthPass = "com.example.pass.month"
    static let foreverPass = "com.example.pass.forever"
    static let coins = "com.example.coins"

    static let autoRenewable = "Auto-Renewable Subscription"
    static let nonConsumable = "Non-Consumable"
    static let consumable = "Consumable"
    static let nonRenewing = "Non-Renewing Subscription"

    static func configuration(
        environments: [ReceiptEnvironment] = [.production, .sandbox], restore: RestoreBehavior = .transfer
    ) -> ServiceConfiguration {
        var configuration = ServiceConfiguration()
        configuration.environments = environments
        configuration.apps = [
            .init(
                bundleID: bundleID,
                entitlements: [
                    "pro": [monthly, yearly, lifetime], "no_ads": [noAds, lifetime], "basic": [basic],
                    "pass": [monthPass, foreverPass], "coins": [coins],
                ],
                nonRenewingDurations: [monthPass: ISO8601Period(months: 1)], restoreBehavior: restore),
            .init(bundleID: "com.example.other", restoreBehavior: .keepWithOriginal),
        ]
        return configuration
    }

    static let rules = EntitlementRules(configuration: configuration())

    static func transaction(
        _ id: String, original: String? = nil, product: String = monthly, type: String? = autoRenewable,
        purchase: Int64, expires: Int64? = nil, signed: Int64? = nil, revoked: Int64? = nil, upgraded: Bool? = nil,
        ownership: String? = "PURCHASED", environment: String? = "Production", bundleID: String = bundleID,
        offer: [(key: String, value: JSONValue)] = []
    ) -> TransactionFacts {
        let original = original ?? id
        let signed = signed ?? purchase
        var payload: [(key: String, value: JSONValue)] = [
            ("transactionId", .string(id)), ("originalTransactionId", .string(original)),
            ("bundleId", .string(bundleID)), ("productId", .string(product)), ("purchaseDate", .integer(purchase)),
        ]
        if let type { payload.append(("type", .string(type))) }
        if let expires { payload.append(("expiresDate", .integer(expires))) }
        if let revoked { payload += [("revocationDate", .integer(revoked)), ("revocationReason", .integer(1))] }
        if let upgraded { payload.append(("isUpgraded", .bool(upgraded))) }
        if let ownership { payload.append(("inAppOwnershipType", .string(ownership))) }
        payload += offer
        if let environment { payload.append(("environment", .string(environment))) }
        payload.append(("signedDate", .integer(signed)))
        return TransactionFacts(
            transactionID: id, originalTransactionID: original, productID: product, bundleID: bundleID, type: type,
            purchaseDate: purchase, originalPurchaseDate: purchase, expiresDate: expires, revocationDate: revoked,
            revocationReason: revoked.map { _ in 1 }, inAppOwnershipType: ownership, environment: environment,
            isUpgraded: upgraded, signedDate: signed,
            payloadJSON: String(decoding: JSONValue.object(payload).serialized(), as: UTF8.self))
    }

    static func renewal(
        _ original: String, autoRenew: Bool = true, retry: Bool = false, grace: Int64? = nil, signed: Int64 = t0
    ) -> RenewalFacts {
        RenewalFacts(
            originalTransactionID: original, productID: monthly, autoRenewProductID: monthly, autoRenewStatus: autoRenew,
            isInBillingRetryPeriod: retry, gracePeriodExpiresDate: grace, environment: "Production", signedDate: signed,
            payloadJSON: #"{"originalTransactionId":"\#(original)"}"#)
    }

    /// The ledger's shape: newest first by purchase date, then expires date.
    static func facts(
        _ transactions: [TransactionFacts], renewal: RenewalFacts? = nil, updatedAt: Int64 = t0
    ) -> SubscriptionFacts {
        let sorted = transactions.sorted {
            (($0.purchaseDate ?? .min), ($0.expiresDate ?? .min)) > (($1.purchaseDate ?? .min), ($1.expiresDate ?? .min))
        }
        return SubscriptionFacts(
            originalTransactionID: sorted.first?.originalTransactionID ?? renewal?.originalTransactionID ?? "",
            transactions: sorted, renewal: renewal, lastNotification: nil, updatedAt: updatedAt)
    }

    /// A month of `product` bought at `purchase`, as its own original.
    static func month(
        _ id: String, product: String = monthly, purchase: Int64, months: Int64 = 1, revoked: Int64? = nil
    ) -> SubscriptionFacts {
        facts([transaction(id, product: product, purchase: purchase, expires: purchase + months * 30 * day, revoked: revoked)])
    }

    static func oneTime(
        _ id: String, product: String, type: String? = nonConsumable, purchase: Int64 = t0, revoked: Int64? = nil,
        ownership: String? = "PURCHASED", environment: String? = "Production"
    ) -> SubscriptionFacts {
        facts([
            transaction(
                id, product: product, type: type, purchase: purchase, revoked: revoked, ownership: ownership,
                environment: environment)
        ])
    }

    static func snapshot(
        _ owned: [SubscriptionFacts], transferredAway: [(facts: SubscriptionFacts, at: Int64)] = [],
        account: String = "user-42", updatedAt: Int64 = t0
    ) -> AccountSnapshot {
        var subscriptions: [String: SubscriptionFacts] = [:]
        for facts in owned + transferredAway.map(\.facts) { subscriptions[facts.originalTransactionID] = facts }
        let record = AccountRecord(
            account: account,
            links: owned.map { AccountLink(originalTransactionID: $0.originalTransactionID, linkedAt: t0, source: .purchase) },
            appAccountTokens: ["7e3fb20b-4cdb-47cc-936d-99d65f608138"],
            transfers: transferredAway.map {
                AccountTransfer(
                    originalTransactionID: $0.facts.originalTransactionID, fromAccount: account, toAccount: "user-7",
                    transferredAt: $0.at, source: .appAccountToken)
            },
            firstSeen: t0 - day, updatedAt: updatedAt)
        return AccountSnapshot(record: record, subscriptions: subscriptions)
    }

    /// `original`'s move from one account to another at `instant`.
    static func transfer(_ original: String, from: String, to: String, at instant: Int64) -> AccountTransfer {
        AccountTransfer(
            originalTransactionID: original, fromAccount: from, toAccount: to, transferredAt: instant,
            source: .purchase)
    }

    static func entitlements(
        _ snapshot: AccountSnapshot, at instant: Int64, rules: EntitlementRules = rules
    ) -> [String: Entitlement] {
        Dictionary(uniqueKeysWithValues: rules.entitlements(of: snapshot, at: instant).map { ($0.name, $0) })
    }
}
