@testable import Ledger
import TestSupport
import Testing

/// Transactions and renewal infos recorded directly (JWS, receipts): order, sources, and the verifyReceipt reads.
struct TransactionRecordTests {
    typealias E = AppleEvents

    @Test(arguments: Backend.tested)
    func olderVersion_neverOverwritesNewer_butSourcesMerge(_ backend: Backend) throws {
        let ledger = try makeLedger(backend, clock: TestClock.counting())
        let newer = E.with(E.firstMonth, signed: E.t0 + 5 * E.day)
        try ledger.record(transactions: [newer], source: .jws)
        // A receipt created before the JWS was signed: older facts.
        try ledger.record(transactions: [E.firstMonth], source: .receipt)
        // Same signed date again: not strictly newer, so not replaced either.
        var sameDate = newer
        sameDate.payloadJSON = "{}"
        _ = try ledger.record(E.notification("DID_RENEW", signed: newer.signedDate, transaction: sameDate))

        let record = try #require(try ledger.transaction(id: "1000"))
        #expect(record.facts == newer)
        #expect(record.sources == [.jws: 1, .receipt: 2, .notification: 3])
        #expect(record.firstSeen == 1)
        #expect(record.claim == nil)
        #expect(try ledger.transaction(id: "nope") == nil)
    }

    @Test(arguments: Backend.tested)
    func laterReceiptEntry_neverReplacesWhatStoreKit2Signed_butAddsItsSource(_ backend: Backend) throws {
        let ledger = try makeLedger(backend, clock: TestClock.counting())
        let familyShared = E.transaction("1000", purchase: E.t0, expires: E.t0 + 30 * E.day, signed: E.t0,
                                         ownership: "FAMILY_SHARED")
        try ledger.record(transactions: [familyShared], source: .jws)
        // The same transaction in a receipt made a day later: newer, but it cannot say FAMILY_SHARED.
        var fromReceipt = E.with(familyShared, signed: E.t0 + E.day)
        fromReceipt.inAppOwnershipType = nil
        try ledger.record(transactions: [fromReceipt], source: .receipt)

        let record = try #require(try ledger.transaction(id: "1000"))
        #expect(record.facts == familyShared)
        #expect(Set(record.sources.keys) == [.jws, .receipt])
        // A transaction only a receipt ever showed still moves forward with newer receipts.
        try ledger.record(transactions: [E.with(E.transaction("2000", purchase: E.t0, expires: nil, signed: E.t0),
                                                signed: E.t0)], source: .receipt)
        let newerReceipt = E.with(E.transaction("2000", purchase: E.t0, expires: nil, signed: E.t0 + 1), signed: E.t0 + 1)
        try ledger.record(transactions: [newerReceipt], source: .receipt)
        #expect(try ledger.transaction(id: "2000")?.facts == newerReceipt)
    }

    @Test(arguments: Backend.tested)
    func renewalInfo_isReplacedOnlyByANewerOne(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        var newer = E.renewal(signed: E.t0 + 2, autoRenew: false)
        newer.priceIncreaseStatus = 1
        try ledger.record(renewal: newer, source: .jws)
        try ledger.record(renewal: E.renewal(signed: E.t0 + 1), source: .jws)
        try ledger.record(renewal: E.renewal(signed: E.t0 + 2), source: .notification)
        #expect(try ledger.renewalInfos(originalTransactionIDs: [E.original]) == [newer])
    }

    @Test(arguments: Backend.tested)
    func verifyReceiptReads_returnAllKnown_newestFirst(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        let other = E.transaction("2000", purchase: E.t0 + 1, expires: nil, signed: E.t0, original: "2000")
        let renewed = E.transaction("1001", purchase: E.t0 + 30 * E.day, expires: E.t0 + 60 * E.day, signed: E.t0)
        try ledger.record(transactions: [E.firstMonth, other, renewed], source: .receipt)
        try ledger.record(renewal: E.renewal(signed: E.t0), source: .jws)

        let found = try ledger.transactions(originalTransactionIDs: [E.original, "2000", "unknown"])
        #expect(found.map(\.transactionID) == ["1001", "2000", "1000"])
        #expect(found.first == renewed)
        #expect(try ledger.transactions(originalTransactionIDs: []) == [])
        #expect(try ledger.renewalInfos(originalTransactionIDs: ["2000", E.original]).map(\.originalTransactionID)
            == [E.original])
        #expect(try ledger.subscription(originalTransactionID: "unknown") == nil)
    }

    @Test(arguments: Backend.tested)
    func textWithNUL_isInvalidData(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        var bad = E.firstMonth
        bad.payloadJSON = "{\u{0}}"
        #expect(ledgerError { try ledger.record(transactions: [bad], source: .jws) }?.code == .invalidData)
        #expect(try ledger.counts().transactions == 0)
        // One call is one unit: the good transaction before the bad one is not kept either.
        var laterBad = bad
        laterBad.transactionID = "2000"
        #expect(ledgerError { try ledger.record(transactions: [E.firstMonth, laterBad], source: .jws) }?.code
            == .invalidData)
        #expect(try ledger.counts().transactions == 0)
        // The failed writes left the writer usable.
        try ledger.record(transactions: [E.firstMonth], source: .jws)
        #expect(try ledger.counts().transactions == 1)
    }
}
