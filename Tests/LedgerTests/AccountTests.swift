@testable import Ledger
import Synchronization
import TestSupport
import Testing

/// Which account owns which purchase: links by `appAccountToken`, by posted purchases and by claims, the restore
/// behaviors, transfers, and forgetting an account.
struct AccountTests {
    typealias E = AppleEvents

    static let tokenA = "6f1d7b1e-8c44-4b7a-9e43-0b7c2a1f5d01"
    static let tokenB = "0a9c3e55-1b2d-4e6f-8a7b-9c0d1e2f3a4b"

    /// A transaction of original `original` carrying `token`, its payload saying so as Apple's would.
    static func tokened(
        _ id: String, original: String = E.original, token: String = tokenA, signed: Int64 = E.t0,
        expires: Int64? = E.t0 + 30 * E.day
    ) -> TransactionFacts {
        var facts = E.transaction(id, purchase: signed, expires: expires, signed: signed, original: original)
        facts.appAccountToken = token
        facts.payloadJSON =
            #"{"transactionId":"\#(id)","appAccountToken":"\#(token.uppercased())","signedDate":\#(signed)}"#
        return facts
    }

    static func rules(_ behavior: RestoreBehavior, grants: Bool = false) -> AccountLinkRules {
        AccountLinkRules(restoreBehavior: { _ in behavior }, grantsEntitlement: { _, _ in grants })
    }

    static func open(
        _ backend: Backend, _ rules: AccountLinkRules = .transferAlways
    ) throws -> any LedgerStore {
        try DatabaseLocation.fresh(backend).open(linkRules: rules)
    }

    // MARK: - tokens

