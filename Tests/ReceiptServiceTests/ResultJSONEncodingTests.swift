import Testing

@testable import ReceiptEngine
@testable import ReceiptService
import JSONText

/// `ResultJSON.encode` writes bytes directly for speed; it must stay byte for byte the serialized `value(of:)`,
/// which is the one definition of the answer's shape.
struct ResultJSONEncodingTests {
    static let awkward = "<script>\"quoted\" back\\slash\n\t\r\u{01}\u{7F} & é 🧾"

    static func purchase(_ index: Int64, text: String) -> InAppPurchase {
        InAppPurchase(
            quantity: index == 0 ? nil : index, productID: text, transactionID: "\(index)",
            purchaseDate: ReceiptDate(millisecondsSince1970: -86_400_001 * index),
            originalTransactionID: index % 2 == 0 ? nil : "orig\(index)",
            expiresDate: ReceiptDate(millisecondsSince1970: 2_592_000_000 * index), webOrderLineItemID: -index,
            isTrialPeriod: index % 2 == 0)
    }

    static let results: [ValidationResult] = {
        let receipt = Receipt(
            receiptType: "Production", appItemID: Int64.min, bundleID: awkward, applicationVersion: "",
            originalApplicationVersion: "1.0", creationDate: ReceiptDate(millisecondsSince1970: 253_402_300_800_000),
            expirationDate: ReceiptDate(millisecondsSince1970: -62_200_000_000_000),
            inAppPurchases: (0..<4).map { purchase($0, text: $0 == 1 ? awkward : "com.example.p\($0)") })
        var checks = ValidationChecks()
        checks.signature = .passed
        checks.deviceHash = .failed
        let statuses = SubscriptionStatus.summarize(receipt.inAppPurchases, at: ReceiptDate(millisecondsSince1970: 0))
        return [
            ValidationResult(),
            ValidationResult(error: ValidationError(.malformedReceipt, awkward)),
            ValidationResult(checks: checks, receipt: receipt, subscriptions: statuses),
            ValidationResult(
                error: ValidationError(.deviceHashMismatch, "not this device"), checks: checks,
                receipt: Receipt(
                    receiptType: nil, appItemID: nil, bundleID: "b", applicationVersion: "1",
                    originalApplicationVersion: nil, creationDate: ReceiptDate(millisecondsSince1970: 0),
                    inAppPurchases: [])),
        ]
    }()

    @Test(arguments: results.indices)
    func compactEncoding_isTheSerializedValue(_ index: Int) {
        let result = Self.results[index]
        #expect(ResultJSON.encode(result) == ResultJSON.value(of: result).serialized())
    }

    @Test(arguments: results.indices)
    func compactEncodingWithTheLedgersView_isTheSerializedValue(_ index: Int) {
        let result = Self.results[index]
        let view = LedgerView(
            availability: index % 2 == 0 ? "available" : "unavailable",
            subscriptions: result.subscriptions.map {
                LedgerView.subscriptionEntry($0, source: "ledger", asOf: ReceiptDate(millisecondsSince1970: 7))
            })
        #expect(ResultJSON.encode(result, ledger: view) == view.applied(to: ResultJSON.value(of: result)).serialized())
    }

    @Test func compactEncoding_parsesBackToTheValue() throws {
        for result in Self.results {
            #expect(try JSONValue(parsing: ResultJSON.encode(result)) == ResultJSON.value(of: result))
        }
    }
}
