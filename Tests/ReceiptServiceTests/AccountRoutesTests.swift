import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import StoreKitJWS
import Synchronization
import TestSupport
import Testing

@testable import ReceiptService

/// The account routes (issue 24) over a real SQLite ledger, with StoreKit 2 data forged by the test chain: linking by
/// token (before and after the transaction), by posted purchases and by claims; reading at an instant; forgetting.
struct AccountRoutesTests {
    typealias E = SignedEvents

    static let token = "6f2b9c1e-3a4d-4c5e-8f90-1a2b3c4d5e6f"

    /// The ledger tests' service with `pro` granted by `pro.monthly`, over a ledger that links under `restore`.
    static func routes(
        restore: RestoreBehavior = .transfer, _ backend: Backend = .sqlite,
        clock: @escaping @Sendable () -> Date = { fixedNow }
    ) throws -> ReceiptRoutes {
        var configuration = LedgerService.configuration
        configuration.apps[0].entitlements = ["pro": ["pro.monthly"]]
        configuration.apps[0].restoreBehavior = restore
        let linkRules = configuration.accountLinkRules
        let store: any LedgerStore =
            switch backend {
            case .sqlite:
                try SQLiteLedger(path: Scratch.newPath("accounts.sqlite"), clock: TestClock.fixed, linkRules: linkRules)
            case .postgres:
                try PostgresLedger(
                    connectionString: try PostgresCluster.shared.get().newDatabase(), clock: TestClock.fixed,
                    linkRules: linkRules)
            }
        let validator = configuration.makeValidator()
        return ReceiptRoutes(
            configuration: configuration, validator: validator, jwsVerifier: JWSVerifier(policy: validator.policy),
            ledger: PurchaseLedger(store: store), metrics: ServiceMetrics(), clock: clock)
    }

    static func put(_ target: String) -> HTTPRequest { request(.put, target) }

