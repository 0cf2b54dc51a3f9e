import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptForge
import ReceiptService

/// Issue 24's speed goals, through `ReceiptRoutes.handle` (everything but sockets, the request decoder and the
/// response encoder) on a SQLite ledger:
///
/// 1. `GET /v1/accounts/{account}` of an account with 3 subscriptions and 200 transactions against
///    `GET /v1/subscriptions/{id}` of each of its subscriptions (goal: at most 2x), for two spreads: 67/67/66, and one
///    long subscription of 190 renewals beside two of 5. 2,000 other accounts (3 subscriptions of 8 renewals each) sit
///    around them, so that every read goes through the indexes.
/// 2. A renewal notification posted to `/v1/notifications` whose transaction carries a registered
///    `appAccountToken`, an unregistered one, or none (goal: a token adds at most 10%).
///
/// Requests take turns one by one, so that the machine's drift falls on all alike; each figure is the median (and
/// 90th percentile) of single calls.
func accountsBenchmark(repetitions: Int, profiling target: String? = nil) {
    let folder = NSTemporaryDirectory() + "receipt-bench-accounts-\(getpid())"
    try! FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }

    let bundleID = "com.example.bench"
    let authority = try! JWSTestAuthority.generate()
    let configPath = folder + "/config.json"
    try! Data(
        """
        {"apps": [{"bundle_id": "\(bundleID)", "entitlements": {"pro": ["pro.monthly", "pro.yearly"]},
                   "restore_behavior": "transfer"}]}
        """.utf8
    ).write(to: URL(fileURLWithPath: configPath))
    var configuration = try! ServiceConfiguration.load(contentsOfFile: configPath)
    configuration.trustAnchors = [authority.rootAnchor]
    // Under callgrind everything runs some 50 times slower: a write would outlast the default bounds.
    let timeout = target == nil ? LedgerConfiguration.defaultTimeout : 600
    if target != nil { configuration.storeTimeout = timeout }
    let store = try! SQLiteLedger(
        path: folder + "/ledger.sqlite", timeout: timeout, linkRules: configuration.accountLinkRules)
    let routes = ReceiptRoutes(
        configuration: configuration, validator: configuration.makeValidator(),
        jwsVerifier: configuration.makeJWSVerifier(), ledger: PurchaseLedger(store: store, storeTimeout: timeout),
        metrics: ServiceMetrics())

    let now = Int64(Date().timeIntervalSince1970 * 1000)
    let started = nanoseconds()
    let (spread, long) = fillAccounts(store, bundleID: bundleID, now: now, others: target == nil ? 2_000 : 0)
    print(String(format: "ledger filled in %.1f s: 2,002 accounts, %d transactions",
        Double(nanoseconds() - started) / 1e9, 2_000 * 24 + 400))

    func get(_ target: String) -> HTTPRequest {
        HTTPRequest(
            method: .get, target: target, headers: HTTPHeaders([]), body: [], peer: .benchmarkClient,
            listener: .benchmarkListener)
    }
    if let target {
        let account = String(target.split(separator: ":").last ?? "")
        let snapshot = try! store.account(account)
        // A month of the account's first subscription, posted as StoreKit 2 JWS the same each time: `purchase:` to
        // the account's purchases route, `validate:` to /v1/validate (which records it in this ledger too).
        var month = TransactionBlueprint(bundleID: bundleID, signedDate: Date().addingTimeInterval(-60))
        month.transactionID = "1999999999"
        month.originalTransactionID = snapshot?.record.links.first?.originalTransactionID ?? month.transactionID
        month.productID = "pro.monthly"
        month.purchaseDate = Date().addingTimeInterval(-86_400)
        month.expiresDate = Date().addingTimeInterval(29 * 86_400)
        let jwsBody = Array("{\"jws\": \"\(try! authority.sign(month.payload))\"}".utf8)
        func post(_ target: String) -> HTTPRequest {
            HTTPRequest(
                method: .post, target: target, headers: HTTPHeaders([(.contentType, "application/json")]),
                body: jwsBody, peer: .benchmarkClient, listener: .benchmarkListener)
        }
        let kind = target.contains(":") ? String(target.prefix { $0 != ":" }) : "path"
        let request =
            switch kind {
            case "purchase": post("/v1/accounts/\(account)/purchases")
            case "validate": post("/v1/validate")
            default: get(target)
            }
        if kind != "tree" && kind != "text" {
            let response = routes.handle(request, on: .main)
            guard response.status == .ok else {
                fatalError("\(target): \(response.status) \(String(decoding: response.body, as: UTF8.self))")
            }
        }
        var sink = 0
        for _ in 0..<repetitions {
            switch kind {
            case "tree":
                sink &+= AccountReport(snapshot: snapshot!, configuration: configuration, at: now).json.serialized().count
            case "text": sink &+= AccountReport(snapshot: snapshot!, configuration: configuration, at: now).jsonText.count
            default: sink &+= routes.handle(request, on: .main).body.count
            }
        }
        print("\(repetitions) \(target), sink \(sink)")
        return
    }
    for (name, subscriptions) in [("spread", spread), ("long", long)] {
        let requests = [("/v1/accounts/\(name)", get("/v1/accounts/\(name)"))]
            + subscriptions.map { original, count in
                ("/v1/subscriptions/\(original) (\(count) transactions)", get("/v1/subscriptions/\(original)"))
            }
        for (label, request) in requests {
            let response = routes.handle(request, on: .main)
            guard response.status == .ok else {
                fatalError("\(label): \(response.status) \(String(decoding: response.body, as: UTF8.self))")
            }
        }
        let samples = interleavedSamples(repetitions: repetitions, requests.map { _, request in
            { routes.handle(request, on: .main).body.count }
        })
        let accountMedian = median(samples[0])
        print("\naccount \"\(name)\" (\(subscriptions.map { String($0.1) }.joined(separator: "/")) transactions), "
            + "\(repetitions) interleaved repetitions, \(routes.handle(requests[0].1, on: .main).body.count) bytes:")
        for (index, (label, _)) in requests.enumerated() {
            let (middle, high) = (median(samples[index]), percentile(samples[index], 0.9))
            let ratio = index == 0 ? "" : String(format: "   account / this: %.2fx", accountMedian / middle)
            let figures = String(format: " median %8.1f µs  p90 %8.1f µs", middle / 1000, high / 1000)
            print("  " + padded(label, 52) + figures + ratio)
        }
    }

    // 2. Distinct DID_RENEW notifications, each verified and durably stored before its 200; ten renewals per original.
    let registered = "3b0c56d2-5f8e-4a51-9b0e-7a1d2c3e4f50"
    _ = try! store.registerAppAccountToken(registered, account: "token-owner", at: now)
    let kinds: [(label: String, token: String?)] = [
        ("no appAccountToken", nil), ("a registered appAccountToken", registered),
        ("an unregistered appAccountToken", "ffffffff-0000-4000-8000-000000000000"),
    ]
    let signed = Date().addingTimeInterval(-60)
    let perKind = repetitions
    let bodies: [[[UInt8]]] = kinds.enumerated().map { kind, described in
        (0..<perKind).map { number in
            var transaction = TransactionBlueprint(bundleID: bundleID, signedDate: signed)
            transaction.transactionID = "8\(kind)\(100_000 + number)"
            transaction.originalTransactionID = "7\(kind)\(100_000 + number / 10)"
            transaction.purchaseDate = signed
            transaction.expiresDate = signed.addingTimeInterval(30 * 86_400)
            if let token = described.token { transaction.edits.set.append(("appAccountToken", .string(token))) }
            var notification = NotificationBlueprint(type: "DID_RENEW", bundleID: bundleID, signedDate: signed)
            notification.signedTransactionInfo = try! authority.sign(transaction.payload)
            return Array("{\"signedPayload\": \"\(try! authority.sign(notification.payload))\"}".utf8)
        }
    }
    var samples = [[Double]](repeating: [], count: kinds.count)
    for number in 0..<perKind {
        for kind in kinds.indices {
            let request = HTTPRequest(
                method: .post, target: "/v1/notifications",
                headers: HTTPHeaders([(.contentType, "application/json")]), body: bodies[kind][number],
                peer: .benchmarkClient, listener: .benchmarkListener)
            let start = nanoseconds()
            let response = routes.handle(request, on: .main)
            samples[kind].append(Double(nanoseconds() - start))
            guard response.status == .ok else {
                fatalError("notification: \(response.status) \(String(decoding: response.body, as: UTF8.self))")
            }
        }
    }
    guard try! store.owner(originalTransactionID: "71100000") == "token-owner" else {
        fatalError("a renewal carrying the registered token was not linked to its account")
    }
    print("\nPOST /v1/notifications, a DID_RENEW stored (SQLite, synchronous=FULL), \(perKind) of each, interleaved:")
    for (kind, label) in kinds.map(\.label).enumerated() {
        let change = kind == 0 ? "" : String(format: "   %+.1f%% (median), %+.1f%% (mean)",
            (median(samples[kind]) / median(samples[0]) - 1) * 100, (mean(samples[kind]) / mean(samples[0]) - 1) * 100)
        print("  " + padded(label, 34) + String(format: " median %8.1f µs  p90 %8.1f µs  mean %8.1f µs",
            median(samples[kind]) / 1000, percentile(samples[kind], 0.9) / 1000, mean(samples[kind]) / 1000) + change)
    }
}

