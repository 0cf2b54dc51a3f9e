import JSONText
import Ledger
import ReceiptEngine
import Testing

@testable import ReceiptService

/// The body of `GET /v1/accounts/{account}`, and the facts as of an instant it is computed from.
struct AccountsReportTests {
    typealias S = Shop
    let day = Shop.day
    let t0 = Shop.t0

    private func keys(_ value: JSONValue?) -> [String] {
        guard case .object(let members)? = value else { return [] }
        return members.map(\.key)
    }

    private func date(_ milliseconds: Int64) -> JSONValue { .string(ReceiptDate(millisecondsSince1970: milliseconds).rfc3339) }

    /// A monthly subscription renewed twice (the second renewal after the instant looked at), refunded after it, and
    /// a non-consumable.
    private var snapshot: AccountSnapshot {
        let subscription = S.facts(
            [
                S.transaction("1", purchase: t0, expires: t0 + 30 * day),
                S.transaction("2", original: "1", purchase: t0 + 30 * day, expires: t0 + 60 * day, revoked: t0 + 45 * day),
                S.transaction("3", original: "1", purchase: t0 + 60 * day, expires: t0 + 90 * day),
            ],
            renewal: S.renewal("1"), updatedAt: t0 + 61 * day)
        return S.snapshot([subscription, S.oneTime("9", product: S.noAds, purchase: t0 + 10 * day)], updatedAt: t0 + 2 * day)
    }

