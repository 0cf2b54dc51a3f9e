import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import StoreKitJWS
import TestSupport

@testable import ReceiptService

/// The service as the ledger tests run it: test roots for receipts and JWS (both valid around `fixedNow`), one app,
/// the clock fixed at `fixedNow`, and a ledger of the test's choosing.
enum LedgerService {
    static let bundleID = JWSPKI.bundleID
    static let appAppleID = JWSPKI.appAppleID

    static var configuration: ServiceConfiguration {
        var configuration = ServiceConfiguration()
        configuration.trustAnchors = [TestPKI.atFixedNow.rootAnchor, JWSPKI.atFixedNow.rootAnchor]
        configuration.apps = [.init(bundleID: bundleID, appAppleID: appAppleID)]
        configuration.environments = [.production, .sandbox]
        return configuration
    }

    static func routes(_ ledger: PurchaseLedger = .none, log: ServiceLog? = nil) -> ReceiptRoutes {
        let configuration = configuration
        let validator = configuration.makeValidator()
        return ReceiptRoutes(
            configuration: configuration, validator: validator, jwsVerifier: JWSVerifier(policy: validator.policy),
            ledger: ledger, metrics: ServiceMetrics(), log: log, clock: { fixedNow })
    }

    /// Routes over a fresh, empty ledger of `backend`.
    static func routes(_ backend: Backend) throws -> ReceiptRoutes {
        routes(PurchaseLedger(store: try makeLedger(backend)))
    }
}

/// StoreKit 2 data for one monthly subscription in Sandbox, signed at days relative to `fixedNow` by the test chain.
enum SignedEvents {
    static let original = "7000"

    static func at(_ days: Double) -> Date { fixedNow.addingTimeInterval(days * 86_400) }

    static func transaction(
        _ id: String, purchased: Double, expires: Double, signed: Double, revoked: Double? = nil,
        original: String = original
    ) -> TransactionBlueprint {
        var blueprint = TransactionBlueprint(bundleID: LedgerService.bundleID, signedDate: at(signed), environment: "Sandbox")
        blueprint.transactionID = id
        blueprint.originalTransactionID = original
        blueprint.webOrderLineItemID = "w\(id)"
        blueprint.purchaseDate = at(purchased)
        blueprint.expiresDate = at(expires)
        blueprint.revocationDate = revoked.map(at)
        blueprint.revocationReason = revoked.map { _ in 0 }
        return blueprint
    }

    static func renewal(
        signed: Double, autoRenew: Bool = true, retry: Bool = false, grace: Double? = nil, intent: Int64? = nil,
        original: String = original
    ) -> RenewalInfoBlueprint {
        var blueprint = RenewalInfoBlueprint(signedDate: at(signed), environment: "Sandbox")
        blueprint.originalTransactionID = original
        blueprint.autoRenewStatus = autoRenew ? 1 : 0
        blueprint.edits.set.append(("isInBillingRetryPeriod", .bool(retry)))
        if let grace {
            blueprint.edits.set.append(("gracePeriodExpiresDate", .integer(Int64(at(grace).timeIntervalSince1970 * 1000))))
        }
        if let intent { blueprint.edits.set.append(("expirationIntent", .integer(intent))) }
        return blueprint
    }

    /// A notification's `signedPayload`, its nested JWS signed by the same chain.
    static func notification(
        _ type: String, _ subtype: String? = nil, signed: Double, uuid: String? = nil,
        transaction: TransactionBlueprint? = nil, renewal: RenewalInfoBlueprint? = nil,
        bundleID: String = LedgerService.bundleID, by authority: JWSTestAuthority = JWSPKI.atFixedNow
    ) throws -> String {
        var blueprint = NotificationBlueprint(
            type: type, subtype: subtype, bundleID: bundleID, signedDate: at(signed), environment: "Sandbox")
        blueprint.notificationUUID = uuid ?? "\(type)-\(subtype ?? "none")-\(signed)".lowercased()
        blueprint.appAppleID = LedgerService.appAppleID
        blueprint.signedTransactionInfo = try transaction.map { try authority.sign($0.payload) }
        blueprint.signedRenewalInfo = try renewal.map { try authority.sign($0.payload) }
        return try authority.sign(blueprint.payload)
    }

    /// Bought ten days before `fixedNow`, for a month.
    static var firstMonth: TransactionBlueprint { transaction("7000", purchased: -10, expires: 20, signed: -10) }

    static func subscribed() throws -> String {
        try notification("SUBSCRIBED", "INITIAL_BUY", signed: -10, transaction: firstMonth, renewal: renewal(signed: -10))
    }
}

extension ReceiptRoutes {
    /// Apple's delivery of one notification.
    func deliver(_ signedPayload: String) -> HTTPResponse {
        handle(
            post("/v1/notifications", contentType: "application/json", text: #"{"signedPayload":"\#(signedPayload)"}"#),
            on: .main)
    }

    func claim(_ transactionID: String, account: String) -> HTTPResponse {
        handle(post(
            "/v1/transactions/\(transactionID)/claim", contentType: "application/json",
            text: #"{"account":"\#(account)"}"#), on: .main)
    }
}
