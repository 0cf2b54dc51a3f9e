import HTTP1Server
import JSONText
import Ledger
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService

/// Verified StoreKit 2 transactions reach the ledger with their `appAccountToken`, which links them to the account
/// that registered it.
struct AppAccountTokenRouteTests {
    typealias E = SignedEvents

    static let token = "5C2B7E10-3A4D-4F6B-8E9A-0B1C2D3E4F5A"

    @Test(arguments: Backend.tested)
    func notificationWithARegisteredToken_linksItsPurchase(_ backend: Backend) throws {
        let store = try makeLedger(backend)
        let routes = LedgerService.routes(PurchaseLedger(store: store))
        _ = try store.registerAppAccountToken(Self.token, account: "alice", at: 1)
        var transaction = E.firstMonth
        transaction.edits.set.append(("appAccountToken", .string(Self.token)))
        let delivered = routes.deliver(
            try E.notification("SUBSCRIBED", "INITIAL_BUY", signed: -10, transaction: transaction))
        #expect(delivered.status == 200)
        #expect(try store.transaction(id: "7000")?.facts.appAccountToken == Self.token.lowercased())
        #expect(try store.owner(originalTransactionID: E.original) == "alice")
    }

    @Test func notificationWithoutAToken_storesNone() throws {
        let store = try makeLedger(.sqlite)
        let routes = LedgerService.routes(PurchaseLedger(store: store))
        #expect(routes.deliver(try E.subscribed()).status == 200)
        #expect(try store.transaction(id: "7000")?.facts.appAccountToken == nil)
    }
}
