import Testing

@testable import ReceiptEngine
import ReceiptForge

struct PurchaseSpecTests {
    static let today = ReceiptDate(rfc3339: "2026-03-01T00:00:00Z")!

    @Test func minimalSpec_defaultsOriginalToTransactionAndDateToCreation() throws {
        let purchase = try PurchaseBlueprint(spec: "product=coins.100,transaction=42", defaultDate: Self.today)
        #expect(purchase.productID == "coins.100")
        #expect(purchase.originalTransactionID == "42")
        #expect(purchase.purchaseDate == Self.today)
        #expect(purchase.quantity == 1)
        #expect(purchase.expiresDate == nil)
        #expect(!purchase.isTrialPeriod)
    }

    @Test(arguments: [
        ("transaction=1", "product: required"),
        ("product=p", "transaction: required"),
        ("product=p,transaction=1,expires=tomorrow", "expires: \"tomorrow\" is not an RFC 3339 date"),
        ("product=p,transaction=1,purchased=2026-13-01T00:00:00Z", "purchased:"),
        ("product=p,transaction=1,cancelled=1", "cancelled:"),
        ("product=p,transaction=1,original_purchased=x", "original_purchased:"),
        ("product=p,transaction=1,quantity=two", "quantity: \"two\" is not an integer"),
        ("product=p,transaction=1,quantity=0", "quantity: must be at least 1"),
        ("product=p,transaction=1,web_order=x", "web_order:"),
        ("product=p,transaction=1,trial=maybe", "trial: \"maybe\" is not true or false"),
        ("product=p,transaction=1,intro=2", "intro:"),
        ("product=p,transaction=1,offer=", "offer: empty"),
        ("product=p,transaction=1,colour=red", "colour: unknown field"),
        ("product=p,product=q,transaction=1", "product: given twice"),
        ("product=p,transaction", "transaction: expected transaction=VALUE"),
    ])
    func badSpec_isAnErrorNamingTheField(_ spec: String, _ expected: String) {
        #expect {
            try PurchaseBlueprint(spec: spec, defaultDate: Self.today)
        } throws: { error in
            (error as? BlueprintError)?.message.contains(expected) == true
        }
    }
}