    static func purchase(_ routes: ReceiptRoutes, account: String, jws: String) -> HTTPResponse {
        routes.handle(
            post("/v1/accounts/\(account)/purchases", contentType: "application/json", text: #"{"jws":"\#(jws)"}"#),
            on: .main)
    }

    /// The first month of `E.original`, carrying `token` when given.
    static func firstMonth(token: String? = nil, id: String = "7000", original: String = E.original) -> JSONValue {
        var blueprint = E.transaction(id, purchased: -10, expires: 20, signed: -10, original: original)
        if let token { blueprint.edits.set.append(("appAccountToken", .string(token))) }
        return blueprint.payload
    }

    static func signed(_ payload: JSONValue) throws -> String { try JWSPKI.atFixedNow.sign(payload) }

    static func subscribed(token: String?) throws -> String {
        var transaction = E.firstMonth
        if let token { transaction.edits.set.append(("appAccountToken", .string(token))) }
        return try E.notification(
            "SUBSCRIBED", "INITIAL_BUY", signed: -10, transaction: transaction, renewal: E.renewal(signed: -10))
    }

    static func originals(_ account: JSONValue?) -> [String] {
        (account?["purchases"]?.arrayValue ?? []).compactMap { $0["original_transaction_id"]?.stringValue }
    }

    // MARK: - PUT /v1/accounts/{account}/app_account_tokens/{uuid}

    @Test func tokenBeforeTheTransaction_linksItWhenItArrives() throws {
        let routes = try Self.routes()
        let registered = routes.handle(Self.put("/v1/accounts/alice/app_account_tokens/\(Self.token)"), on: .main)
        #expect(registered.status == 200)
        #expect(registered.json?.keys == ["account", "app_account_token", "registered", "first", "linked"])
        #expect(registered.json?["first"] == .bool(true))
        #expect(registered.json?["linked"] == .array([]))
        #expect(routes.deliver(try Self.subscribed(token: Self.token)).status == 200)

        let account = routes.handle(get("/v1/accounts/alice"), on: .main)
        #expect(account.status == 200)
        #expect(Self.originals(account.json) == [E.original])
        #expect(account.json?["app_account_tokens"] == .array([.string(Self.token)]))
    }

    @Test func tokenAfterTheTransaction_linksWhatTheLedgerHolds_andSaysSo() throws {
        let routes = try Self.routes()
        #expect(routes.deliver(try Self.subscribed(token: Self.token)).status == 200)
        let registered = routes.handle(
            Self.put("/v1/accounts/alice/app_account_tokens/\(Self.token.uppercased())"), on: .main)
        #expect(registered.status == 200)
        #expect(registered.json?["app_account_token"] == .string(Self.token))
        #expect(registered.json?["linked"] == .array([.string(E.original)]))

        let again = routes.handle(Self.put("/v1/accounts/alice/app_account_tokens/\(Self.token)"), on: .main)
        #expect(again.json?["first"] == .bool(false))
        #expect(again.json?["linked"] == .array([]))
        #expect(Self.originals(routes.handle(get("/v1/accounts/alice"), on: .main).json) == [E.original])
    }

    @Test func tokenOfAnotherAccount_is409_namingTheTokenOnly() throws {
        let routes = try Self.routes()
        #expect(routes.handle(Self.put("/v1/accounts/alice/app_account_tokens/\(Self.token)"), on: .main).status == 200)
        let refused = routes.handle(Self.put("/v1/accounts/bob/app_account_tokens/\(Self.token)"), on: .main)
        #expect(refused.status == 409)
        #expect(refused.errorCode == "token_owned_by_another_account")
        #expect(refused.text.contains(Self.token))
        #expect(!refused.text.contains("alice"))
        #expect(routes.handle(get("/v1/accounts/bob"), on: .main).errorCode == "account_not_found")
    }

    @Test(arguments: ["not-a-uuid", "6f2b9c1e3a4d4c5e8f901a2b3c4d5e6f", "6f2b9c1e-3a4d-4c5e-8f90-1a2b3c4d5e6g", "%20"])
    func tokenThatIsNotAUUID_is400(token: String) throws {
        let routes = try Self.routes()
        let response = routes.handle(Self.put("/v1/accounts/alice/app_account_tokens/\(token)"), on: .main)
        #expect(response.status == 400)
        #expect(response.errorDetail == "invalid_app_account_token")
    }

    // MARK: - Accounts in paths

    @Test(arguments: ["%00", "a%0Ab", "%FF", "%C3", "%zz", "%4", "%", "a%", String(repeating: "a", count: 257)])
    func accountThatCannotBeStored_is400(account: String) throws {
        let routes = try Self.routes()
        for request in [
            get("/v1/accounts/\(account)"), request(.delete, "/v1/accounts/\(account)"),
            Self.put("/v1/accounts/\(account)/app_account_tokens/\(Self.token)"),
        ] {
            let response = routes.handle(request, on: .main)
            #expect(response.status == 400, "\(request.method) \(account)")
            #expect(response.errorDetail == "invalid_account", "\(request.method) \(account)")
        }
    }

    @Test func percentEncodedAccount_isDecoded_andPlusStaysPlus() throws {
        let routes = try Self.routes()
        let registered = routes.handle(
            Self.put("/v1/accounts/user%2042%2B%C3%A9+x/app_account_tokens/\(Self.token)"), on: .main)
        #expect(registered.json?["account"] == .string("user 42+é+x"))
        let account = routes.handle(get("/v1/accounts/user%2042+%C3%A9%2Bx"), on: .main)
        #expect(account.json?["account"] == .string("user 42+é+x"))
    }

    @Test func encodedSlash_staysInsideTheAccount() throws {
        let routes = try Self.routes()
        let registered = routes.handle(Self.put("/v1/accounts/team%2F42/app_account_tokens/\(Self.token)"), on: .main)
        #expect(registered.json?["account"] == .string("team/42"))
        #expect(routes.handle(get("/v1/accounts/team%2f42"), on: .main).json?["account"] == .string("team/42"))
        #expect(routes.handle(get("/v1/accounts/team/42"), on: .main).status == 404)
    }

    @Test func accountRoutes_areNeverOnThePublicListener() throws {
        let routes = try Self.routes()
        for request in [
            get("/v1/accounts/alice"), request(.delete, "/v1/accounts/alice"),
            Self.put("/v1/accounts/alice/app_account_tokens/\(Self.token)"),
            post("/v1/accounts/alice/purchases", contentType: "application/json", text: "{}"),
        ] {
            #expect(routes.handle(request, on: .public).status == 404, "\(request.method) \(request.path)")
        }
    }

    @Test func otherMethodsOnAnAccount_are405_allowingGetAndDelete() throws {
        let response = try Self.routes().handle(request(.put, "/v1/accounts/alice"), on: .main)
        #expect(response.status == 405)
        #expect(response.headers["Allow"] == "GET, DELETE")
    }

    @Test func withoutAStore_accountRoutesAre503() {
        let routes = LedgerService.routes()
        for request in [get("/v1/accounts/alice"), Self.put("/v1/accounts/alice/app_account_tokens/\(Self.token)")] {
            #expect(routes.handle(request, on: .main).errorCode == "store_not_configured")
        }
    }

    // MARK: - GET and DELETE /v1/accounts/{account}

    @Test func unknownAccount_is404() throws {
        let response = try Self.routes().handle(get("/v1/accounts/nobody"), on: .main)
        #expect(response.status == 404)
        #expect(response.errorCode == "account_not_found")
    }

    @Test(arguments: ["yesterday", "2026-13-01T00:00:00Z", ""])
    func atThatIsNotADate_is400_namingIt(at: String) throws {
        let response = try Self.routes().handle(get("/v1/accounts/alice?at=\(at)"), on: .main)
        #expect(response.status == 400)
        #expect(response.errorDetail == "invalid_date")
        #expect(response.json?["error"]?["message"]?.stringValue?.contains("\"\(at)\"") == true)
    }

    @Test func delete_forgetsTheAccount_butNotApplesFacts() throws {
        let routes = try Self.routes()
        #expect(routes.handle(Self.put("/v1/accounts/alice/app_account_tokens/\(Self.token)"), on: .main).status == 200)
        #expect(routes.deliver(try Self.subscribed(token: Self.token)).status == 200)

        let deleted = routes.handle(request(.delete, "/v1/accounts/alice"), on: .main)
        #expect(deleted.status == 200)
        #expect(deleted.json == .object([("account", .string("alice")), ("deleted", .bool(true))]))
        #expect(routes.handle(get("/v1/accounts/alice"), on: .main).errorCode == "account_not_found")
        #expect(routes.handle(request(.delete, "/v1/accounts/alice"), on: .main).errorCode == "account_not_found")
        #expect(routes.handle(get("/v1/subscriptions/\(E.original)"), on: .main).status == 200)
        // The token went with the account: another may register it now.
        #expect(routes.handle(Self.put("/v1/accounts/bob/app_account_tokens/\(Self.token)"), on: .main).status == 200)
    }

    /// The server remembers what it read of an account until anything is written: each GET below follows a write that
    /// changes the account, and must not be answered with what the GET before it read.
    @Test func accountReadAgainAfterEachWrite_showsWhatTheWriteChanged() throws {
        let routes = try Self.routes()
        func alice() -> HTTPResponse { routes.handle(get("/v1/accounts/alice"), on: .main) }
        #expect(routes.handle(Self.put("/v1/accounts/alice/app_account_tokens/\(Self.token)"), on: .main).status == 200)
        #expect(Self.originals(alice().json) == [])
        #expect(Self.originals(alice().json) == [])

        #expect(routes.deliver(try Self.subscribed(token: Self.token)).status == 200)
        #expect(Self.originals(alice().json) == [E.original])
        #expect(alice().json?["entitlements"]?["pro"]?["active"] == .bool(true))

        #expect(Self.purchase(routes, account: "bob", jws: try Self.signed(Self.firstMonth())).status == 200)
        #expect(Self.originals(alice().json) == [])
        #expect(alice().json?["entitlements"]?["pro"]?["ended_reason"] == .string("transferred"))

        #expect(routes.handle(request(.delete, "/v1/accounts/alice"), on: .main).status == 200)
        #expect(alice().errorCode == "account_not_found")
    }

    /// An account asked again is answered from memory only while that says what the rules say at the clock's instant:
    /// passing the expiry by a millisecond ends the entitlement, going back brings it back, and `at` is always the
    /// instant asked about.
    @Test func accountAskedAgain_followsTheClockPastItsExpiry() throws {
        let now = Mutex(fixedNow)
        let routes = try Self.routes(clock: { now.withLock { $0 } })
        func set(_ milliseconds: Int64) {
            // Read back rounding down: half a millisecond later is that millisecond exactly.
            now.withLock { $0 = Date(timeIntervalSince1970: (Double(milliseconds) + 0.5) / 1000) }
        }
        func alice() -> JSONValue? { routes.handle(get("/v1/accounts/alice"), on: .main).json }
        #expect(Self.purchase(routes, account: "alice", jws: try Self.signed(Self.firstMonth())).status == 200)
        let first = try #require(alice())
        #expect(first["entitlements"]?["pro"]?["active"] == .bool(true))
        let expires = first["entitlements"]?["pro"]?["expires_date"]?.stringValue.flatMap(ReceiptDate.init(rfc3339:))
        let expiry = try #require(expires).millisecondsSince1970
        let steps = [(expiry - 1, true), (expiry - 1, true), (expiry, false), (expiry + 1, false), (expiry - 1, true)]
        for (instant, active) in steps {
            set(instant)
            let answer = alice()
            #expect(answer?["entitlements"]?["pro"]?["active"] == .bool(active), "\(instant - expiry) ms from expiry")
            #expect(answer?["subscriptions"]?[0]?["status"] == .string(active ? "active" : "expired"))
            #expect(answer?["at"] == .string(ReceiptDate(millisecondsSince1970: instant).rfc3339))
        }
    }

    /// Writes that change an account but none of its transactions (a token registered, the account deleted) end the
    /// answer kept from before them all the same.
    @Test func accountAskedAgain_afterAWriteOfItsOwn_showsTheWrite() throws {
        let routes = try Self.routes()
        func alice() -> HTTPResponse { routes.handle(get("/v1/accounts/alice"), on: .main) }
        #expect(Self.purchase(routes, account: "alice", jws: try Self.signed(Self.firstMonth())).status == 200)
        for _ in 0..<2 { #expect(alice().json?["app_account_tokens"] == .array([])) }
        #expect(routes.handle(Self.put("/v1/accounts/alice/app_account_tokens/\(Self.token)"), on: .main).status == 200)
        for _ in 0..<2 { #expect(alice().json?["app_account_tokens"] == .array([.string(Self.token)])) }
        #expect(routes.handle(request(.delete, "/v1/accounts/alice"), on: .main).status == 200)
        #expect(alice().errorCode == "account_not_found")
    }

    /// The served answer reads `period_type` where the transaction's text is kept; the rules read the payload.
    @Test func freeTrial_isTrial_inTheServedAnswerEveryTime() throws {
        let routes = try Self.routes()
        var trial = E.transaction("7000", purchased: -10, expires: 20, signed: -10)
        trial.edits.set += [("offerType", .integer(1)), ("offerDiscountType", .string("FREE_TRIAL"))]
        let posted = Self.purchase(routes, account: "alice", jws: try Self.signed(trial.payload))
        #expect(posted.json?["entitlements"]?["pro"]?["period_type"] == .string("trial"))
        for _ in 0..<2 {
            let served = routes.handle(get("/v1/accounts/alice"), on: .main).json
            #expect(served?["entitlements"]?["pro"]?["period_type"] == .string("trial"))
        }
    }

    // MARK: - POST /v1/accounts/{account}/purchases

    @Test func postedPurchase_isValidatedRecordedAndLinked() throws {
        let routes = try Self.routes()
        let jws = try Self.signed(Self.firstMonth())
        let response = Self.purchase(routes, account: "alice", jws: jws)
        #expect(response.status == 200)
        let json = try #require(response.json)
        #expect(json["account"] == .string("alice"))
        #expect(Self.originals(json) == [E.original])
        #expect(json.keys.last == "validation")
        #expect(json["validation"]?["valid"] == .bool(true))
        #expect(json["validation"]?["ledger"] == .string("available"))
        #expect(Self.originals(routes.handle(get("/v1/accounts/alice"), on: .main).json) == [E.original])
        #expect(routes.handle(get("/v1/transactions/7000"), on: .main).status == 200)
    }

    /// `/v1/validate` never uses the originals, so it does not collect them; the purchases route does, once each.
    @Test func validation_collectsOriginalsOnlyWhenAsked() throws {
        let routes = try Self.routes()
        let jws = post(
            "/v1/validate", contentType: "application/json", text: #"{"jws":"\#(try Self.signed(Self.firstMonth()))"}"#)
        for (request, originals) in [(jws, [E.original]), (try ReceiptLedgerRouteTests.receipt(), ["8000", "8100"])] {
            #expect(routes.validation(of: request, wantsHTML: false, collectingOriginals: false).originals == [])
            let collected = routes.validation(of: request, wantsHTML: false, collectingOriginals: true).originals
            #expect(collected.sorted() == originals)
        }
    }

    /// Each on a ledger of its own, so that both record the body as new.
    @Test func postedPurchase_embedsValidatesAnswer_byteForByte() throws {
        let jws = #"{"jws":"\#(try Self.signed(Self.firstMonth()))"}"#
        let receipt = try ReceiptLedgerRouteTests.receipt().body
        for (contentType, body) in [("application/json", Array(jws.utf8)), ("application/octet-stream", receipt)] {
            let validated = try Self.routes().handle(
                post("/v1/validate", contentType: contentType, body: body), on: .main)
            let posted = try Self.routes().handle(
                post("/v1/accounts/alice/purchases", contentType: contentType, body: body), on: .main)
            #expect(validated.status == 200, "\(contentType)")
            #expect(posted.status == 200, "\(contentType)")
            let ending = Array(#","validation":"#.utf8) + validated.body + [UInt8(ascii: "}")]
            #expect(posted.body.count > ending.count, "\(contentType)")
            #expect(posted.body.suffix(ending.count).elementsEqual(ending), "\(contentType)")
            #expect(posted.json?["account"] == .string("alice"), "\(contentType)")
        }
    }

    @Test(arguments: [
        ("{", "application/json"), (#"{"jws":"a.b.c"}"#, "application/json"), ("", "application/json"),
        ("not base64 !!", "text/plain"),
    ])
    func invalidBody_answersAsValidateWould_andLinksNothing(body: String, contentType: String) throws {
        let routes = try Self.routes()
        let validate = routes.handle(post("/v1/validate", contentType: contentType, text: body), on: .main)
        let posted = routes.handle(
            post("/v1/accounts/alice/purchases", contentType: contentType, text: body), on: .main)
        #expect(posted.status == validate.status)
        #expect(posted.json == validate.json)
        #expect(routes.handle(get("/v1/accounts/alice"), on: .main).errorCode == "account_not_found")
    }

    @Test func forgedPurchase_is422AsValidateSays_andLinksNothing() throws {
        let routes = try Self.routes()
        let forged = try JWSPKI.rogue.sign(Self.firstMonth())
        let posted = Self.purchase(routes, account: "alice", jws: forged)
        #expect(posted.status == 422)
        #expect(posted.json?["error"] == nil || posted.json?["valid"] == .bool(false))
        #expect(routes.handle(get("/v1/accounts/alice"), on: .main).errorCode == "account_not_found")
    }

    // MARK: - Restore behaviors, through posted purchases

    /// A month that ran out ten days ago: it grants nothing now.
    static func lastMonth() throws -> String {
        try signed(E.transaction("7000", purchased: -40, expires: -10, signed: -40).payload)
    }

    @Test(arguments: Backend.tested)
    func transfer_movesThePurchase_andThePreviousAccountSeesWhy(_ backend: Backend) throws {
        let routes = try Self.routes(restore: .transfer, backend)
        let jws = try Self.signed(Self.firstMonth())
        #expect(Self.purchase(routes, account: "alice", jws: jws).status == 200)
        let bob = Self.purchase(routes, account: "bob", jws: jws)
        #expect(bob.status == 200)
        #expect(bob.json?["entitlements"]?["pro"]?["active"] == .bool(true))
        let alice = try #require(routes.handle(get("/v1/accounts/alice"), on: .main).json)
        #expect(Self.originals(alice) == [])
        #expect(alice["entitlements"]?["pro"]?["active"] == .bool(false))
        #expect(alice["entitlements"]?["pro"]?["ended_reason"] == .string("transferred"))
    }

    @Test(arguments: Backend.tested)
    func keepWithOriginal_refusesWithoutNamingTheOwner_andChangesNothing(_ backend: Backend) throws {
        let routes = try Self.routes(restore: .keepWithOriginal, backend)
        let jws = try Self.signed(Self.firstMonth())
        #expect(Self.purchase(routes, account: "alice", jws: jws).status == 200)
        let bob = Self.purchase(routes, account: "bob", jws: jws)
        #expect(bob.status == 409)
        #expect(bob.errorCode == "owned_by_another_account")
        #expect(!bob.text.contains("alice"))
        #expect(routes.handle(get("/v1/accounts/bob"), on: .main).errorCode == "account_not_found")
        #expect(Self.originals(routes.handle(get("/v1/accounts/alice"), on: .main).json) == [E.original])
    }

    @Test func transferIfNoActive_refusesWhileItGrants() throws {
        let routes = try Self.routes(restore: .transferIfNoActive)
        let jws = try Self.signed(Self.firstMonth())
        #expect(Self.purchase(routes, account: "alice", jws: jws).status == 200)
        #expect(Self.purchase(routes, account: "bob", jws: jws).errorCode == "owned_by_another_account")
        #expect(Self.originals(routes.handle(get("/v1/accounts/alice"), on: .main).json) == [E.original])
    }

    @Test func transferIfNoActive_movesWhatGrantsNothing() throws {
        let routes = try Self.routes(restore: .transferIfNoActive)
        let jws = try Self.lastMonth()
        #expect(Self.purchase(routes, account: "alice", jws: jws).status == 200)
        #expect(Self.purchase(routes, account: "bob", jws: jws).status == 200)
        #expect(Self.originals(routes.handle(get("/v1/accounts/bob"), on: .main).json) == [E.original])
        #expect(Self.originals(routes.handle(get("/v1/accounts/alice"), on: .main).json) == [])
    }

    /// After another user restored on the same Apple ID, every renewal still carries the first user's token: token
    /// links never take a purchase from its owner.
    @Test func tokenLink_neverTakesFromAnotherAccount() throws {
        let routes = try Self.routes(restore: .transfer)
        #expect(Self.purchase(routes, account: "alice", jws: try Self.signed(Self.firstMonth(token: Self.token))).status == 200)
        let bob = routes.handle(Self.put("/v1/accounts/bob/app_account_tokens/\(Self.token)"), on: .main)
        #expect(bob.status == 200)
        #expect(bob.json?["linked"] == .array([]))
        #expect(Self.originals(routes.handle(get("/v1/accounts/bob"), on: .main).json) == [])
        #expect(Self.originals(routes.handle(get("/v1/accounts/alice"), on: .main).json) == [E.original])
    }

    // MARK: - ?at=

    @Test func at_appliesTheRulesAtThatInstant() throws {
        let routes = try Self.routes()
        #expect(Self.purchase(routes, account: "alice", jws: try Self.signed(Self.firstMonth())).status == 200)
        let now = try #require(routes.handle(get("/v1/accounts/alice"), on: .main).json)
        #expect(now["entitlements"]?["pro"]?["active"] == .bool(true))
        #expect(now["at"] == .string(ReceiptDate(fixedNow).rfc3339))

        let before = ReceiptDate(E.at(-20)).rfc3339
        let then = try #require(routes.handle(get("/v1/accounts/alice?at=\(before)"), on: .main).json)
        #expect(then["at"] == .string(before))
        #expect(then["entitlements"]?["pro"] == nil)
        #expect(Self.originals(then) == [])

        let after = ReceiptDate(E.at(30)).rfc3339
        let later = try #require(routes.handle(get("/v1/accounts/alice?at=\(after)"), on: .main).json)
        #expect(later["entitlements"]?["pro"]?["active"] == .bool(false))
        #expect(later["entitlements"]?["pro"]?["ended_reason"] == .string("expired"))
    }

    /// Both posts happen at `fixedNow`: a day before it, the purchase was still alice's, and bob had nothing.
    @Test(arguments: Backend.tested)
    func at_beforeATransfer_isAsOwnershipStoodThen(_ backend: Backend) throws {
        let routes = try Self.routes(restore: .transfer, backend)
        let jws = try Self.signed(Self.firstMonth())
        #expect(Self.purchase(routes, account: "alice", jws: jws).status == 200)
        #expect(Self.purchase(routes, account: "bob", jws: jws).status == 200)
        func account(_ name: String, at days: Double) throws -> JSONValue {
            let at = ReceiptDate(E.at(days)).rfc3339
            return try #require(routes.handle(get("/v1/accounts/\(name)?at=\(at)"), on: .main).json)
        }

        let aliceBefore = try account("alice", at: -1)
        #expect(aliceBefore["entitlements"]?["pro"]?["active"] == .bool(true))
        #expect(aliceBefore["entitlements"]?["pro"]?["ended_reason"] == nil)
        #expect(Self.originals(aliceBefore) == [E.original])
        let bobBefore = try account("bob", at: -1)
        #expect(bobBefore["entitlements"]?["pro"] == nil)
        #expect(Self.originals(bobBefore) == [])

        let aliceAtTransfer = try account("alice", at: 0)
        #expect(aliceAtTransfer["entitlements"]?["pro"]?["active"] == .bool(false))
        #expect(aliceAtTransfer["entitlements"]?["pro"]?["ended_reason"] == .string("transferred"))
        #expect(Self.originals(aliceAtTransfer) == [])
        let bobAtTransfer = try account("bob", at: 0)
        #expect(bobAtTransfer["entitlements"]?["pro"]?["active"] == .bool(true))
        #expect(Self.originals(bobAtTransfer) == [E.original])
    }

    @Test func subscriptionAt_isTheSubscriptionAsItStoodThen() throws {
        let routes = try Self.routes()
        #expect(routes.deliver(try Self.subscribed(token: nil)).status == 200)
        #expect(routes.deliver(try LedgerRouteTests.refund()).status == 200)
        let now = routes.handle(get("/v1/subscriptions/7000"), on: .main)
        #expect(now.json?["status"] == .string("revoked"))
        let beforeRefund = routes.handle(get("/v1/subscriptions/7000?at=\(ReceiptDate(E.at(-7)).rfc3339)"), on: .main)
        #expect(beforeRefund.json?["status"] == .string("active"))
        #expect(beforeRefund.json?["revocation_date"] == .null)
        let beforePurchase = routes.handle(get("/v1/subscriptions/7000?at=\(ReceiptDate(E.at(-20)).rfc3339)"), on: .main)
        #expect(beforePurchase.status == 404)
        #expect(routes.handle(get("/v1/subscriptions/7000?at=soon"), on: .main).errorDetail == "invalid_date")
    }

    @Test(arguments: [
        ("/v1/accounts/user-42", "/v1/accounts/{account}"),
        ("/v1/accounts/user%2042/purchases", "/v1/accounts/{account}/purchases"),
        ("/v1/accounts/u/app_account_tokens/\(token)", "/v1/accounts/{account}/app_account_tokens/{app_account_token}"),
        ("/v1/accounts/", "/v1/accounts/{account}"),
        ("/v1/transactions/7000", "/v1/transactions/7000"),
    ])
    func accessLog_neverNamesTheAccountOrItsToken(path: String, logged: String) {
        #expect(ServiceLog.loggedPath(path) == logged)
    }

    // MARK: - The support page's lookup box

    @Test func lookupOfAnAccount_showsEntitlementsTimelinesAndPurchases() throws {
        let routes = try Self.routes()
        #expect(Self.purchase(routes, account: "alice", jws: try Self.signed(Self.firstMonth())).status == 200)
        let page = routes.handle(get("/lookup?account=alice"), on: .main)
        #expect(page.status == 200)
        #expect(page.text.contains(#"data-matched="account""#))
        #expect(page.text.contains(#"data-entitlement="pro" data-active="true""#))
        #expect(page.text.contains(#"<section class="subscription" data-original-transaction-id="7000">"#))
        #expect(page.text.contains(#"<table class="purchases">"#))
        #expect(page.text.contains(#"<tr data-transaction-id="7000">"#))

        let unknown = routes.handle(get("/lookup?account=nobody"), on: .main)
        #expect(unknown.status == 404)
        #expect(unknown.text.contains(#"data-code="account_not_found""#))
        #expect(routes.handle(get("/lookup?id=7000"), on: .main).status == 200)
    }

    // MARK: - Claims

    @Test func claim_linksTheClaimedTransactionsOriginal() throws {
        let routes = try Self.routes()
        #expect(routes.deliver(try Self.subscribed(token: nil)).status == 200)
        #expect(routes.claim("7000", account: "carol").status == 200)
        #expect(Self.originals(routes.handle(get("/v1/accounts/carol"), on: .main).json) == [E.original])
    }
}
