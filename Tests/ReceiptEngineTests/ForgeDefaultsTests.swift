import Foundation
import TestSupport
import Testing

import ReceiptEngine
import ReceiptForge

/// The receipt forge's defaults look like Apple's receipts: each subscription transaction has its own web order line
/// item id, one-time purchases 0.
struct ReceiptForgeDefaultsTests {
    @Test func receiptSubscriptions_haveDistinctWebOrderLineItemIDs_andOneTimePurchasesZero() throws {
        var blueprint = TestPKI.blueprint()
        let expires = ReceiptDate(blueprint.creationDate.date.addingTimeInterval(30 * 86_400))
        blueprint.purchases = ["1001", "1002", "renewal-a"].map {
            PurchaseBlueprint(productID: "pro.monthly", transactionID: $0, purchaseDate: blueprint.creationDate, expiresDate: expires)
        } + [PurchaseBlueprint(productID: "coins", transactionID: "1003", purchaseDate: blueprint.creationDate)]
        var explicit = PurchaseBlueprint(productID: "pro.yearly", transactionID: "1004", purchaseDate: blueprint.creationDate)
        explicit.webOrderLineItemID = 77
        blueprint.purchases.append(explicit)
        let result = TestPKI.validator().validate(try blueprint.forge(with: TestPKI.standard))
        let purchases = try #require(result.receipt?.inAppPurchases)
        var ids: [String: Int64] = [:]
        for purchase in purchases { ids[purchase.transactionID ?? ""] = purchase.webOrderLineItemID }
        #expect(ids["1001"] == 1101)
        #expect(ids["1002"] == 1102)
        #expect(ids["renewal-a"].map { (1_000_000_000_000_000...9_999_999_999_999_999).contains($0) } == true)
        #expect(ids["1003"] == 0)
        #expect(ids["1004"] == 77)
    }
}
