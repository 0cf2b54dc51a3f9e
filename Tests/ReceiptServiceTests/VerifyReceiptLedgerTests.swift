import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import TestSupport
import Testing

@testable import ReceiptService

/// `/verifyReceipt` answered the way Apple's was: with renewals and renewal state learned after the receipt was
/// made, from Apple's own signed notifications in the ledger.
struct VerifyReceiptLedgerTests {
    static let bundleID = "com.example.ledger"
    static func date(_ text: String) -> ReceiptDate { ReceiptDate(rfc3339: text)! }

    /// Both test PKIs valid around the fixed "now" (2024-05-01) and the dates signed below.
    static let receiptAuthority: Result<TestCertificateAuthority, any Error> = Result {
        try TestCertificateAuthority.generate(TestCertificateAuthority.Options(now: fixedNow))
    }
    static let jwsAuthority: Result<JWSTestAuthority, any Error> = Result {
        try JWSTestAuthority.generate(JWSTestAuthority.Options(now: fixedNow))
    }

    /// A receipt made in January whose monthly subscription expired on 2024-02-01.
    static func januaryReceipt() throws -> [UInt8] {
        var blueprint = ReceiptBlueprint(
            bundleID: bundleID, applicationVersion: "1.0", creationDate: date("2024-01-15T00:00:00Z"))
        var purchase = PurchaseBlueprint(
            productID: "pro.monthly", transactionID: "1001", originalTransactionID: "1000",
            purchaseDate: date("2024-01-01T00:00:00Z"), expiresDate: date("2024-02-01T00:00:00Z"))
        purchase.webOrderLineItemID = 5001
        blueprint.purchases = [purchase]
        return try blueprint.forge(with: receiptAuthority.get())
    }

    /// DID_RENEW for the receipt's subscription: transaction 1002, renewed until 2024-06-01.
    static func didRenew() throws -> String {
        let authority = try jwsAuthority.get()
        let signed = date("2024-05-01T00:00:00Z").date.addingTimeInterval(-3600)
        var transaction = TransactionBlueprint(bundleID: bundleID, signedDate: signed, environment: "Production")
        transaction.transactionID = "1002"
        transaction.originalTransactionID = "1000"
        transaction.purchaseDate = date("2024-05-01T00:00:00Z").date.addingTimeInterval(-2 * 86_400)
        transaction.expiresDate = date("2024-06-01T00:00:00Z").date
        var renewal = RenewalInfoBlueprint(signedDate: signed, environment: "Production")
        renewal.originalTransactionID = "1000"
        var notification = NotificationBlueprint(
            type: "DID_RENEW", bundleID: bundleID, signedDate: signed, environment: "Production")
        notification.signedTransactionInfo = try authority.sign(transaction.payload)
        notification.signedRenewalInfo = try authority.sign(renewal.payload)
        return try authority.sign(notification.payload)
    }

    static func routes(ledger: PurchaseLedger) throws -> ReceiptRoutes {
        var configuration = ServiceConfiguration()
        configuration.trustAnchors = [try receiptAuthority.get().rootAnchor, try jwsAuthority.get().rootAnchor]
        configuration.apps = [ServiceConfiguration.App(bundleID: bundleID)]
        return ReceiptRoutes(
            configuration: configuration, validator: configuration.makeValidator(),
            jwsVerifier: configuration.makeJWSVerifier(), ledger: ledger, metrics: ServiceMetrics(),
            clock: { fixedNow })
    }

    static func verify(_ routes: ReceiptRoutes, _ receipt: [UInt8]) -> JSONValue {
        let response = routes.handle(
            post("/verifyReceipt", contentType: nil, text: "{\"receipt-data\": \"\(base64(receipt))\"}"), on: .main)
        #expect(response.status == 200)
        return response.json ?? .null
    }

