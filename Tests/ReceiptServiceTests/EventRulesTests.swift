import JSONText
@testable import Ledger
import ReceiptEngine
import Testing

@testable import ReceiptService

/// Ledger changes built by hand from forged facts, for the events rules (issue 25).
enum Changes {
    typealias S = Shop
    static let day = Shop.day
    static let t0 = Shop.t0
    /// When the write happens: a day into the first month.
    static let now = t0 + day
    static let appAppleID: Int64 = 1_234_567_890

    static func configuration(webhooks: [Webhook] = [webhook("backend")]) -> ServiceConfiguration {
        var configuration = Shop.configuration()
        configuration.apps[0].appAppleID = appAppleID
        configuration.webhooks = webhooks
        return configuration
    }

    static func webhook(
        _ name: String, events: Set<String>? = nil, apps: Set<String>? = nil, environments: Set<String>? = nil
    ) -> Webhook {
        Webhook(
            name: name, url: "https://backend.example/hooks", secretFile: "/dev/null", secret: WebhookSecret([1]),
            events: events, apps: apps, environments: environments)
    }

    static let rules = EventRules(configuration: configuration())

    static func notification(_ type: String, _ subtype: String? = nil, uuid: String = "0b6f2e1a-n1") -> LedgerChangeCause {
        .notification(NotificationSummary(uuid: uuid, type: type, subtype: subtype, signedDate: now))
    }

    /// A change of original `before`/`after` owned by `owner` (before and after), who owns `others` too.
    static func change(
        _ cause: LedgerChangeCause, before: SubscriptionFacts?, after: SubscriptionFacts?, owner: String? = nil,
        others: [SubscriptionFacts] = [], time: Int64 = now
    ) -> LedgerChange {
        let original = after?.originalTransactionID ?? before?.originalTransactionID ?? ""
        var accountsBefore: [String: [SubscriptionFacts]] = [:]
        var accountsAfter: [String: [SubscriptionFacts]] = [:]
        if let owner {
            accountsBefore[owner] = others + (before.map { [$0] } ?? [])
            accountsAfter[owner] = others + (after.map { [$0] } ?? [])
        }
        return LedgerChange(
            cause: cause, originalTransactionID: original, before: before, after: after, accountBefore: owner,
            accountAfter: owner, accountsBefore: accountsBefore, accountsAfter: accountsAfter, time: time)
    }

    // A monthly subscription, original "1000": its first month, its renewal "1001", and renewal infos.
    static let first = S.transaction("1000", purchase: t0 - 40 * day, expires: t0 - 10 * day)
    static let renewed = S.transaction("1001", original: "1000", purchase: t0 - 10 * day, expires: t0 + 20 * day)
    static let renewedRefunded = S.transaction(
        "1001", original: "1000", purchase: t0 - 10 * day, expires: t0 + 20 * day, signed: now, revoked: now - 1000)
    static func renewal(autoRenew: Bool = true, retry: Bool = false, grace: Int64? = nil, signed: Int64 = t0)
        -> RenewalFacts
    {
        S.renewal("1000", autoRenew: autoRenew, retry: retry, grace: grace, signed: signed)
    }
    static let oneMonth = S.facts([first], renewal: renewal())
    static let twoMonths = S.facts([first, renewed], renewal: renewal())
    static let lifetime = S.oneTime("2000", product: S.lifetime)
    static let coins = S.oneTime("3000", product: S.coins, type: S.consumable)

    /// The subscription in billing retry after its second month: `renewed` expired at t0 + 20 days.
    static let lapsedAt = t0 + 20 * day
}

