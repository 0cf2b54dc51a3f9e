import JSONText
import Ledger
import ReceiptEngine
import Testing

@testable import ReceiptService

/// The entitlement rules of issue 24, each at several instants, over facts built by hand.
struct AccountsRulesTests {
    typealias S = Shop
    let day = Shop.day
    let t0 = Shop.t0

    // MARK: - Auto-renewable subscriptions

    @Test func subscription_isAbsentBeforePurchase_activeDuring_expiredAfter() {
        let snapshot = S.snapshot([S.month("1", purchase: t0)])
        #expect(S.entitlements(snapshot, at: t0 - 1).isEmpty)
        let during = S.entitlements(snapshot, at: t0 + 10 * day)["pro"]
        #expect(during?.isActive == true)
        #expect(during?.expiresDate == t0 + 30 * day)
        #expect(during?.until == t0 + 30 * day)
        #expect(during?.originalTransactionID == "1")
        let after = S.entitlements(snapshot, at: t0 + 31 * day)["pro"]
        #expect(after?.end == .init(date: t0 + 30 * day, reason: .expired))
        // The subscription's expiry itself is the first instant it no longer grants, as /v1/subscriptions says.
        #expect(S.entitlements(snapshot, at: t0 + 30 * day)["pro"]?.isActive == false)
    }

    @Test func subscriptionInGracePeriod_grantsUntilTheGracePeriodEnds_thenEndsInBillingRetry() {
        let expires = t0 + 30 * day
        let facts = S.facts(
            [S.transaction("1", purchase: t0, expires: expires)],
            renewal: S.renewal("1", retry: true, grace: expires + 16 * day))
        let snapshot = S.snapshot([facts])
        let inGrace = S.entitlements(snapshot, at: expires + day)["pro"]
        #expect(inGrace?.isActive == true)
        #expect(inGrace?.isInBillingRetryPeriod == true)
        #expect(inGrace?.gracePeriodExpiresDate == expires + 16 * day)
        #expect(inGrace?.until == expires + 16 * day)
        let afterGrace = S.entitlements(snapshot, at: expires + 17 * day)["pro"]
        #expect(afterGrace?.end == .init(date: expires + 16 * day, reason: .billingRetry))
    }

    @Test func subscriptionInBillingRetryWithoutGrace_endedAtExpiry() {
        let expires = t0 + 30 * day
        let facts = S.facts([S.transaction("1", purchase: t0, expires: expires)], renewal: S.renewal("1", retry: true))
        let ended = S.entitlements(S.snapshot([facts]), at: expires + day)["pro"]
        #expect(ended?.end == .init(date: expires, reason: .billingRetry))
        #expect(ended?.willRenew == true)
    }

    @Test func refundDatedAfterTheInstant_hasNotEndedAnythingYet() {
        let refund = t0 + 5 * day
        let snapshot = S.snapshot([S.month("1", purchase: t0, revoked: refund)])
        #expect(S.entitlements(snapshot, at: refund - 1)["pro"]?.isActive == true)
        #expect(S.entitlements(snapshot, at: refund)["pro"]?.end == .init(date: refund, reason: .refunded))
        #expect(S.entitlements(snapshot, at: t0 + 40 * day)["pro"]?.end?.reason == .refunded)
    }

    @Test func upgradeWithinOneOriginal_endsTheOldProductUpgraded_andTheNewOneGrants() {
        let upgradeAt = t0 + 10 * day
        let facts = S.facts([
            S.transaction("1", product: S.basic, purchase: t0, expires: t0 + 30 * day, signed: upgradeAt, upgraded: true),
            S.transaction("2", original: "1", product: S.yearly, purchase: upgradeAt, expires: upgradeAt + 365 * day),
        ])
        let snapshot = S.snapshot([facts])
        let before = S.entitlements(snapshot, at: upgradeAt - 1)
        #expect(before["basic"]?.isActive == true)
        #expect(before["pro"] == nil)
        let after = S.entitlements(snapshot, at: upgradeAt + day)
        #expect(after["pro"]?.isActive == true)
        #expect(after["pro"]?.productID == S.yearly)
        #expect(after["basic"]?.end == .init(date: upgradeAt, reason: .upgraded))
        #expect(after["basic"]?.transactionID == "1")
    }