    @Test func accountJSON_hasTheIssuesKeys_inOrder() {
        let json = AccountReport(snapshot: snapshot, configuration: S.configuration(), at: t0 + 40 * day).json
        #expect(keys(json) == [
            "account", "entitlements", "subscriptions", "purchases", "app_account_tokens", "first_seen", "updated_at", "at",
        ])
        #expect(json["account"] == .string("user-42"))
        #expect(keys(json["entitlements"]) == ["no_ads", "pro"])
        #expect(keys(json["entitlements"]?["pro"]) == [
            "active", "product_id", "original_transaction_id", "expires_date", "grace_period_expires_date", "will_renew",
            "is_in_billing_retry_period", "period_type", "ownership", "environment", "purchase_date",
        ])
        #expect(json["app_account_tokens"] == .array([.string("7e3fb20b-4cdb-47cc-936d-99d65f608138")]))
        #expect(json["first_seen"] == date(t0 - day))
        #expect(json["updated_at"] == date(t0 + 61 * day))
        #expect(json["at"] == date(t0 + 40 * day))
    }

    /// What `GET /v1/accounts/{account}` sends: each transaction's text written once for its subscription and
    /// `purchases` alike must read exactly as the whole value serialized, before, during and after every purchase.
    @Test(arguments: [-1, 0, 15, 40, 50, 70, 100] as [Int64])
    func accountText_isTheAccountJSONSerialized(daysAfterT0: Int64) {
        let yearly = S.facts(
            [
                S.transaction("20", purchase: t0 + 5 * day, expires: t0 + 35 * day),
                S.transaction("21", original: "20", purchase: t0 + 35 * day, expires: t0 + 65 * day, upgraded: true),
                S.transaction(
                    "22", original: "20", product: S.yearly, purchase: t0 + 50 * day, expires: t0 + 415 * day),
            ],
            renewal: S.renewal("20"), updatedAt: t0 + 51 * day)
        var owned = Array(snapshot.subscriptions.values.sorted { $0.originalTransactionID < $1.originalTransactionID })
        owned.append(yearly)
        let report = AccountReport(
            snapshot: S.snapshot(owned), configuration: S.configuration(), at: t0 + daysAfterT0 * day)
        #expect(report.jsonText == report.json.serialized())
    }

    /// Subscriptions renewed on the same days, their ids of different lengths: `purchases` lists each day's
    /// transactions by their ids' UTF-8, greater first, whichever subscription they belong to.
    @Test func accountText_ofPurchasesTiedOnTheirDates_isTheAccountJSONSerialized() {
        let originals = ["9", "10", "100"]
        let owned = originals.map { original in
            S.facts(
                (0..<3).map { month in
                    S.transaction(
                        month == 0 ? original : "\(original)0\(month)", original: original,
                        purchase: t0 + Int64(month) * 30 * day, expires: t0 + Int64(month + 1) * 30 * day)
                },
                renewal: S.renewal(original))
        }
        let report = AccountReport(snapshot: S.snapshot(owned), configuration: S.configuration(), at: t0 + 80 * day)
        #expect(report.jsonText == report.json.serialized())
        let ids = report.json["purchases"]?.arrayValue?.compactMap { $0["transaction_id"]?.stringValue }
        #expect(ids == ["902", "1002", "10002", "901", "1001", "10001", "9", "100", "10"])
    }

    @Test func activeEntitlement_saysWhy() {
        let pro = AccountReport(snapshot: snapshot, configuration: S.configuration(), at: t0 + 40 * day).json["entitlements"]?["pro"]
        #expect(pro?["active"] == .bool(true))
        #expect(pro?["product_id"] == .string(S.monthly))
        #expect(pro?["original_transaction_id"] == .string("1"))
        #expect(pro?["expires_date"] == date(t0 + 60 * day))
        #expect(pro?["grace_period_expires_date"] == .null)
        #expect(pro?["will_renew"] == .bool(true))
        #expect(pro?["is_in_billing_retry_period"] == .bool(false))
        #expect(pro?["period_type"] == .string("normal"))
        #expect(pro?["ownership"] == .string("PURCHASED"))
        #expect(pro?["environment"] == .string("Production"))
        #expect(pro?["purchase_date"] == date(t0 + 30 * day))
        #expect(pro?["ended_date"] == nil && pro?["ended_reason"] == nil)
    }

    @Test func inactiveEntitlement_saysWhenAndWhyItEnded() {
        let report = AccountReport(snapshot: snapshot, configuration: S.configuration(), at: t0 + 50 * day)
        let pro = report.json["entitlements"]?["pro"]
        #expect(pro?["active"] == .bool(false))
        #expect(pro?["ended_date"] == date(t0 + 45 * day))
        #expect(pro?["ended_reason"] == .string("refunded"))
        #expect(report.entitlements.map(\.name) == ["no_ads", "pro"])
        #expect(report.entitlements.map(\.isActive) == [true, false])
    }

    @Test func subscriptionsAndPurchases_areAsOfTheInstant_newestFirst() {
        let json = AccountReport(snapshot: snapshot, configuration: S.configuration(), at: t0 + 40 * day).json
        guard case .array(let purchases)? = json["purchases"], case .array(let subscriptions)? = json["subscriptions"] else {
            Issue.record("no purchases or subscriptions: \(json)")
            return
        }
        // Transaction 3 was bought after the instant; the refund of 2 is dated after it too.
        #expect(purchases.map { $0["transaction_id"] } == [.string("2"), .string("9"), .string("1")])
        #expect(purchases.first?["revocation_date"] == .null)
        #expect(subscriptions.count == 1)
        #expect(subscriptions.first?["status"] == .string("active"))
        #expect(subscriptions.first?["revocation_date"] == .null)
        #expect(subscriptions.first?["latest_transaction"]?["transaction_id"] == .string("2"))
        #expect(subscriptions.first?["latest_transaction"]?["revocation_date"] == .null)

        let later = AccountReport(snapshot: snapshot, configuration: S.configuration(), at: t0 + 50 * day).json
        #expect(later["subscriptions"]?[0]?["status"] == .string("revoked"))
        #expect(later["purchases"]?[0]?["revocation_date"] == date(t0 + 45 * day))
    }

    @Test func subscriptionStatus_isTakenAtTheExactMillisecond() {
        // Instants that a Date of `milliseconds / 1000` seconds, read back rounding down, loses a millisecond of
        // (from 2038 on, seconds need another bit).
        for expires: Int64 in [2_153_479_672_489, 2_154_577_027_305, 2_183_614_187_811, t0 + 30 * day + 1] {
            let facts = S.facts([S.transaction("1", purchase: t0, expires: expires)])
            let json = AccountReport(snapshot: S.snapshot([facts]), rules: S.rules, at: expires).json
            #expect(json["subscriptions"]?[0]?["status"] == .string("expired"), "expires \(expires)")
            #expect(json["entitlements"]?["pro"]?["ended_date"] == date(expires))
        }
    }

    // MARK: - The span an answer holds for

    /// Renewals, a refund, billing retry with a grace period, an upgrade told by its replacement and one told only by
    /// Apple's signing, a one-time purchase, a non-renewing month pass, a family-shared purchase revoked, and a
    /// subscription transferred away: every kind of date the rules compare an instant with, all on day boundaries.
    private var everyKindOfDate: AccountSnapshot {
        let renewed = S.facts(
            [
                S.transaction("1", purchase: t0, expires: t0 + 30 * day),
                S.transaction(
                    "2", original: "1", purchase: t0 + 30 * day, expires: t0 + 60 * day, revoked: t0 + 45 * day),
                S.transaction("3", original: "1", purchase: t0 + 60 * day, expires: t0 + 90 * day),
            ],
            renewal: S.renewal("1", retry: true, grace: t0 + 96 * day))
        let upgraded = S.facts(
            [
                S.transaction("20", purchase: t0 + 5 * day, expires: t0 + 35 * day),
                S.transaction(
                    "21", original: "20", purchase: t0 + 35 * day, expires: t0 + 65 * day, signed: t0 + 40 * day,
                    upgraded: true),
                S.transaction(
                    "22", original: "20", product: S.yearly, purchase: t0 + 50 * day, expires: t0 + 415 * day),
            ],
            renewal: S.renewal("20"))
        let upgradedAlone = S.facts([
            S.transaction(
                "60", product: S.basic, purchase: t0 + day, expires: t0 + 31 * day, signed: t0 + 25 * day,
                upgraded: true)
        ])
        let pass = S.oneTime("30", product: S.monthPass, type: S.nonRenewing, purchase: t0 + 12 * day)
        let family = S.oneTime(
            "40", product: S.lifetime, purchase: t0 + 3 * day, revoked: t0 + 70 * day, ownership: "FAMILY_SHARED")
        return S.snapshot(
            [renewed, upgraded, upgradedAlone, pass, family, S.oneTime("9", product: S.noAds, purchase: t0 + 10 * day)],
            transferredAway: [(S.month("50", purchase: t0 + 2 * day), t0 + 20 * day)])
    }

    /// What the memory of answers keeps: the answer up to its `at`.
    private func answerBeforeAt(_ snapshot: AccountSnapshot, at instant: Int64, _ texts: NormalizedTransactionTexts)
        -> [UInt8]
    {
        let report = AccountReport(snapshot: snapshot, rules: S.rules, at: instant, texts: texts)
        return Array(report.memberPieces(texts: texts).joined())
    }

    /// An answer is given again at any instant of its span (the memory of answers relies on it): the same bytes but
    /// `at` at both ends of the span, from instants around each day the facts name (a month pass bought on day 12
    /// ends on day 43) and between them.
    @Test func answer_readsTheSame_atBothEndsOfItsSpan() {
        let snapshot = everyKindOfDate
        let texts = NormalizedTransactionTexts()
        var spansChecked = 0
        let namedDays: [Int64] = [
            -2, 0, 1, 2, 3, 4, 5, 8, 10, 11, 12, 15, 20, 25, 30, 31, 32, 33, 35, 40, 43, 45, 50, 55, 60, 65, 70, 80, 90,
            96, 100, 415, 416,
        ]
        for namedDay in namedDays {
            for offset: Int64 in [-1, 0, 1, day / 2] {
                let instant = t0 + namedDay * day + offset
                let report = AccountReport(snapshot: snapshot, rules: S.rules, at: instant, texts: texts)
                guard let span = report.unchangedSpan(rules: S.rules) else { continue }
                #expect(span.contains(instant))
                let answer = answerBeforeAt(snapshot, at: instant, texts)
                for end in [span.lowerBound, span.upperBound &- 1] where end != .min && end != .max - 1 {
                    // Compared as a flag: the answers are kilobytes long.
                    let isSame = answerBeforeAt(snapshot, at: end, texts) == answer
                    #expect(isSame, "the answer at \(instant) differs at \(end), which its span holds")
                }
                spansChecked += 1
            }
        }
        #expect(spansChecked > 100)
        // Between two dates an answer holds for all the time between them: here from the grace period's end (day 96) to
        // the yearly subscription's expiry (day 415).
        let quiet = AccountReport(snapshot: snapshot, rules: S.rules, at: t0 + 100 * day + day / 2, texts: texts)
        #expect(quiet.unchangedSpan(rules: S.rules) == (t0 + 96 * day)..<(t0 + 415 * day))
    }

    /// A product the subscription moved away from, whose last transaction has not expired and was replaced by
    /// nothing later, ends at the instant asked about: such an answer holds for that instant only.
    @Test func answerNamingItsOwnInstant_hasNoSpan() {
        let facts = S.facts([
            S.transaction("1", purchase: t0, expires: t0 + 30 * day),
            S.transaction("2", original: "1", product: S.basic, purchase: t0 + 5 * day, expires: t0 + 20 * day),
        ])
        let during = AccountReport(snapshot: S.snapshot([facts]), rules: S.rules, at: t0 + 10 * day)
        #expect(during.entitlements.first { $0.name == "basic" }?.end?.date == t0 + 10 * day)
        #expect(during.unchangedSpan(rules: S.rules) == nil)
        let after = AccountReport(snapshot: S.snapshot([facts]), rules: S.rules, at: t0 + 25 * day)
        #expect(after.unchangedSpan(rules: S.rules) == (t0 + 20 * day)..<(t0 + 30 * day))
    }

    // MARK: - Facts as of an instant

    @Test func asOf_leavesOutLaterPurchases_andIgnoresLaterRevocations() {
        let facts = S.facts([
            S.transaction("1", purchase: t0, expires: t0 + 30 * day, revoked: t0 + 10 * day),
            S.transaction("2", original: "1", purchase: t0 + 30 * day, expires: t0 + 60 * day),
        ])
        let early = facts.asOf(t0 + 5 * day)
        #expect(early.transactions.map(\.transactionID) == ["1"])
        #expect(early.transactions.first?.revocationDate == nil)
        #expect(early.status(at: t0 + 5 * day) == .active)
        #expect(!early.transactions[0].payloadJSON.contains("revocation"))
        let refunded = facts.asOf(t0 + 10 * day)
        #expect(refunded.transactions.first?.revocationDate == t0 + 10 * day)
        #expect(refunded.status(at: t0 + 10 * day) == .revoked)
        #expect(facts.asOf(t0 + 30 * day) == facts)
    }

    @Test func asOf_countsAnUpgradeOnlyOnceItHappened() {
        let upgradeAt = t0 + 10 * day
        let upgraded = S.transaction("1", purchase: t0, expires: t0 + 30 * day, signed: upgradeAt, upgraded: true)
        let replacement = S.transaction("2", original: "1", product: S.yearly, purchase: upgradeAt, expires: t0 + 400 * day)
        let facts = S.facts([upgraded, replacement])
        #expect(facts.asOf(upgradeAt - 1).transactions.map(\.isUpgraded) == [false])
        #expect(facts.asOf(upgradeAt - 1).status(at: upgradeAt - 1) == .active)
        #expect(facts.asOf(upgradeAt).transactions.map(\.isUpgraded) == [nil, true])
        // Without the replacement, Apple's signing of the upgraded version is the latest it can have happened.
        let alone = S.facts([upgraded])
        #expect(alone.asOf(upgradeAt - 1).status(at: upgradeAt - 1) == .active)
        #expect(alone.asOf(upgradeAt).status(at: upgradeAt) == .upgraded)
    }

    @Test func entitlementLines_haveNameActiveUntilAndWhy() {
        let report = AccountReport(snapshot: snapshot, configuration: S.configuration(), at: t0 + 50 * day)
        let lines = report.entitlements.map { ($0.name, $0.isActive, $0.until, $0.end?.reason) }
        #expect(lines.count == 2)
        #expect(lines[0] == ("no_ads", true, nil, nil))
        #expect(lines[1] == ("pro", false, t0 + 45 * day, .refunded))
    }
}