    /// Authentic, but its ids are not ids (a NUL, which PostgreSQL refuses in text; a dot-segment, which would change
    /// a backfill's path at Apple): Apple's "malformed" (21002, not retryable), and nothing reaches the ledger, as
    /// `/v1/validate`'s 400 `invalid_id`.
    @Test(arguments: Backend.tested, ["a\u{0}b", "..", "tab\there"])
    func receiptWhoseIDsAreNotIDs_is21002_andStoresNothing(_ backend: Backend, _ id: String) throws {
        let store = try makeLedger(backend)
        let routes = try Self.routes(ledger: PurchaseLedger(store: store))
        for edit in [\PurchaseBlueprint.transactionID, \PurchaseBlueprint.originalTransactionID] {
            var blueprint = ReceiptBlueprint(
                bundleID: Self.bundleID, applicationVersion: "1.0", creationDate: Self.date("2024-01-15T00:00:00Z"))
            var purchase = PurchaseBlueprint(
                productID: "pro.monthly", transactionID: "1001", originalTransactionID: "1000",
                purchaseDate: Self.date("2024-01-01T00:00:00Z"), expiresDate: Self.date("2024-02-01T00:00:00Z"))
            purchase[keyPath: edit] = id
            blueprint.purchases = [purchase]
            let answer = Self.verify(routes, try blueprint.forge(with: Self.receiptAuthority.get()))
            #expect(answer["status"] == .integer(21002))
            #expect(answer["is_retryable"] == .bool(false))
            #expect(answer["receipt"] == nil)
        }
        #expect(try store.counts().transactions == 0)
        // The same receipt with ids that are ids is recorded: the refusal is the ids', not the receipt's.
        #expect(Self.verify(routes, try Self.januaryReceipt())["status"] == .integer(0))
        #expect(try store.counts().transactions == 1)
    }

    @Test func renewalLearnedFromANotification_showsInTheSameReceiptsAnswer() throws {
        let folder = try ScratchFolder()
        let store = try SQLiteLedger(path: folder.path + "/ledger.sqlite")
        let routes = try Self.routes(ledger: PurchaseLedger(store: store))
        let receipt = try Self.januaryReceipt()

        let before = Self.verify(routes, receipt)
        #expect(before["status"] == .integer(0))
        #expect(before["latest_receipt_info"]?[0]?["transaction_id"] == .string("1001"))
        #expect(before["pending_renewal_info"] == .array([]))

        let delivery = routes.handle(
            post("/v1/notifications", contentType: "application/json",
                 text: "{\"signedPayload\": \"\(try Self.didRenew())\"}"), on: .main)
        #expect(delivery.status == 200)

        let after = Self.verify(routes, receipt)
        #expect(after["status"] == .integer(0))
        let latest = try #require(after["latest_receipt_info"]?[0])
        #expect(latest["transaction_id"] == .string("1002"))
        #expect(latest["original_transaction_id"] == .string("1000"))
        #expect(latest["expires_date_ms"] == .string(String(Self.date("2024-06-01T00:00:00Z").millisecondsSince1970)))
        #expect(latest["in_app_ownership_type"] == .string("PURCHASED"))
        #expect(after["latest_receipt_info"]?[1]?["transaction_id"] == .string("1001"))
        let pending = try #require(after["pending_renewal_info"]?[0])
        #expect(pending["original_transaction_id"] == .string("1000"))
        #expect(pending["auto_renew_status"] == .string("1"))
        #expect(pending["product_id"] == .string("pro.monthly"))

        // The native answer reads the same renewal from the ledger, and says where it came from.
        let validated = routes.handle(post("/v1/validate", contentType: "application/octet-stream", body: receipt), on: .main)
        let subscription = try #require(validated.json?["subscriptions"]?[0])
        #expect(subscription["source"] == .string("ledger"))
        #expect(subscription["latest_transaction_id"] == .string("1002"))
        #expect(subscription["active"] == .bool(true))
        #expect(validated.json?["ledger"] == .string("available"))
    }

    @Test func ledgerUnreachable_isAppleRetryable21005_andValidateStillAnswers() throws {
        let down = PurchaseLedger(opening: { () throws(LedgerError) -> any LedgerStore in
            throw LedgerError(.unavailable, "connection refused")
        })
        let routes = try Self.routes(ledger: down)
        let receipt = try Self.januaryReceipt()
        let answer = Self.verify(routes, receipt)
        #expect(answer["status"] == .integer(21005))
        #expect(answer["is-retryable"] == .bool(true))
        #expect(answer["is_retryable"] == .bool(true))
        #expect(answer["latest_receipt_info"] == nil)

        let validated = routes.handle(post("/v1/validate", contentType: "application/octet-stream", body: receipt), on: .main)
        #expect(validated.status == 200)
        #expect(validated.json?["ledger"] == .string("unavailable"))
        #expect(validated.json?["subscriptions"]?[0]?["source"] == .string("receipt"))
    }
}