    @Test func upgradedWhileItsReplacementIsNotInTheLedger_endsWhenAppleSaidSo() {
        let markedAt = t0 + 10 * day
        let facts = S.facts([
            S.transaction("1", product: S.monthly, purchase: t0, expires: t0 + 30 * day, signed: markedAt, upgraded: true)
        ])
        let snapshot = S.snapshot([facts])
        #expect(S.entitlements(snapshot, at: markedAt - 1)["pro"]?.isActive == true)
        #expect(S.entitlements(snapshot, at: markedAt)["pro"]?.end == .init(date: markedAt, reason: .upgraded))
    }

    @Test func renewalsOfOneOriginal_theLatestDecides() {
        let facts = S.facts([
            S.transaction("1", purchase: t0, expires: t0 + 30 * day),
            S.transaction("2", original: "1", purchase: t0 + 30 * day, expires: t0 + 60 * day),
        ])
        let snapshot = S.snapshot([facts])
        #expect(S.entitlements(snapshot, at: t0 + day)["pro"]?.transactionID == "1")
        let renewed = S.entitlements(snapshot, at: t0 + 31 * day)["pro"]
        #expect(renewed?.transactionID == "2")
        #expect(renewed?.expiresDate == t0 + 60 * day)
    }

    @Test func crossgradeAtRenewalToAProductOfAnotherEntitlement_endsTheOldOneExpired() {
        let renewal = t0 + 30 * day
        let facts = S.facts([
            S.transaction("1", product: S.monthly, purchase: t0, expires: renewal),
            S.transaction("2", original: "1", product: S.basic, purchase: renewal, expires: renewal + 30 * day),
        ])
        let after = S.entitlements(S.snapshot([facts]), at: renewal + day)
        #expect(after["basic"]?.isActive == true)
        #expect(after["pro"]?.end == .init(date: renewal, reason: .expired))
    }

    // MARK: - One-time purchases

    @Test func nonConsumable_grantsFromPurchaseUntilRefunded() {
        let snapshot = S.snapshot([S.oneTime("1", product: S.noAds, purchase: t0, revoked: t0 + 100 * day)])
        #expect(S.entitlements(snapshot, at: t0 - 1).isEmpty)
        let owned = S.entitlements(snapshot, at: t0 + 99 * day)["no_ads"]
        #expect(owned?.isActive == true)
        #expect(owned?.expiresDate == nil)
        #expect(owned?.until == nil)
        #expect(owned?.willRenew == nil)
        #expect(S.entitlements(snapshot, at: t0 + 100 * day)["no_ads"]?.end == .init(date: t0 + 100 * day, reason: .refunded))
    }

    @Test func nonRenewing_grantsForItsConfiguredDuration_inCalendarMonths() {
        // 2025-01-31T00:00:00Z: a month later is the end of February, as Foundation's Calendar adds it.
        let january31 = t0 + 30 * day
        let endOfFebruary = t0 + 58 * day
        let snapshot = S.snapshot([S.oneTime("1", product: S.monthPass, type: S.nonRenewing, purchase: january31)])
        let during = S.entitlements(snapshot, at: endOfFebruary - 1)["pass"]
        #expect(during?.isActive == true)
        #expect(during?.expiresDate == endOfFebruary)
        #expect(S.entitlements(snapshot, at: endOfFebruary)["pass"]?.end == .init(date: endOfFebruary, reason: .expired))
    }

    @Test func nonRenewingWithoutDuration_grantsUntilRevoked() {
        let snapshot = S.snapshot([
            S.oneTime("1", product: S.foreverPass, type: S.nonRenewing, purchase: t0, revoked: t0 + 400 * day)
        ])
        #expect(S.entitlements(snapshot, at: t0 + 399 * day)["pass"]?.isActive == true)
        #expect(S.entitlements(snapshot, at: t0 + 399 * day)["pass"]?.expiresDate == nil)
        #expect(S.entitlements(snapshot, at: t0 + 400 * day)["pass"]?.end?.reason == .refunded)
    }