    @Test(arguments: Backend.tested)
    func registeringAToken_isOncePerAccount_caseInsensitive(_ backend: Backend) throws {
        let ledger = try Self.open(backend)
        #expect(try ledger.registerAppAccountToken(Self.tokenA.uppercased(), account: "alice", at: 10)
            == .registered(first: true, links: [:]))
        #expect(try ledger.registerAppAccountToken(Self.tokenA, account: "alice", at: 20)
            == .registered(first: false, links: [:]))
        #expect(try ledger.registerAppAccountToken(Self.tokenA, account: "bob", at: 30) == .ownedByAnotherAccount)
        #expect(try ledger.account("bob") == nil)
        let alice = try #require(try ledger.account("alice"))
        #expect(alice.record.appAccountTokens == [Self.tokenA])
        #expect(alice.record.firstSeen == 10)
        #expect(alice.record.updatedAt == 10)
    }

    @Test(arguments: Backend.tested)
    func tokenRegisteredFirst_linksWhatArrivesLater_fromEverySource(_ backend: Backend) throws {
        let ledger = try Self.open(backend)
        _ = try ledger.registerAppAccountToken(Self.tokenA, account: "alice", at: 1)
        _ = try ledger.record(
            E.notification("SUBSCRIBED", signed: E.t0, transaction: Self.tokened("1000", original: "1000")))
        try ledger.record(transactions: [Self.tokened("2000", original: "2000")], source: .jws)
        try ledger.record(transactions: [Self.tokened("3000", original: "3000")], source: .serverAPI)
        try ledger.record(
            transactions: [E.transaction("4000", purchase: E.t0, expires: nil, signed: E.t0, original: "4000")],
            source: .jws)
        for original in ["1000", "2000", "3000"] {
            #expect(try ledger.owner(originalTransactionID: original) == "alice")
        }
        #expect(try ledger.owner(originalTransactionID: "4000") == nil)
        let alice = try #require(try ledger.account("alice"))
        #expect(Set(alice.record.links.map(\.originalTransactionID)) == ["1000", "2000", "3000"])
        #expect(alice.record.links.allSatisfy { $0.source == .appAccountToken })
        #expect(alice.record.updatedAt == TestClock.fixed())
        #expect(try ledger.transaction(id: "1000")?.facts.appAccountToken == Self.tokenA)
    }

    @Test(arguments: Backend.tested)
    func tokenRegisteredAfter_linksWhatTheLedgerHolds(_ backend: Backend) throws {
        let ledger = try Self.open(backend)
        try ledger.record(transactions: [Self.tokened("1000"), Self.tokened("1001", signed: E.t0 + 30 * E.day)],
            source: .jws)
        try ledger.record(transactions: [Self.tokened("2000", original: "2000", token: Self.tokenB)], source: .jws)
        #expect(try ledger.registerAppAccountToken(Self.tokenA, account: "alice", at: 5)
            == .registered(first: true, links: [E.original: .linked]))
        #expect(try ledger.registerAppAccountToken(Self.tokenA, account: "alice", at: 6)
            == .registered(first: false, links: [E.original: .alreadyLinked]))
        #expect(try ledger.owner(originalTransactionID: E.original) == "alice")
        #expect(try ledger.owner(originalTransactionID: "2000") == nil)
        #expect(try ledger.counts().accountLinks == 1)
        #expect(try ledger.counts().accounts == 1)
    }

    @Test(arguments: Backend.tested)
    func linksByToken_neverTakeFromAnotherAccount(_ backend: Backend) throws {
        let ledger = try Self.open(backend)
        // Bob restored on Alice's Apple ID: the purchase carries Alice's token but Bob posted it.
        try ledger.record(transactions: [Self.tokened("1000")], source: .jws)
        #expect(try ledger.link(originalTransactionIDs: [E.original], to: "bob", source: .purchase, at: 1)
            == [E.original: .linked])
        #expect(try ledger.registerAppAccountToken(Self.tokenA, account: "alice", at: 2)
            == .registered(first: true, links: [E.original: .ownedByAnotherAccount]))
        // Every renewal still carries Alice's token.
        _ = try ledger.record(
            E.notification("DID_RENEW", signed: E.t0 + 30 * E.day,
                transaction: Self.tokened("1001", signed: E.t0 + 30 * E.day)))
        try ledger.record(transactions: [Self.tokened("1002", signed: E.t0 + 60 * E.day)], source: .serverAPI)
        #expect(try ledger.owner(originalTransactionID: E.original) == "bob")
        #expect(try ledger.account("bob")?.record.transfers == [])
        let alice = try #require(try ledger.account("alice"))
        #expect(alice.record.links == [])
        #expect(alice.record.transfers == [])
    }

    // MARK: - explicit links and restore behaviors

    @Test(arguments: Backend.tested)
    func explicitLink_outcomes(_ backend: Backend) throws {
        let ledger = try Self.open(backend)
        try ledger.record(transactions: [E.firstMonth], source: .jws)
        #expect(try ledger.link(originalTransactionIDs: [E.original, "9999"], to: "alice", source: .purchase, at: 10)
            == [E.original: .linked, "9999": .unknownTransaction])
        #expect(try ledger.link(originalTransactionIDs: [E.original], to: "alice", source: .purchase, at: 20)
            == [E.original: .alreadyLinked])
        let alice = try #require(try ledger.account("alice"))
        #expect(alice.record.links == [AccountLink(originalTransactionID: E.original, linkedAt: 10, source: .purchase)])
        #expect(alice.record.firstSeen == 10)
        #expect(alice.record.updatedAt == 10)
        #expect(try ledger.account("nobody") == nil)
    }

    @Test(arguments: Backend.tested)
    func transfer_movesTheLink_andRecordsIt(_ backend: Backend) throws {
        let ledger = try Self.open(backend, Self.rules(.transfer))
        try ledger.record(transactions: [E.firstMonth], source: .jws)
        _ = try ledger.link(originalTransactionIDs: [E.original], to: "alice", source: .purchase, at: 10)
        #expect(try ledger.link(originalTransactionIDs: [E.original], to: "bob", source: .purchase, at: 20)
            == [E.original: .transferred(previousAccount: "alice")])
        #expect(try ledger.link(originalTransactionIDs: [E.original], to: "carol", source: .purchase, at: 20)
            == [E.original: .transferred(previousAccount: "bob")])
        #expect(try ledger.owner(originalTransactionID: E.original) == "carol")

        let first = AccountTransfer(
            originalTransactionID: E.original, fromAccount: "alice", toAccount: "bob", transferredAt: 20,
            source: .purchase)
        let second = AccountTransfer(
            originalTransactionID: E.original, fromAccount: "bob", toAccount: "carol", transferredAt: 20,
            source: .purchase)
        let alice = try #require(try ledger.account("alice"))
        #expect(alice.record.links == [])
        #expect(alice.record.transfers == [first])
        #expect(alice.record.updatedAt == 20)
        // What it gave away is still read, so that the service can say the entitlement ended by transfer.
        #expect(alice.subscriptions[E.original] == (try ledger.subscription(originalTransactionID: E.original)))
        let bob = try #require(try ledger.account("bob"))
        #expect(bob.record.transfers == [first, second])
        let carol = try #require(try ledger.account("carol"))
        #expect(carol.record.links == [AccountLink(originalTransactionID: E.original, linkedAt: 20, source: .purchase)])
        #expect(carol.record.transfers == [second])
        #expect(carol.record.firstSeen == 20)
    }

    @Test(arguments: Backend.tested)
    func keepWithOriginal_refusesAndChangesNothing(_ backend: Backend) throws {
        let ledger = try Self.open(backend, Self.rules(.keepWithOriginal))
        try ledger.record(transactions: [E.firstMonth], source: .jws)
        _ = try ledger.link(originalTransactionIDs: [E.original], to: "alice", source: .purchase, at: 10)
        #expect(try ledger.link(originalTransactionIDs: [E.original], to: "bob", source: .purchase, at: 20)
            == [E.original: .ownedByAnotherAccount])
        #expect(try ledger.owner(originalTransactionID: E.original) == "alice")
        #expect(try ledger.account("bob") == nil)
        #expect(try ledger.account("alice")?.record.updatedAt == 10)
    }

    @Test(arguments: Backend.tested)
    func transferIfNoActive_movesOnlyWhatGrantsNothing(_ backend: Backend) throws {
        let seen = Mutex<[Int64]>([])
        // Active while the subscription's status at the link's time is active: a purchase of t0 for 30 days.
        let rules = AccountLinkRules(
            restoreBehavior: { bundleID in bundleID == "com.example.app" ? .transferIfNoActive : .transfer },
            grantsEntitlement: { facts, now in
                seen.withLock { $0.append(now) }
                return facts.status(at: now) == .active
            })
        let ledger = try Self.open(backend, rules)
        try ledger.record(transactions: [E.firstMonth], source: .jws)
        _ = try ledger.link(originalTransactionIDs: [E.original], to: "alice", source: .purchase, at: E.t0)
        let during = E.t0 + E.day
        #expect(try ledger.link(originalTransactionIDs: [E.original], to: "bob", source: .purchase, at: during)
            == [E.original: .ownedByAnotherAccount])
        #expect(try ledger.owner(originalTransactionID: E.original) == "alice")
        let after = E.t0 + 31 * E.day
        #expect(try ledger.link(originalTransactionIDs: [E.original], to: "bob", source: .purchase, at: after)
            == [E.original: .transferred(previousAccount: "alice")])
        #expect(try ledger.owner(originalTransactionID: E.original) == "bob")
        #expect(seen.withLock { $0 } == [during, after])
    }

    // MARK: - claims

    @Test(arguments: Backend.tested)
    func grantedClaim_linksThePurchase(_ backend: Backend) throws {
        let ledger = try Self.open(backend)
        try ledger.record(transactions: [E.firstMonth, E.transaction("1001", purchase: E.t0 + 30 * E.day,
            expires: E.t0 + 60 * E.day, signed: E.t0 + 30 * E.day)], source: .jws)
        #expect(
            try ledger.claim(transactionID: "1001", account: "alice", at: 10) == .granted(first: true, claimedAt: 10))
        #expect(try ledger.account("alice")?.record.links
            == [AccountLink(originalTransactionID: E.original, linkedAt: 10, source: .claim)])
        #expect(try ledger.claim(transactionID: "1000", account: "bob", at: 20) == .granted(first: true, claimedAt: 20))
        #expect(try ledger.owner(originalTransactionID: E.original) == "bob")
        #expect(try ledger.account("bob")?.record.transfers.map(\.source) == [.claim])
        #expect(try ledger.claim(transactionID: "9999", account: "carol", at: 30) == .unknownTransaction)
        #expect(try ledger.account("carol") == nil)
    }

    @Test(arguments: Backend.tested)
    func claim_isGrantedEvenWhenKeepWithOriginalRefusesTheLink(_ backend: Backend) throws {
        let ledger = try Self.open(backend, Self.rules(.keepWithOriginal))
        try ledger.record(transactions: [E.firstMonth, E.transaction("1001", purchase: E.t0 + 30 * E.day,
            expires: E.t0 + 60 * E.day, signed: E.t0 + 30 * E.day)], source: .jws)
        _ = try ledger.link(originalTransactionIDs: [E.original], to: "alice", source: .purchase, at: 10)
        #expect(try ledger.claim(transactionID: "1001", account: "bob", at: 20) == .granted(first: true, claimedAt: 20))
        #expect(try ledger.owner(originalTransactionID: E.original) == "alice")
        #expect(try ledger.transaction(id: "1001")?.claim == Claim(account: "bob", claimedAt: 20))
    }

    // MARK: - reading and forgetting an account

    @Test(arguments: Backend.tested)
    func account_readsEveryOwnedSubscription_asSubscriptionDoes(_ backend: Backend) throws {
        let ledger = try Self.open(backend)
        for notification in E.lifetime { _ = try ledger.record(notification) }
        try ledger.record(transactions: [E.transaction("2000", purchase: E.t0, expires: nil, signed: E.t0,
            original: "2000")], source: .jws)
        try ledger.record(renewal: E.renewal(signed: E.t0, original: "3000"), source: .jws)
        try ledger.record(transactions: [E.transaction("3000", purchase: E.t0, expires: E.t0 + E.day, signed: E.t0,
            original: "3000")], source: .jws)
        #expect(try ledger.link(originalTransactionIDs: [E.original, "2000", "3000"], to: "alice", source: .purchase,
            at: 50) == [E.original: .linked, "2000": .linked, "3000": .linked])
        let snapshot = try #require(try ledger.account("alice"))
        #expect(Set(snapshot.subscriptions.keys) == [E.original, "2000", "3000"])
        for original in [E.original, "2000", "3000"] {
            #expect(snapshot.subscriptions[original] == (try ledger.subscription(originalTransactionID: original)))
        }
        #expect(snapshot.subscriptions[E.original]?.notifications.count == E.lifetime.count - 2)
    }

    @Test(arguments: Backend.tested)
    func deleteAccount_forgetsLinksTokensAndTransfers_keepsApplesFacts(_ backend: Backend) throws {
        let ledger = try Self.open(backend)
        try ledger.record(transactions: [Self.tokened("1000"), Self.tokened("2000", original: "2000")], source: .jws)
        _ = try ledger.registerAppAccountToken(Self.tokenA, account: "alice", at: 1)
        _ = try ledger.claim(transactionID: "2000", account: "alice", at: 2)
        _ = try ledger.link(originalTransactionIDs: ["2000"], to: "bob", source: .purchase, at: 3)
        #expect(try ledger.deleteAccount("alice"))
        #expect(try ledger.account("alice") == nil)
        #expect(try ledger.owner(originalTransactionID: E.original) == nil)
        #expect(try ledger.owner(originalTransactionID: "2000") == "bob")
        // The transfer named alice: gone from bob's record too.
        #expect(try ledger.account("bob")?.record.transfers == [])
        #expect(try ledger.transaction(id: "1000")?.facts == Self.tokened("1000"))
        #expect(try ledger.transaction(id: "2000")?.claim == Claim(account: "alice", claimedAt: 2))
        #expect(try !ledger.deleteAccount("alice"))
        // The token is free again; what bob took stays his.
        #expect(try ledger.registerAppAccountToken(Self.tokenA, account: "carol", at: 4)
            == .registered(first: true, links: [E.original: .linked, "2000": .ownedByAnotherAccount]))
    }

    // MARK: - migration and concurrency

    @Test(arguments: Backend.tested)
    func version4Transactions_carryingATokenLink_whenItIsRegistered(_ backend: Backend) throws {
        let location = try DatabaseLocation.fresh(backend)
        _ = try location.open(schemaVersion: 4)
        let stored = Self.tokened("1000")
        try VersionOrderMigrationTests.insertAsVersion2(stored, sources: [.jws], location.rawConnection())
        try VersionOrderMigrationTests.insertAsVersion2(E.transaction("2000", purchase: E.t0, expires: nil,
            signed: E.t0, original: "2000"), sources: [.receipt], location.rawConnection())
        // More than one page of the back-fill's reads.
        let many = 2 * LedgerStatements.idsPerStatement + 1
        do {
            let raw = try location.rawConnection()
            try raw.execute("BEGIN")
            for number in 0..<many {
                try VersionOrderMigrationTests.insertAsVersion2(
                    Self.tokened("b\(number)", original: "3000", token: Self.tokenB), sources: [.notification], raw)
            }
            try raw.execute("COMMIT")
        }
        let ledger = try location.open()
        #expect(try ledger.transaction(id: "1000")?.facts.appAccountToken == Self.tokenA)
        #expect(try ledger.transaction(id: "2000")?.facts.appAccountToken == nil)
        #expect(try ledger.registerAppAccountToken(Self.tokenA, account: "alice", at: 1)
            == .registered(first: true, links: [E.original: .linked]))
        let backfilled = try location.rawConnection().query(
            "SELECT count(*) FROM transactions WHERE app_account_token = $1", [.text(Self.tokenB)])
        #expect(backfilled.first?.int(0) == many)
    }

    @Test(.enabled(if: !Backend.skipPostgres))
    func concurrentExplicitLinks_fromTwoServers_endWithOneOwnerAndEachMoveOnce() throws {
        let location = try DatabaseLocation.fresh(.postgres)
        // Two hundred waits in line for one row lock: a generous bound, not a speed claim.
        let ledgers = [try location.open(timeout: 60), try location.open(timeout: 60)]
        try ledgers[0].record(transactions: [E.firstMonth], source: .jws)
        let outcomes = Mutex<[AccountLinkOutcome?]>([])
        onThreads(200) { index in
            let outcome = try? ledgers[index % 2].link(
                originalTransactionIDs: [E.original], to: "account-\(index)", source: .purchase, at: Int64(index))
            outcomes.withLock { $0.append(outcome?[E.original]) }
        }
        let all = outcomes.withLock { $0 }
        #expect(all.count == 200)
        #expect(all.filter { $0 == nil }.isEmpty)
        #expect(all.filter { $0 == .linked }.count == 1)
        let previousOwners = all.compactMap { outcome -> String? in
            if case .transferred(let previous)? = outcome { previous } else { nil }
        }
        #expect(previousOwners.count == 199)
        // A chain: every account lost it at most once, and the final owner never did.
        #expect(Set(previousOwners).count == 199)
        let owner = try #require(try ledgers[1].owner(originalTransactionID: E.original))
        #expect(!previousOwners.contains(owner))
        let received = try #require(try ledgers[1].account(owner)).record.transfers.filter { $0.toAccount == owner }
        #expect(received.count == 1)
        #expect(try ledgers[0].counts().accounts == 200)
        #expect(try ledgers[0].counts().accountLinks == 1)
    }

    @Test(.enabled(if: !Backend.skipPostgres))
    func tokenRegisteredWhileItsPurchasesAreStored_linksEveryOne() throws {
        let location = try DatabaseLocation.fresh(.postgres)
        let ledgers = [try location.open(timeout: 60), try location.open(timeout: 60)]
        onThreads(41) { index in
            if index == 0 {
                _ = try? ledgers[0].registerAppAccountToken(Self.tokenA, account: "alice", at: 1)
            } else {
                try? ledgers[index % 2].record(
                    transactions: [Self.tokened("\(index)", original: "\(index)")], source: .notification)
            }
        }
        let alice = try #require(try ledgers[0].account("alice"))
        #expect(alice.record.links.count == 40)
    }
}
