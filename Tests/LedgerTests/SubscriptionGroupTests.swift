@testable import Ledger
import TestSupport
import Testing

/// A product's subscription group, as introductory offer eligibility asks for it: only StoreKit 2 payloads name one.
struct SubscriptionGroupTests {
    typealias E = AppleEvents

    static func transaction(_ id: String, product: String, bundle: String = "com.example.app", group: String?) -> TransactionFacts {
        var facts = E.transaction(id, purchase: E.t0, expires: E.t0 + 30 * E.day, signed: E.t0, original: id)
        facts.productID = product
        facts.bundleID = bundle
        let member = group.map { #","subscriptionGroupIdentifier":"\#($0)""# } ?? ""
        facts.payloadJSON = #"{"transactionId":"\#(id)","productId":"\#(product)"\#(member)}"#
        return facts
    }

    @Test(arguments: Backend.tested)
    func groupOfAProduct_comesFromAnyStoreKit2TransactionOfIt_inItsApp(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        try ledger.record(transactions: [Self.transaction("1", product: "pro.monthly", group: nil)], source: .receipt)
        #expect(try ledger.subscriptionGroup(productID: "pro.monthly", bundleID: "com.example.app") == nil)
        try ledger.record(
            transactions: [
                Self.transaction("2", product: "pro.monthly", group: "21000001"),
                Self.transaction("3", product: "pro.yearly", bundle: "com.example.other", group: "21000009"),
            ],
            source: .jws)
        #expect(try ledger.subscriptionGroup(productID: "pro.monthly", bundleID: "com.example.app") == "21000001")
        #expect(try ledger.subscriptionGroup(productID: "pro.yearly", bundleID: "com.example.app") == nil)
        #expect(try ledger.subscriptionGroup(productID: "pro.yearly", bundleID: "com.example.other") == "21000009")
    }
}