    @Test func consumable_neverGrants_evenWhenConfigured() {
        let snapshot = S.snapshot([S.oneTime("1", product: S.coins, type: S.consumable)])
        #expect(S.entitlements(snapshot, at: t0 + day).isEmpty)
    }

    @Test func receiptEntries_expiryMakesASubscription_otherwiseNonConsumable_orNonRenewingWithADuration() {
        let subscription = S.facts([S.transaction("1", product: S.monthly, type: nil, purchase: t0, expires: t0 + 30 * day)])
        let noAds = S.oneTime("2", product: S.noAds, type: nil)
        let pass = S.oneTime("3", product: S.monthPass, type: nil)
        let snapshot = S.snapshot([subscription, noAds, pass])
        let during = S.entitlements(snapshot, at: t0 + day)
        #expect(during["pro"]?.expiresDate == t0 + 30 * day)
        #expect(during["no_ads"]?.isActive == true && during["no_ads"]?.expiresDate == nil)
        #expect(during["pass"]?.expiresDate == t0 + 31 * day)
        let later = S.entitlements(snapshot, at: t0 + 100 * day)
        #expect(later["pro"]?.end?.reason == .expired)
        #expect(later["no_ads"]?.isActive == true)
        #expect(later["pass"]?.end == .init(date: t0 + 31 * day, reason: .expired))
    }

    @Test func productGrantingSeveralEntitlements_grantsEach() {
        let snapshot = S.snapshot([S.oneTime("1", product: S.lifetime)])
        let granted = S.entitlements(snapshot, at: t0 + day)
        #expect(granted["pro"]?.isActive == true)
        #expect(granted["no_ads"]?.isActive == true)
        #expect(granted.count == 2)
    }

    @Test func unknownProduct_andUnconfiguredApp_grantNothing() {
        let unknown = S.oneTime("1", product: "com.example.sticker")
        let otherApp = S.facts([S.transaction("2", product: S.noAds, type: S.nonConsumable, purchase: t0, bundleID: "com.example.unknown")])
        #expect(S.entitlements(S.snapshot([unknown, otherApp]), at: t0 + day).isEmpty)
    }

    // MARK: - Family sharing and environments

    @Test func familyShared_grantsLikeAPurchase_untilAppleRevokesIt() {
        let revoke = t0 + 20 * day
        let snapshot = S.snapshot([
            S.oneTime("1", product: S.noAds, revoked: revoke, ownership: "FAMILY_SHARED")
        ])
        let shared = S.entitlements(snapshot, at: revoke - 1)["no_ads"]
        #expect(shared?.isActive == true)
        #expect(shared?.ownership == "FAMILY_SHARED")
        #expect(S.entitlements(snapshot, at: revoke)["no_ads"]?.end == .init(date: revoke, reason: .refunded))
    }

    @Test func ownershipDefaultsToPurchased() {
        let snapshot = S.snapshot([S.oneTime("1", product: S.noAds, ownership: nil)])
        #expect(S.entitlements(snapshot, at: t0 + day)["no_ads"]?.ownership == "PURCHASED")
    }

    @Test func sandboxPurchase_neverGrantsInAProductionOnlyApp_norIsListedAsOnceHad() {
        let rules = EntitlementRules(configuration: S.configuration(environments: [.production]))
        let snapshot = S.snapshot([S.oneTime("1", product: S.noAds, environment: "Sandbox")])
        #expect(S.entitlements(snapshot, at: t0 + day, rules: rules).isEmpty)
        let sandbox = S.entitlements(snapshot, at: t0 + day)["no_ads"]
        #expect(sandbox?.isActive == true)
        #expect(sandbox?.environment == "Sandbox")
    }

    // MARK: - Several sources