/// The accounts every figure reads: `others` accounts of 3 monthly subscriptions of 8 renewals each, and `spread`
/// (67/67/66 renewals) and `long` (190/5/5), each account's second subscription yearly, all ending about `now`.
private func fillAccounts(_ store: SQLiteLedger, bundleID: String, now: Int64, others: Int)
    -> (spread: [(String, Int)], long: [(String, Int)])
{
    // Monthly renewals ending about now, so that every subscription's latest transaction is active.
    let month: Int64 = 30 * 86_400_000
    func renewals(_ original: String, _ count: Int, product: String = "pro.monthly") -> [TransactionFacts] {
        (0..<count).map { number in
            let purchase = now - Int64(count - number) * month + 86_400_000
            var blueprint = TransactionBlueprint(
                bundleID: bundleID, signedDate: Date(timeIntervalSince1970: Double(purchase) / 1000))
            blueprint.transactionID = original + String(1_000 + number)
            blueprint.originalTransactionID = original
            blueprint.productID = product
            blueprint.purchaseDate = Date(timeIntervalSince1970: Double(purchase) / 1000)
            blueprint.expiresDate = Date(timeIntervalSince1970: Double(purchase + month) / 1000)
            return TransactionFacts(
                transactionID: blueprint.transactionID, originalTransactionID: original, productID: product,
                bundleID: bundleID, type: blueprint.type, purchaseDate: purchase,
                originalPurchaseDate: now - Int64(count) * month + 86_400_000, expiresDate: purchase + month,
                inAppOwnershipType: "PURCHASED", webOrderLineItemID: blueprint.webOrderLineItemID,
                environment: "Production", signedDate: purchase,
                payloadJSON: String(decoding: blueprint.payload.serialized(), as: UTF8.self))
        }
    }
    func account(_ name: String, _ subscriptions: [(original: String, renewals: Int)]) {
        var transactions: [TransactionFacts] = []
        for (index, subscription) in subscriptions.enumerated() {
            transactions += renewals(subscription.original, subscription.renewals,
                product: index == 1 ? "pro.yearly" : "pro.monthly")
        }
        try! store.record(transactions: transactions, source: .notification)
        _ = try! store.link(
            originalTransactionIDs: subscriptions.map(\.original), to: name, source: .purchase, at: now - 1_000)
    }
    for other in 0..<others {
        account("other-\(other)", (0..<3).map { ("9\(other)0\($0)", 8) })
    }
    let spread = [("1000000001", 67), ("1000000002", 67), ("1000000003", 66)]
    let long = [("1000000011", 190), ("1000000012", 5), ("1000000013", 5)]
    account("spread", spread)
    account("long", long)
    return (spread, long)
}

