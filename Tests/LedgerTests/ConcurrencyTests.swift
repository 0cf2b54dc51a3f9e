@testable import Ledger
import Synchronization
import TestSupport
import Testing

/// Many writers at once: group commit must keep every caller's own answer.
struct ConcurrencyTests {
    typealias E = AppleEvents

    @Test(arguments: Backend.tested)
    func concurrentNotifications_areAllStoredExactlyOnce(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        let unique = 200
        let outcomes = Mutex<[String: [NotificationWrite]]>([:])
        let failures = Atomic<Int>(0)
        // Every notification is sent twice, by different threads, so duplicates land inside and across groups.
        onThreads(8) { thread in
            for index in stride(from: thread, to: unique * 2, by: 8) {
                let number = index % unique
                let notification = E.notification(
                    "DID_RENEW", signed: E.t0 + Int64(number), uuid: "uuid-\(number)",
                    transaction: E.transaction(
                        "t\(number)", purchase: E.t0, expires: E.t0 + E.day, signed: E.t0 + Int64(number),
                        original: "o\(number % 10)"
                    )
                )
                do {
                    let outcome = try ledger.record(notification)
                    outcomes.withLock { $0[notification.uuid, default: []].append(outcome) }
                } catch {
                    failures.add(1, ordering: .relaxed)
                }
            }
        }
        let failed = failures.load(ordering: .relaxed)
        #expect(failed == 0)
        let all = outcomes.withLock { $0 }
        #expect(all.count == unique)
        #expect(all.values.allSatisfy { $0.sorted { "\($0)" < "\($1)" } == [.duplicate, .stored] })
        let counts = try ledger.counts()
        #expect(counts.notifications == Int64(unique))
        #expect(counts.transactions == Int64(unique))
        #expect(counts.transactionSources == Int64(unique))
    }

    @Test(arguments: Backend.tested)
    func concurrentReadsAndWrites_seeOnlyCommittedGroups(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        let torn = Atomic<Int>(0)
        onThreads(6) { thread in
            for index in 0..<20 {
                if thread < 3 {
                    let number = thread * 100 + index
                    _ = try? ledger.record(
                        E.notification(
                            "SUBSCRIBED", signed: E.t0, uuid: "n\(number)",
                            transaction: E.transaction("t\(number)", purchase: E.t0, expires: nil, signed: E.t0)
                        )
                    )
                } else if let counts = try? ledger.counts(), counts.notifications != counts.transactions {
                    // Each notification and its transaction commit together or not at all.
                    torn.add(1, ordering: .relaxed)
                }
            }
        }
        let tornReads = torn.load(ordering: .relaxed)
        #expect(tornReads == 0)
        #expect(try ledger.counts().notifications == 60)
    }
}