    @Test func longestLastingSourceWins_noExpiryBeatsAnyExpiry() {
        let monthly = S.month("1", purchase: t0 + 5 * day)
        let yearly = S.month("2", product: S.yearly, purchase: t0, months: 12)
        let lifetime = S.oneTime("3", product: S.lifetime, purchase: t0 - 100 * day)
        #expect(S.entitlements(S.snapshot([monthly, yearly]), at: t0 + 6 * day)["pro"]?.originalTransactionID == "2")
        #expect(
            S.entitlements(S.snapshot([monthly, yearly, lifetime]), at: t0 + 6 * day)["pro"]?.originalTransactionID == "3")
    }

    @Test func equalExpiries_laterPurchaseWins_thenTheGreaterIDs_whateverTheOrder() {
        let expires = t0 + 30 * day
        let early = S.facts([S.transaction("1", purchase: t0, expires: expires)])
        let late = S.facts([S.transaction("2", product: S.yearly, purchase: t0 + day, expires: expires)])
        let twin = S.facts([S.transaction("3", product: S.yearly, purchase: t0 + day, expires: expires)])
        for order in [[early, late], [late, early]] {
            #expect(S.entitlements(S.snapshot(order), at: t0 + 2 * day)["pro"]?.originalTransactionID == "2")
        }
        for order in [[early, late, twin], [twin, late, early], [late, twin, early]] {
            #expect(S.entitlements(S.snapshot(order), at: t0 + 2 * day)["pro"]?.originalTransactionID == "3")
        }
    }

    @Test func activeSourceBeatsOneThatEndedLater_andAmongEndedTheLastToEndIsShown() {
        let refunded = S.month("1", purchase: t0, months: 12, revoked: t0 + 40 * day)
        let active = S.month("2", purchase: t0 + 35 * day)
        #expect(S.entitlements(S.snapshot([refunded, active]), at: t0 + 50 * day)["pro"]?.originalTransactionID == "2")
        let expired = S.month("3", purchase: t0)
        let ended = S.entitlements(S.snapshot([expired, refunded]), at: t0 + 60 * day)["pro"]
        #expect(ended?.end == .init(date: t0 + 40 * day, reason: .refunded))
    }

    // MARK: - Transfers

    @Test func purchaseTransferredAway_endsTransferred_atTheTransferTime() {
        let transferAt = t0 + 3 * day
        let snapshot = S.snapshot([], transferredAway: [(S.oneTime("1", product: S.noAds), transferAt)])
        let ended = S.entitlements(snapshot, at: t0 + 4 * day)["no_ads"]
        #expect(ended?.end == .init(date: transferAt, reason: .transferred))
        #expect(ended?.productID == S.noAds)
    }

    @Test func beforeItsTransferAway_thePurchaseStillGrants() {
        let transferAt = t0 + 3 * day
        let snapshot = S.snapshot([], transferredAway: [(S.oneTime("1", product: S.noAds), transferAt)])
        let before = S.entitlements(snapshot, at: transferAt - 1)["no_ads"]
        #expect(before?.isActive == true)
        #expect(before?.end == nil)
        let after = S.entitlements(snapshot, at: transferAt)["no_ads"]
        #expect(after?.end == .init(date: transferAt, reason: .transferred))
    }

    @Test func beforeItsTransferIn_thePurchaseWasAnotherAccounts() {
        let transferAt = t0 + 3 * day
        var snapshot = S.snapshot([S.oneTime("1", product: S.noAds)])
        snapshot.record.transfers = [S.transfer("1", from: "user-7", to: snapshot.record.account, at: transferAt)]
        #expect(S.entitlements(snapshot, at: transferAt - 1)["no_ads"] == nil)
        #expect(S.entitlements(snapshot, at: transferAt)["no_ads"]?.isActive == true)
    }

    @Test func transferredAwayAndBack_isTransferredOnlyInBetween() {
        let (away, back) = (t0 + 3 * day, t0 + 5 * day)
        var snapshot = S.snapshot([S.oneTime("1", product: S.noAds)])
        let account = snapshot.record.account
        snapshot.record.transfers = [
            S.transfer("1", from: account, to: "user-7", at: away),
            S.transfer("1", from: "user-7", to: account, at: back),
        ]
        #expect(S.entitlements(snapshot, at: away - 1)["no_ads"]?.isActive == true)
        #expect(S.entitlements(snapshot, at: away)["no_ads"]?.end == .init(date: away, reason: .transferred))
        #expect(S.entitlements(snapshot, at: back - 1)["no_ads"]?.end == .init(date: away, reason: .transferred))
        #expect(S.entitlements(snapshot, at: back)["no_ads"]?.isActive == true)
    }

    @Test func ownedSource_winsOverOneTransferredAway() {
        let snapshot = S.snapshot(
            [S.month("2", purchase: t0)], transferredAway: [(S.oneTime("1", product: S.lifetime), t0 + day)])
        let pro = S.entitlements(snapshot, at: t0 + 2 * day)["pro"]
        #expect(pro?.isActive == true)
        #expect(pro?.originalTransactionID == "2")
    }

    // MARK: - Period types

    @Test(arguments: [
        ([("offerType", JSONValue.integer(1)), ("offerDiscountType", .string("FREE_TRIAL"))], Entitlement.PeriodType.trial),
        ([("offerType", .integer(1)), ("offerDiscountType", .string("PAY_AS_YOU_GO"))], .intro),
        ([("offerType", .integer(1)), ("offerDiscountType", .string("PAY_UP_FRONT"))], .intro),
        ([("offerType", .integer(2)), ("offerIdentifier", .string("winback"))], .promotional),
        ([("offerType", .integer(3))], .promotional),
        ([("offerType", .integer(4))], .promotional),
        ([], .normal),
    ] as [([(String, JSONValue)], Entitlement.PeriodType)])
    func periodType_fromTheStoreKit2Payload(offer: [(String, JSONValue)], expected: Entitlement.PeriodType) {
        let facts = S.facts([
            S.transaction(
                "1", purchase: t0, expires: t0 + 7 * day, offer: offer.map { (key: $0.0, value: $0.1) })
        ])
        #expect(S.entitlements(S.snapshot([facts]), at: t0 + day)["pro"]?.periodType == expected)
    }

    @Test func periodType_fromReceiptEntries() {
        let receipt = Receipt(
            receiptType: "Production", bundleID: S.bundleID, applicationVersion: "1",
            creationDate: ReceiptDate(millisecondsSince1970: t0 + day),
            inAppPurchases: [
                InAppPurchase(
                    productID: S.monthly, transactionID: "1", purchaseDate: .init(millisecondsSince1970: t0),
                    expiresDate: .init(millisecondsSince1970: t0 + 7 * day), isTrialPeriod: true),
                InAppPurchase(
                    productID: S.basic, transactionID: "2", purchaseDate: .init(millisecondsSince1970: t0),
                    expiresDate: .init(millisecondsSince1970: t0 + 7 * day), isInIntroOfferPeriod: true),
                InAppPurchase(
                    productID: S.monthPass, transactionID: "3", purchaseDate: .init(millisecondsSince1970: t0),
                    promotionalOfferID: "spring"),
                InAppPurchase(productID: S.noAds, transactionID: "4", purchaseDate: .init(millisecondsSince1970: t0)),
            ])
        let owned = LedgerFacts.transactions(of: receipt).map { S.facts([$0]) }
        let granted = S.entitlements(S.snapshot(owned), at: t0 + day)
        #expect(granted["pro"]?.periodType == .trial)
        #expect(granted["basic"]?.periodType == .intro)
        #expect(granted["pass"]?.periodType == .promotional)
        #expect(granted["no_ads"]?.periodType == .normal)
    }

    // MARK: - Linking

    @Test func grantsEntitlement_answersForOneOriginalNow() {
        let rules = S.rules
        let month = S.month("1", purchase: t0)
        #expect(rules.grantsEntitlement(month, at: t0 + day))
        #expect(!rules.grantsEntitlement(month, at: t0 + 31 * day))
        #expect(!rules.grantsEntitlement(S.oneTime("2", product: S.coins, type: S.consumable), at: t0 + day))
        #expect(rules.linkRules.grantsEntitlement(month, t0 + day))
    }

    @Test func restoreBehavior_isEachAppsAndTransferForAnUnknownApp() {
        let linkRules = S.configuration(restore: .transferIfNoActive).accountLinkRules
        #expect(linkRules.restoreBehavior(S.bundleID) == .transferIfNoActive)
        #expect(linkRules.restoreBehavior("com.example.other") == .keepWithOriginal)
        #expect(linkRules.restoreBehavior("com.example.unknown") == .transfer)
        #expect(linkRules.restoreBehavior(nil) == .transfer)
    }
}
