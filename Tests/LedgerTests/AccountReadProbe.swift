import Foundation
import Ledger
import TestSupport
import Testing

/// What issue 24 asks of accounts' speed, measured on both backends. A measurement, not a test: it asserts nothing
/// about time and runs only on request:
///
///     RECEIPTD_LEDGER_ACCOUNT_PROBE=1 swift test --filter AccountReadProbe
///
/// Reading an account of 3 subscriptions and 200 transactions against reading one of its subscriptions; storing
/// renewals whose transactions carry a registered token (linked already, the common case) or an unregistered one,
/// against renewals without a token.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["RECEIPTD_LEDGER_ACCOUNT_PROBE"] == "1"))
struct AccountReadProbe {
    typealias E = AppleEvents
    static let token = "3b0c56d2-5f8e-4a51-9b0e-7a1d2c3e4f50"

    static func perCall(_ count: Int, _ body: () throws -> Void) rethrows -> Double {
        let start = ContinuousClock.now
        for _ in 0..<count { try body() }
        return (ContinuousClock.now - start) / .microseconds(1) / Double(count)
    }

    @Test(arguments: Backend.tested)
    func accountRead_againstOneSubscription(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        var transactions: [TransactionFacts] = []
        for number in 0..<200 {
            let original = "o\(number % 3)"
            let purchase = E.t0 + Int64(number / 3) * 30 * E.day
            transactions.append(
                E.transaction("t\(number)", purchase: purchase, expires: purchase + 30 * E.day, signed: purchase,
                    original: original))
        }
        try ledger.record(transactions: transactions, source: .notification)
        _ = try ledger.link(originalTransactionIDs: ["o0", "o1", "o2"], to: "probe", source: .purchase, at: E.t0)
        let subscription = try Self.perCall(300) { _ = try ledger.subscription(originalTransactionID: "o0") }
        let account = try Self.perCall(300) { _ = try ledger.account("probe") }
        print(
            "account probe (\(backend)): subscription(o0) \(Int(subscription)) µs, account of 3 subscriptions and 200 "
                + "transactions \(Int(account)) µs, \(String(format: "%.2f", account / subscription))x")
        #expect(try ledger.account("probe")?.subscriptions.count == 3)
    }

    @Test(arguments: Backend.tested)
    func storingRenewals_withAndWithoutTokens(_ backend: Backend) throws {
        let ledger = try makeLedger(backend)
        _ = try ledger.registerAppAccountToken(Self.token, account: "probe", at: E.t0)
        func renewals(_ prefix: String, token: String?) throws -> Double {
            var number = 0
            return try Self.perCall(150) {
                number += 1
                var transaction = E.transaction(
                    "\(prefix)\(number)", purchase: E.t0, expires: E.t0 + E.day, signed: E.t0 + Int64(number),
                    original: "\(prefix)-original")
                transaction.appAccountToken = token
                _ = try ledger.record(
                    E.notification("DID_RENEW", signed: E.t0 + Int64(number), uuid: "\(prefix)-\(number)",
                        transaction: transaction))
            }
        }
        // Interleaved rounds, so that a neighbour's load falls on all three alike.
        var plain = 0.0, registered = 0.0, unregistered = 0.0
        for round in 0..<4 {
            plain += try renewals("plain\(round)-", token: nil)
            registered += try renewals("registered\(round)-", token: Self.token)
            unregistered += try renewals("unregistered\(round)-", token: "ffffffff-0000-4000-8000-000000000000")
        }
        func change(_ time: Double) -> String { String(format: "%+.0f%%", (time / plain - 1) * 100) }
        print(
            "token probe (\(backend)): a renewal without a token \(Int(plain)) µs, with a registered token "
                + "\(Int(registered)) µs (\(change(registered))), with an unregistered one \(Int(unregistered)) µs "
                + "(\(change(unregistered)))")
        #expect(try ledger.owner(originalTransactionID: "registered0--original") == "probe")
    }
}
