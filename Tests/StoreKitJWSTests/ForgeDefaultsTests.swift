import Foundation
import Testing

import JSONText
import ReceiptForge

/// The JWS forge's defaults look like Apple's signed data: a web order line item id per subscription transaction,
/// none for other types, and the receipt forge's default environment.
struct SignedDataForgeDefaultsTests {
    @Test func transactionWebOrderLineItemID_followsTheTransaction_forSubscriptionsOnly() {
        var blueprint = TransactionBlueprint(bundleID: "com.example.app", signedDate: Date(timeIntervalSince1970: 0))
        #expect(blueprint.payload["webOrderLineItemId"] == .string("2000000000000101"))
        blueprint.transactionID = "2000000000000002"
        #expect(blueprint.payload["webOrderLineItemId"] == .string("2000000000000102"))
        blueprint.type = "Consumable"
        #expect(blueprint.payload["webOrderLineItemId"] == nil)
        blueprint.webOrderLineItemID = "9"
        #expect(blueprint.payload["webOrderLineItemId"] == .string("9"))
        blueprint.webOrderLineItemID = nil
        blueprint.type = "Auto-Renewable Subscription"
        #expect(blueprint.payload["webOrderLineItemId"] == nil)
    }

    @Test func receiptsAndSignedData_defaultToProduction() {
        let date = Date(timeIntervalSince1970: 0)
        #expect(ReceiptBlueprint(bundleID: "a", applicationVersion: "1").receiptType == "Production")
        #expect(TransactionBlueprint(bundleID: "a", signedDate: date).environment == "Production")
        #expect(RenewalInfoBlueprint(signedDate: date).environment == "Production")
        #expect(AppTransactionBlueprint(bundleID: "a", receiptCreationDate: date).receiptType == "Production")
        #expect(NotificationBlueprint(type: "TEST", bundleID: "a", signedDate: date).environment == "Production")
    }
}
