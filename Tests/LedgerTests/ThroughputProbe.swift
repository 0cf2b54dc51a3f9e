import Foundation
import Ledger
import TestSupport
import Testing

/// How many notifications per second each backend commits durably with concurrent writers (PostgreSQL: the shared
/// test cluster, which runs with `fsync=off`, so its figures omit the flush). A measurement, not a test: it
/// asserts nothing about time and runs only on request:
///
///     RECEIPTD_LEDGER_THROUGHPUT=1 swift test --filter ThroughputProbe
///
/// Each write is a realistic notification (a 4 KB signed payload, a nested transaction and renewal info), recorded on
/// its own thread's call and returned only after its group committed with `synchronous=FULL`.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["RECEIPTD_LEDGER_THROUGHPUT"] == "1"))
struct ThroughputProbe {
    @Test(arguments: Backend.tested, [1, 8, 16, 32])
    func committedNotificationsPerSecond(_ backend: Backend, writers: Int) throws {
        let ledger: any LedgerStore =
            switch backend {
            case .sqlite: try SQLiteLedger(path: Scratch.newPath("throughput.sqlite"))
            case .postgres: try PostgresLedger(connectionString: try PostgresCluster.shared.get().newDatabase())
            }
        let perWriter = 4000 / writers
        let payload = String(repeating: "x", count: 4096)
        let start = ContinuousClock.now
        onThreads(writers) { writer in
            for index in 0..<perWriter {
                let number = writer * perWriter + index
                let transaction = AppleEvents.transaction(
                    "t\(number)", purchase: AppleEvents.t0, expires: AppleEvents.t0 + AppleEvents.day,
                    signed: AppleEvents.t0 + Int64(number), original: "o\(number)"
                )
                var notification = AppleEvents.notification(
                    "DID_RENEW", signed: AppleEvents.t0 + Int64(number), uuid: "u\(number)", transaction: transaction,
                    renewal: AppleEvents.renewal(signed: AppleEvents.t0 + Int64(number), original: "o\(number)")
                )
                notification.signedPayload = payload
                _ = try? ledger.record(notification)
            }
        }
        let seconds = (ContinuousClock.now - start) / .seconds(1)
        let stored = try ledger.counts().notifications
        print("ledger throughput: \(backend), \(writers) writers, \(stored) notifications, \(Int(Double(stored) / seconds))/s")
        #expect(stored == Int64(perWriter * writers))
    }
}
