import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import TestSupport
import Testing

@testable import ReceiptService

/// `POST /v1/transactions/{id}/claim`: what Apple revoked is never granted, every answer names the purchase, and an
/// account that can never be stored is the caller's mistake.
struct ClaimRouteTests {
    typealias E = SignedEvents

    static func claim(_ routes: ReceiptRoutes, _ id: String, body: String) -> HTTPResponse {
        routes.handle(post("/v1/transactions/\(id)/claim", contentType: "application/json", text: body), on: .main)
    }

    @Test(arguments: Backend.tested)
    func claimOfARefundedTransaction_is409Revoked_andGrantsNothing(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        #expect(routes.deliver(try E.subscribed()).status == 200)
        #expect(routes.deliver(try LedgerRouteTests.refund()).status == 200)

        let response = routes.claim("7000", account: "alice")
        #expect(response.status == 409)
        #expect(response.errorCode == "revoked")
        let json = try #require(response.json)
        #expect(json.keys == [
            "error", "transaction_id", "product_id", "environment", "revocation_date", "revocation_reason", "claim",
        ])
        #expect(json["transaction_id"] == .string("7000"))
        #expect(json["product_id"] == .string("pro.monthly"))
        #expect(json["environment"] == .string("Sandbox"))
        #expect(json["revocation_date"] == LedgerRouteTests.day(-5))
        #expect(json["revocation_reason"] == .integer(0))
        #expect(json["claim"] == .null)
        #expect(routes.handle(get("/v1/transactions/7000"), on: .main).json?["claim"] == .null)
    }

    @Test(arguments: Backend.tested)
    func claimBeforeARefund_stays_andTheTransactionShowsBoth(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        #expect(routes.deliver(try E.subscribed()).status == 200)
        let granted = routes.claim("7000", account: "alice")
        #expect(granted.status == 200)
        #expect(routes.deliver(try LedgerRouteTests.refund()).status == 200)

        let record = try #require(routes.handle(get("/v1/transactions/7000"), on: .main).json)
        #expect(record["claim"]?["account"] == .string("alice"))
        #expect(record["claim"]?["claimed_at"] == granted.json?["claimed_at"])
        #expect(record["transaction"]?["revocation_date"] == LedgerRouteTests.day(-5))
        #expect(record["transaction"]?["revocation_reason"] == .integer(0))

        for account in ["alice", "bob"] {
            let again = routes.claim("7000", account: account)
            #expect(again.status == 409, "\(account)")
            #expect(again.errorCode == "revoked", "\(account)")
            #expect(again.json?["claim"]?["account"] == .string("alice"), "\(account)")
        }
    }

    @Test(arguments: Backend.tested)
    func everyClaimAnswer_namesTheProductAndEnvironment(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        #expect(routes.deliver(try E.subscribed()).status == 200)
        let first = routes.claim("7000", account: "alice")
        #expect(first.json?.keys == [
            "transaction_id", "account", "claimed_at", "first_claim", "product_id", "environment", "finished_at",
            "apple_calls",
        ])
        let other = routes.claim("7000", account: "bob")
        #expect(other.errorCode == "already_claimed")
        for answer in [first, routes.claim("7000", account: "alice"), other] {
            #expect(answer.json?["transaction_id"] == .string("7000"))
            #expect(answer.json?["product_id"] == .string("pro.monthly"))
            #expect(answer.json?["environment"] == .string("Sandbox"))
        }
    }

    static let unstorableAccounts: [(String, String)] = [
        ("NUL", #"{"account":"alice\u0000"}"#),
        ("a control character", #"{"account":"alice\u0007bob"}"#),
        ("a newline", #"{"account":"alice\nbob"}"#),
        ("DEL", #"{"account":"alice\u007F"}"#),
        ("a C1 control", #"{"account":"alice\u0085"}"#),
        ("257 bytes", #"{"account":"\#(String(repeating: "a", count: 257))"}"#),
        ("7 MB", #"{"account":"\#(String(repeating: "a", count: 7 * 1024 * 1024))"}"#),
    ]

    @Test(arguments: Backend.tested)
    func unstorableAccount_is400BadRequest_neverStored(_ backend: Backend) throws {
        let routes = try LedgerService.routes(backend)
        #expect(routes.deliver(try E.subscribed()).status == 200)
        for (name, body) in Self.unstorableAccounts {
            let response = Self.claim(routes, "7000", body: body)
            #expect(response.status == 400, "\(name)")
            #expect(response.errorCode == "bad_request", "\(name)")
        }
        #expect(routes.handle(get("/v1/transactions/7000"), on: .main).json?["claim"] == .null)
    }

    @Test func longestStorableAccount_isGranted() throws {
        let routes = try LedgerService.routes(.sqlite)
        #expect(routes.deliver(try E.subscribed()).status == 200)
        // 128 two-byte characters: 256 bytes of UTF-8.
        let account = String(repeating: "é", count: 128)
        let response = Self.claim(routes, "7000", body: #"{"account":"\#(account)"}"#)
        #expect(response.status == 200)
        #expect(response.json?["account"] == .string(account))
    }
}