/// The mapping table of docs/events.md, row by row, then dedupe, entitlements, bodies and filters.
struct EventRulesTests {
    typealias C = Changes
    typealias S = Shop

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var change: LedgerChange
        /// Each draft's type and dedupe key, in order.
        var expected: [String]
        var testDescription: String { name }
    }

    static let rows: [Row] = {
        let (day, now, t0) = (C.day, C.now, C.t0)
        let refunded = S.facts([C.first, C.renewedRefunded], renewal: C.renewal())
        let cancelled = S.facts([C.first, C.renewed], renewal: C.renewal(autoRenew: false, signed: now))
        let retrying = S.facts([C.first, C.renewed], renewal: C.renewal(retry: true, signed: C.lapsedAt + day))
        let inGrace = S.facts(
            [C.first, C.renewed], renewal: C.renewal(retry: true, grace: C.lapsedAt + 16 * day, signed: C.lapsedAt))
        let recovered = S.transaction("1002", original: "1000", purchase: C.lapsedAt + 2 * day, expires: t0 + 52 * day)
        let familyRevoked = S.facts([
            S.transaction("4000", product: S.noAds, type: "Non-Consumable", purchase: t0, revoked: now, ownership: "FAMILY_SHARED")
        ])
        let family = S.facts([
            S.transaction("4000", product: S.noAds, type: "Non-Consumable", purchase: t0, ownership: "FAMILY_SHARED")
        ])
        let unchanged: (LedgerChangeCause) -> LedgerChange = { C.change($0, before: C.twoMonths, after: C.twoMonths) }
        return [
            Row(name: "receipt: first purchase of a subscription",
                change: C.change(.facts(.receipt), before: nil, after: S.facts([C.first])),
                expected: ["INITIAL_PURCHASE:1000"]),
            Row(name: "SUBSCRIBED INITIAL_BUY", change: C.change(
                C.notification("SUBSCRIBED", "INITIAL_BUY"), before: nil, after: C.oneMonth),
                expected: ["INITIAL_PURCHASE:1000"]),
            Row(name: "DID_RENEW", change: C.change(C.notification("DID_RENEW"), before: C.oneMonth, after: C.twoMonths),
                expected: ["RENEWAL:1001"]),
            Row(name: "SUBSCRIBED RESUBSCRIBE", change: C.change(
                C.notification("SUBSCRIBED", "RESUBSCRIBE"), before: C.oneMonth, after: C.twoMonths),
                expected: ["RENEWAL:1001"]),
            Row(name: "DID_RENEW BILLING_RECOVERY: a renewal, the retry's end no event", change: C.change(
                C.notification("DID_RENEW", "BILLING_RECOVERY"), before: retrying,
                after: S.facts([C.first, C.renewed, recovered], renewal: C.renewal(signed: C.lapsedAt + 2 * day))),
                expected: ["RENEWAL:1002"]),
            Row(name: "backfill of a history: each purchase, oldest first", change: C.change(
                .facts(.serverAPI), before: nil, after: C.twoMonths),
                expected: ["INITIAL_PURCHASE:1000", "RENEWAL:1001"]),
            Row(name: "ONE_TIME_CHARGE", change: C.change(C.notification("ONE_TIME_CHARGE"), before: nil, after: C.coins),
                expected: ["ONE_TIME_PURCHASE:3000"]),
            Row(name: "JWS: a non-consumable", change: C.change(.facts(.jws), before: nil, after: C.lifetime),
                expected: ["ONE_TIME_PURCHASE:2000"]),
            Row(name: "REFUND", change: C.change(C.notification("REFUND"), before: C.twoMonths, after: refunded),
                expected: ["REFUND:1001:\(now - 1000)"]),
            Row(name: "REVOKE (family sharing withdrawn)", change: C.change(
                C.notification("REVOKE"), before: family, after: familyRevoked),
                expected: ["REFUND:4000:\(now)"]),
            Row(name: "REFUND_REVERSED", change: C.change(
                C.notification("REFUND_REVERSED"), before: refunded, after: C.twoMonths),
                expected: ["REFUND_REVERSED:1001:\(now - 1000)"]),
            Row(name: "refund first learned with its purchase", change: C.change(
                C.notification("REFUND"), before: C.oneMonth, after: refunded),
                expected: ["RENEWAL:1001", "REFUND:1001:\(now - 1000)"]),
            Row(name: "DID_CHANGE_RENEWAL_STATUS AUTO_RENEW_DISABLED", change: C.change(
                C.notification("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED"), before: C.twoMonths,
                after: cancelled),
                expected: ["CANCELLATION:1000:\(now)"]),
            Row(name: "DID_CHANGE_RENEWAL_STATUS AUTO_RENEW_ENABLED", change: C.change(
                C.notification("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED"), before: cancelled,
                after: S.facts([C.first, C.renewed], renewal: C.renewal(signed: now + 1))),
                expected: ["UNCANCELLATION:1000:\(now + 1)"]),
            Row(name: "renewal info first learned off while active", change: C.change(
                .facts(.jws), before: S.facts([C.first, C.renewed]), after: cancelled),
                expected: ["CANCELLATION:1000:\(now)"]),
            Row(name: "renewal info first learned off after it ended: nothing", change: C.change(
                .facts(.serverAPI), before: S.facts([C.first, C.renewed]), after: cancelled, time: t0 + 60 * day),
                expected: []),
            Row(name: "DID_FAIL_TO_RENEW", change: C.change(
                C.notification("DID_FAIL_TO_RENEW"), before: C.twoMonths, after: retrying, time: C.lapsedAt + day),
                expected: ["BILLING_ISSUE:1000:\(C.lapsedAt)"]),
            Row(name: "DID_FAIL_TO_RENEW GRACE_PERIOD: a billing issue too", change: C.change(
                C.notification("DID_FAIL_TO_RENEW", "GRACE_PERIOD"), before: C.twoMonths, after: inGrace,
                time: C.lapsedAt + day),
                expected: ["BILLING_ISSUE:1000:\(C.lapsedAt)", "GRACE_PERIOD_STARTED:1000:\(C.lapsedAt + 16 * day)"]),
            Row(name: "DID_CHANGE_RENEWAL_PREF UPGRADE", change: unchanged(C.notification("DID_CHANGE_RENEWAL_PREF", "UPGRADE")),
                expected: ["PRODUCT_CHANGE:0b6f2e1a-n1"]),
            Row(name: "DID_CHANGE_RENEWAL_PREF DOWNGRADE", change: unchanged(C.notification("DID_CHANGE_RENEWAL_PREF", "DOWNGRADE")),
                expected: ["PRODUCT_CHANGE:0b6f2e1a-n1"]),
            Row(name: "EXPIRED VOLUNTARY", change: unchanged(C.notification("EXPIRED", "VOLUNTARY")),
                expected: ["EXPIRATION:0b6f2e1a-n1"]),
            Row(name: "GRACE_PERIOD_EXPIRED", change: unchanged(C.notification("GRACE_PERIOD_EXPIRED")),
                expected: ["EXPIRATION:0b6f2e1a-n1"]),
            Row(name: "CONSUMPTION_REQUEST", change: unchanged(C.notification("CONSUMPTION_REQUEST")),
                expected: ["CONSUMPTION_REQUEST:0b6f2e1a-n1"]),
            Row(name: "PRICE_INCREASE PENDING", change: unchanged(C.notification("PRICE_INCREASE", "PENDING")),
                expected: ["PRICE_INCREASE:0b6f2e1a-n1"]),
            Row(name: "OFFER_REDEEMED with its new transaction", change: C.change(
                C.notification("OFFER_REDEEMED", "RESUBSCRIBE"), before: C.oneMonth, after: C.twoMonths),
                expected: ["RENEWAL:1001", "OFFER_REDEEMED:0b6f2e1a-n1"]),
            // Keyed by the subscription and its new expiry, as receiptd's own extension of it is.
            Row(name: "RENEWAL_EXTENDED", change: unchanged(C.notification("RENEWAL_EXTENDED")),
                expected: ["RENEWAL_EXTENDED:1000:1737417600000"]),
            Row(name: "TEST", change: unchanged(C.notification("TEST")), expected: ["TEST:0b6f2e1a-n1"]),
            Row(name: "REFUND_DECLINED: nothing", change: unchanged(C.notification("REFUND_DECLINED")), expected: []),
            Row(name: "METADATA_UPDATE: nothing", change: unchanged(C.notification("METADATA_UPDATE")), expected: []),
            Row(name: "RENEWAL_EXTENSION SUMMARY: nothing",
                change: unchanged(C.notification("RENEWAL_EXTENSION", "SUMMARY")), expected: []),
            Row(name: "EXTERNAL_PURCHASE_TOKEN: nothing",
                change: unchanged(C.notification("EXTERNAL_PURCHASE_TOKEN", "UNREPORTED")), expected: []),
            Row(name: "a type Apple adds later: nothing", change: unchanged(C.notification("SOMETHING_NEW")), expected: []),
            Row(name: "SUBSCRIBED already learned from a receipt: nothing",
                change: unchanged(C.notification("SUBSCRIBED", "INITIAL_BUY")), expected: []),
            Row(name: "a receipt validated again: nothing", change: unchanged(.facts(.receipt)), expected: []),
            Row(name: "a newer signature of the same renewal info: nothing", change: C.change(
                .facts(.jws), before: C.twoMonths, after: S.facts([C.first, C.renewed], renewal: C.renewal(signed: now))),
                expected: []),
        ]
    }()

    @Test(arguments: rows) func mappingTable(_ row: Row) {
        let drafts = C.rules.events(row.change)
        #expect(drafts.map(\.dedupeKey) == row.expected)
        #expect(drafts.allSatisfy { $0.dedupeKey.hasPrefix($0.type + ":") })
        #expect(drafts.allSatisfy { EventType(rawValue: $0.type) != nil })
    }

    // MARK: - One fact, one event

    @Test func renewalLearnedByReceiptThenNotification_hasOneKey_andTheSecondLearningNoEvent() {
        let byReceipt = C.rules.events(C.change(.facts(.receipt), before: C.oneMonth, after: C.twoMonths))
        let byNotification = C.rules.events(C.change(C.notification("DID_RENEW"), before: C.oneMonth, after: C.twoMonths))
        #expect(byReceipt.map(\.dedupeKey) == ["RENEWAL:1001"])
        #expect(byNotification.map(\.dedupeKey) == byReceipt.map(\.dedupeKey))
        let thenNotification = C.rules.events(
            C.change(C.notification("DID_RENEW"), before: C.twoMonths, after: C.twoMonths))
        #expect(thenNotification.isEmpty)
    }

    @Test func refundLearnedByJWSOrNotification_hasOneKey() {
        let refunded = S.facts([C.first, C.renewedRefunded], renewal: C.renewal())
        let byJWS = C.rules.events(C.change(.facts(.jws), before: C.twoMonths, after: refunded))
        let byNotification = C.rules.events(C.change(C.notification("REFUND"), before: C.twoMonths, after: refunded))
        let bySync = C.rules.events(C.change(.facts(.serverAPI), before: C.twoMonths, after: refunded))
        #expect(byJWS.map(\.dedupeKey) == ["REFUND:1001:\(C.now - 1000)"])
        #expect(byNotification.map(\.dedupeKey) == byJWS.map(\.dedupeKey))
        #expect(bySync.map(\.dedupeKey) == byJWS.map(\.dedupeKey))
    }

    @Test func billingIssueLearnedByJWSThenNotification_hasOneKey() {
        let retrying = S.facts([C.first, C.renewed], renewal: C.renewal(retry: true, signed: C.lapsedAt + C.day))
        let laterSignature = S.facts([C.first, C.renewed], renewal: C.renewal(retry: true, signed: C.lapsedAt + 2))
        let byJWS = C.rules.events(C.change(.facts(.jws), before: C.twoMonths, after: retrying))
        let byNotification = C.rules.events(
            C.change(C.notification("DID_FAIL_TO_RENEW"), before: C.twoMonths, after: laterSignature))
        #expect(byJWS.map(\.dedupeKey) == ["BILLING_ISSUE:1000:\(C.lapsedAt)"])
        #expect(byNotification.map(\.dedupeKey) == byJWS.map(\.dedupeKey))
    }

    @Test func notificationKinds_areKeyedByTheNotification_soADifferentNotificationIsAnotherEvent() {
        let first = C.rules.events(C.change(C.notification("EXPIRED", uuid: "a"), before: C.twoMonths, after: C.twoMonths))
        let second = C.rules.events(C.change(C.notification("EXPIRED", uuid: "b"), before: C.twoMonths, after: C.twoMonths))
        #expect(first.map(\.dedupeKey) == ["EXPIRATION:a"])
        #expect(second.map(\.dedupeKey) == ["EXPIRATION:b"])
    }

    // MARK: - Accounts

    @Test func refundOfAnOwnedSubscription_changesTheAccountsEntitlements() throws {
        let refunded = S.facts([C.first, C.renewedRefunded], renewal: C.renewal())
        let drafts = C.rules.events(
            C.change(C.notification("REFUND"), before: C.twoMonths, after: refunded, owner: "user-42", others: [C.coins]))
        #expect(drafts.map(\.type) == ["REFUND", "ENTITLEMENTS_CHANGED"])
        #expect(drafts.allSatisfy { $0.account == "user-42" })
        #expect(drafts.last?.dedupeKey == "ENTITLEMENTS_CHANGED:user-42:1000:\(C.now)")
        let body = try Self.body(#require(drafts.last))
        #expect(body["entitlements"] == .array([]))
        #expect(body["entitlements_before"] == .array([.string("pro")]))
        #expect(try Self.body(drafts[0])["entitlements"] == .array([]))
    }

    @Test func transfer_isOnTheNewAccountsStream_andChangesBothAccounts() throws {
        let change = LedgerChange(
            cause: .transfer(.purchase, number: 3), originalTransactionID: "1000", before: C.twoMonths,
            after: C.twoMonths, accountBefore: "user-7", accountAfter: "user-42",
            accountsBefore: ["user-7": [C.twoMonths, C.coins], "user-42": []],
            accountsAfter: ["user-7": [C.coins], "user-42": [C.twoMonths]], time: C.now)
        let drafts = C.rules.events(change)
        #expect(drafts.map(\.dedupeKey) == [
            "TRANSFER:1000:3", "ENTITLEMENTS_CHANGED:user-42:1000:\(C.now)", "ENTITLEMENTS_CHANGED:user-7:1000:\(C.now)",
        ])
        #expect(drafts.map(\.account) == ["user-42", "user-42", "user-7"])
        let transfer = try Self.body(drafts[0])
        #expect(transfer["previous_account"] == .string("user-7"))
        #expect(transfer["entitlements"] == .array([.string("pro")]))
        let lost = try Self.body(drafts[2])
        #expect(lost["account"] == .string("user-7"))
        #expect(lost["entitlements"] == .array([]))
        #expect(lost["entitlements_before"] == .array([.string("pro")]))
        let gained = try Self.body(drafts[1])
        #expect(gained["entitlements_before"] == .array([]))
        #expect(gained["entitlements"] == .array([.string("pro")]))
    }

    @Test func transferBetweenAccountsWhoseEntitlementsStayTheSame_isATransferAlone() {
        let change = LedgerChange(
            cause: .transfer(.claim, number: 1), originalTransactionID: "3000", before: C.coins, after: C.coins,
            accountBefore: "user-7", accountAfter: "user-42", accountsBefore: ["user-7": [C.coins], "user-42": []],
            accountsAfter: ["user-7": [], "user-42": [C.coins]], time: C.now)
        #expect(C.rules.events(change).map(\.dedupeKey) == ["TRANSFER:3000:1"])
    }

    @Test func linkToAnAccount_changesItsEntitlements() {
        let change = LedgerChange(
            cause: .link(.appAccountToken), originalTransactionID: "1000", before: C.twoMonths, after: C.twoMonths,
            accountBefore: nil, accountAfter: "user-42", accountsBefore: ["user-42": []],
            accountsAfter: ["user-42": [C.twoMonths]], time: C.now)
        let drafts = C.rules.events(change)
        #expect(drafts.map(\.dedupeKey) == ["ENTITLEMENTS_CHANGED:user-42:1000:\(C.now)"])
    }

    /// The ledger gives one change per touched original, each seeing the whole account before and after the write.
    @Test func writeTouchingTwoOriginalsOfOneAccount_givesOneEntitlementsChanged() throws {
        let changes = [(C.twoMonths, "1000"), (C.lifetime, "2000")].map { facts, original in
            LedgerChange(
                cause: .facts(.receipt), originalTransactionID: original, before: nil, after: facts, accountBefore: nil,
                accountAfter: "user-42", accountsBefore: ["user-42": []],
                accountsAfter: ["user-42": [C.twoMonths, C.lifetime]], time: C.now)
        }
        #expect(C.rules.events(changes[0]).map(\.dedupeKey) == [
            "INITIAL_PURCHASE:1000", "RENEWAL:1001", "ENTITLEMENTS_CHANGED:user-42:1000:\(C.now)",
        ])
        #expect(C.rules.events(changes[1]).map(\.dedupeKey) == ["ONE_TIME_PURCHASE:2000"])
        let body = try Self.body(#require(C.rules.events(changes[0]).last))
        #expect(body["entitlements"] == .array([.string("no_ads"), .string("pro")]))
        #expect(body["entitlements_before"] == .array([]))
    }

    @Test func renewalOfAnUnownedSubscription_isOnTheOriginalsStream_withItsEntitlementsAlone() throws {
        let drafts = C.rules.events(C.change(C.notification("DID_RENEW"), before: C.oneMonth, after: C.twoMonths))
        let draft = try #require(drafts.first)
        #expect(draft.account == nil)
        #expect(draft.originalTransactionID == "1000")
        let body = try Self.body(draft)
        #expect(body["account"] == .null)
        #expect(body["entitlements"] == .array([.string("pro")]))
    }

    // MARK: - Bodies

    static let members = [
        "environment", "app", "account", "entitlements", "product_id", "original_transaction_id", "transaction",
        "subscription", "notification",
    ]

    static func body(_ draft: EventDraft) throws -> JSONValue {
        try JSONValue(parsing: Array(("{" + draft.bodyMembers + "}").utf8))
    }

    static func keys(_ body: JSONValue) -> [String] {
        guard case .object(let members) = body else { return [] }
        return members.map(\.key)
    }

    @Test func body_hasExactlyTheIssuesMembers_inOrder_andShowsWhatTheRoutesShow() throws {
        let drafts = C.rules.events(
            C.change(C.notification("DID_RENEW", "BILLING_RECOVERY"), before: C.oneMonth, after: C.twoMonths,
                owner: "user-42"))
        // Its first month had ended: the renewal gives the account "pro" again.
        #expect(drafts.map(\.type) == ["RENEWAL", "ENTITLEMENTS_CHANGED"])
        let draft = try #require(drafts.first)
        #expect(draft.bodyMembers.hasPrefix(#""environment":"#))
        let body = try Self.body(draft)
        #expect(Self.keys(body) == Self.members)
        #expect(body["environment"] == .string("Production"))
        #expect(body["app"] == .object([("bundle_id", .string(S.bundleID)), ("app_apple_id", .integer(C.appAppleID))]))
        #expect(body["account"] == .string("user-42"))
        #expect(body["entitlements"] == .array([.string("pro")]))
        #expect(body["product_id"] == .string(S.monthly))
        #expect(body["original_transaction_id"] == .string("1000"))
        #expect(body["transaction"] == ReceiptRoutes.transactionJSON(C.renewed))
        #expect(body["subscription"] == ReceiptRoutes.subscriptionJSON(C.twoMonths, at: C.now))
        #expect(body["subscription"]?["status"] == .string("active"))
        #expect(body["notification"] == .object([
            ("uuid", .string("0b6f2e1a-n1")), ("type", .string("DID_RENEW")), ("subtype", .string("BILLING_RECOVERY")),
        ]))
        #expect(draft.bundleID == S.bundleID)
        #expect(draft.environment == "Production")
    }

    @Test func body_ofAOneTimePurchaseFromAReceipt_hasNoSubscriptionNoNotification_andAnUnknownAppsIdNull() throws {
        var configuration = C.configuration()
        configuration.apps[0].appAppleID = nil
        let drafts = EventRules(configuration: configuration).events(
            C.change(.facts(.receipt), before: nil, after: C.lifetime))
        let body = try Self.body(#require(drafts.first))
        #expect(Self.keys(body) == Self.members)
        #expect(body["subscription"] == .null)
        #expect(body["notification"] == .null)
        #expect(body["app"]?["app_apple_id"] == .null)
        #expect(body["transaction"]?["transaction_id"] == .string("2000"))
        #expect(body["entitlements"] == .array([.string("no_ads"), .string("pro")]))
    }

    @Test func body_ofARefundShowsTheRefundedTransaction_notTheNewest() throws {
        let refundedFirst = S.transaction("1000", purchase: C.t0 - 40 * C.day, expires: C.t0 - 10 * C.day, revoked: C.now)
        let drafts = C.rules.events(
            C.change(C.notification("REFUND"), before: C.twoMonths, after: S.facts([refundedFirst, C.renewed], renewal: C.renewal())))
        #expect(drafts.map(\.type) == ["REFUND"])
        let body = try Self.body(#require(drafts.first))
        #expect(body["transaction"]?["transaction_id"] == .string("1000"))
        #expect(body["transaction"]?["revocation_date"] != .null)
    }

    @Test func bodyOfATransfer_addsPreviousAccount_andOfEntitlementsChanged_entitlementsBefore() throws {
        let change = LedgerChange(
            cause: .transfer(.purchase, number: 1), originalTransactionID: "1000", before: C.twoMonths,
            after: C.twoMonths, accountBefore: "user-7", accountAfter: "user-42",
            accountsBefore: ["user-7": [C.twoMonths], "user-42": []],
            accountsAfter: ["user-7": [], "user-42": [C.twoMonths]], time: C.now)
        let bodies = try C.rules.events(change).map(Self.body)
        #expect(bodies.map(Self.keys) == [
            Self.members + ["previous_account"], Self.members + ["entitlements_before"],
            Self.members + ["entitlements_before"],
        ])
    }

    // MARK: - Configuration, filters, time

    @Test func withoutWebhooks_theRulesAreNone() {
        var configuration = C.configuration()
        configuration.webhooks = []
        #expect(configuration.outboxRules.isActive == false)
        #expect(configuration.outboxRules.events(C.change(.facts(.receipt), before: nil, after: C.oneMonth)).isEmpty)
        #expect(C.configuration().outboxRules.isActive)
    }

    @Test func outboxRules_giveTheRulesEvents() {
        let change = C.change(.facts(.receipt), before: nil, after: C.oneMonth)
        #expect(C.configuration().outboxRules.events(change) == C.rules.events(change))
    }

    @Test func subscribers_areTheWebhooksWhoseFiltersPass() {
        let rules = C.configuration(webhooks: [
            C.webhook("all"), C.webhook("refunds", events: ["REFUND"]), C.webhook("other-app", apps: ["com.example.other"]),
            C.webhook("sandbox", environments: ["Sandbox"]), C.webhook("app", apps: [S.bundleID], environments: ["Production"]),
        ]).outboxRules
        let renewal = EventDraft(
            type: "RENEWAL", dedupeKey: "RENEWAL:1", account: nil, originalTransactionID: "1", bundleID: S.bundleID,
            environment: "Production", bodyMembers: "")
        #expect(rules.subscribers(renewal) == ["all", "app"])
        var refund = renewal
        refund.type = "REFUND"
        #expect(rules.subscribers(refund) == ["all", "refunds", "app"])
        var unknownApp = renewal
        unknownApp.bundleID = nil
        #expect(rules.subscribers(unknownApp) == ["all"])
    }

    @Test(arguments: [
        (Int64(1_795_752_306_789), "2026-11-27T04:05:06.789Z"), (0, "1970-01-01T00:00:00.000Z"),
        (-1, "1969-12-31T23:59:59.999Z"), (1_735_689_600_050, "2025-01-01T00:00:00.050Z"),
    ])
    func formatTime_isISO8601UTCWithMilliseconds(_ milliseconds: Int64, _ text: String) {
        #expect(C.configuration().outboxRules.formatTime(milliseconds) == text)
    }

    // MARK: - Cost inside the write transaction

    /// The account's other originals are given inconsistently before and after: were entitlements evaluated for a
    /// change whose touched facts and owner did not move, this would answer ENTITLEMENTS_CHANGED.
    @Test func changeThatMovesNeitherFactsNorOwner_evaluatesNoEntitlements() {
        var change = C.change(.facts(.receipt), before: C.twoMonths, after: C.twoMonths, owner: "user-42")
        change.accountsAfter["user-42"]?.append(C.lifetime)
        #expect(C.rules.events(change).isEmpty)
        change.cause = .link(.claim)
        #expect(C.rules.events(change).isEmpty)
    }

    @Test func everyEventOfOneChange_showsTheSameSubscription() throws {
        let refunded = S.facts([C.first, C.renewedRefunded], renewal: C.renewal(autoRenew: false, signed: C.now))
        let drafts = C.rules.events(
            C.change(C.notification("REFUND"), before: C.twoMonths, after: refunded, owner: "user-42"))
        #expect(drafts.map(\.type) == ["REFUND", "CANCELLATION", "ENTITLEMENTS_CHANGED"])
        let subscriptions = try Set(drafts.map { try Self.body($0)["subscription"] })
        #expect(subscriptions.count == 1)
    }

    /// The kept transaction texts change no byte: each event's `transaction` and `subscription` are the texts the
    /// routes' renderers write from the stored payloads, and a transaction whose payload changed (a refund) is shown
    /// as it is now, not as an earlier event kept it.
    @Test func bodies_areTheRenderersTextsByteForByte_evenAfterAPayloadChanged() throws {
        let rules = EventRules(configuration: C.configuration())
        func expectRenderersTexts(_ draft: EventDraft, transaction: TransactionFacts, subscription: SubscriptionFacts) {
            let transactionText = String(decoding: ReceiptRoutes.transactionJSON(transaction).serialized(), as: UTF8.self)
            let subscriptionText = String(
                decoding: ReceiptRoutes.subscriptionJSON(subscription, at: C.now).serialized(), as: UTF8.self)
            #expect(draft.bodyMembers.contains(#""transaction":\#(transactionText),"subscription":"#))
            #expect(draft.bodyMembers.contains(#""subscription":\#(subscriptionText),"notification":"#))
        }
        let renewal = try #require(
            rules.events(C.change(C.notification("DID_RENEW"), before: C.oneMonth, after: C.twoMonths)).first)
        expectRenderersTexts(renewal, transaction: C.renewed, subscription: C.twoMonths)
        let refunded = S.facts([C.first, C.renewedRefunded], renewal: C.renewal(autoRenew: false, signed: C.now))
        let refund = try #require(
            rules.events(C.change(C.notification("REFUND", uuid: "0b6f2e1a-n2"), before: C.twoMonths, after: refunded))
                .first)
        #expect(refund.type == "REFUND")
        expectRenderersTexts(refund, transaction: C.renewedRefunded, subscription: refunded)
    }
}
