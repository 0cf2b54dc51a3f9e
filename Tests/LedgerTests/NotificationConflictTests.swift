import TestSupport
import Testing

@testable import Ledger

/// A uuid delivered again is a retry when it says the same thing, a conflict when it says something else; either
/// way the first delivery stays the record.
struct NotificationConflictTests {
    typealias E = AppleEvents

    @Test(arguments: Backend.tested)
    func sameUUID_samePayloadIsADuplicate_otherPayloadIsAConflict(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        var first = E.subscribed
        first.signedPayload = "eyJhbGciOiJFUzI1NiJ9.eyJ1dWlkIjoxfQ.c2lnbmF0dXJlLTE"
        #expect(try ledger.record(first) == .stored)
        let stored = try ledger.transaction(id: "1000")

        var resigned = first
        resigned.signedPayload = "eyJhbGciOiJFUzI1NiIsIngiOjF9.eyJ1dWlkIjoxfQ.c2lnbmF0dXJlLTI"
        #expect(try ledger.record(resigned) == .duplicate)
        #expect(try ledger.record(first) == .duplicate)

        var other = first
        other.signedPayload = "eyJhbGciOiJFUzI1NiJ9.eyJ1dWlkIjoyfQ.c2lnbmF0dXJlLTE"
        other.transaction = E.with(E.firstMonth, signed: E.t0 + 99)
        #expect(try ledger.record(other) == .conflict)

        // Not three segments: the whole text is what it says.
        var fourSegments = first
        fourSegments.signedPayload = "eyJhbGciOiJFUzI1NiJ9.eyJ1dWlkIjoxfQ.c2lnbmF0dXJlLTE.eA"
        #expect(try ledger.record(fourSegments) == .conflict)

        // Nothing a conflict carries is stored, not even a transaction or a renewal info the ledger lacks (on
        // PostgreSQL they are sent before the notification's insert answers).
        var elsewhere = first
        elsewhere.signedPayload = "eyJhbGciOiJFUzI1NiJ9.eyJ1dWlkIjozfQ.c2lnbmF0dXJlLTE"
        elsewhere.transaction = E.transaction(
            "2000", purchase: E.t0, expires: E.t0 + 30 * E.day, signed: E.t0, original: "2000")
        elsewhere.renewal = E.renewal(signed: E.t0, original: "2000")
        #expect(try ledger.record(elsewhere) == .conflict)

        #expect(try ledger.notification(uuid: first.uuid)?.signedPayload == first.signedPayload)
        #expect(try ledger.transaction(id: "1000") == stored)
        let counts = try ledger.counts()
        #expect(counts.notifications == 1)
        #expect(counts.transactions == 1)
        #expect(counts.transactionSources == 1)
        #expect(counts.renewalInfos == 1)
    }
}