/// The same ledger as `accounts` in `folder/ledger.sqlite`, and `folder/config.json` with its apps and store, to be
/// served (`Benchmarks/scripts/accounts_http.sh` adds the host and port).
func writeAccountsLedger(to folder: String) {
    try! FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let store = try! SQLiteLedger(path: folder + "/ledger.sqlite", timeout: LedgerConfiguration.defaultTimeout)
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    _ = fillAccounts(store, bundleID: "com.example.bench", now: now, others: 2_000)
    try! Data(
        """
        {"apps": [{"bundle_id": "com.example.bench", "entitlements": {"pro": ["pro.monthly", "pro.yearly"]},
                   "restore_behavior": "transfer"}],
         "store": {"sqlite": "\(folder)/ledger.sqlite"}}
        """.utf8
    ).write(to: URL(fileURLWithPath: folder + "/config.json"))
    print("\(folder)/ledger.sqlite: 2,002 accounts, \(2_000 * 24 + 400) transactions; \(folder)/config.json")
}

/// Nanoseconds of every single call, the bodies taking turns call by call.
private func interleavedSamples(repetitions: Int, _ bodies: [() -> Int]) -> [[Double]] {
    var samples = [[Double]](repeating: [], count: bodies.count)
    var sink = 0
    for _ in 0..<repetitions {
        for (index, body) in bodies.enumerated() {
            let start = nanoseconds()
            sink &+= body()
            samples[index].append(Double(nanoseconds() - start))
        }
    }
    precondition(sink > 0)
    return samples
}

private func median(_ samples: [Double]) -> Double { percentile(samples, 0.5) }

private func percentile(_ samples: [Double], _ fraction: Double) -> Double {
    let sorted = samples.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}

private func padded(_ text: String, _ width: Int) -> String {
    text + String(repeating: " ", count: max(0, width - text.count))
}

private func mean(_ samples: [Double]) -> Double { samples.reduce(0, +) / Double(samples.count) }
