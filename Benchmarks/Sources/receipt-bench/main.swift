import Foundation
import ReceiptEngine
import ReceiptForge
import HTTP1Server
import ReceiptService
import StoreKitJWS

// receipt-bench inprocess --fixtures DIR [--seconds S]   figures on one core, printed
// receipt-bench profile --fixtures DIR [--count N]       N full validations of tpinapp_1, for callgrind
// receipt-bench profile-floor --fixtures DIR [--count N] N signature-only checks of tpinapp_1, for callgrind
// receipt-bench profile-route --fixtures DIR [--count N]        N POST /v1/validate of tpinapp_1 through the routes,
//                                                              no api_tokens, for callgrind
// receipt-bench profile-route-token --fixtures DIR [--count N]  the same with api_tokens and a Bearer token
// receipt-bench rate --fixtures DIR                      full validations per second on one core, alone (~4 s)
// receipt-bench forged --fixtures DIR [--count N]        genuine receipts against N distinct forged ones (Apple's chain)
// receipt-bench forge-receipts --fixtures DIR --out DIR [--count N]   write N distinct forged receipts, for wrk
// receipt-bench jws --fixtures DIR [--jws FILE]          StoreKit 2: floor, cached verification, distinct forgeries
// receipt-bench real-path [--seconds S]                  the server's intake (ReceiptRoutes.handle) on a realistic
//                                                        forged transaction JWS against its ES256 floor, and on
//                                                        tpinapp_1 against the RSA floor
// receipt-bench profile-real-path [--count N]            N requests of that JWS through ReceiptRoutes.handle, for callgrind
// receipt-bench profile-floor-jws [--count N]            N ES256 + SHA-256 floors of the same JWS, for callgrind
// receipt-bench write-real-path --out DIR                that JWS, its test root and a serve config, for wrk and scripts
// receipt-bench ledger --fixtures DIR [--count SENDERS] [--postgres CONNINFO]
//                                                        the ledger beside a validation; notifications committed/s
// receipt-bench forge-notifications --out DIR [--count N]   N distinct forged notifications (files) and their test
//                                                        root, for Benchmarks/scripts/ingest.sh
// receipt-bench accounts [--count N]                     issue 24: an account of 3 subscriptions and 200 transactions
//                                                        against each subscription, and token linking's cost, on
//                                                        SQLite; N interleaved repetitions (default 400)
// receipt-bench write-accounts --out DIR                the same ledger (DIR/ledger.sqlite) and a config for
//                                                        receiptd serve, for Benchmarks/scripts/accounts_http.sh
// receipt-bench profile-accounts --target T [--count N]  N of one of them without the 2,000 other accounts, for
//                                                        callgrind: T a path (/v1/accounts/spread), or tree:ACCOUNT
//                                                        or text:ACCOUNT for AccountReport's json.serialized() or
//                                                        jsonText alone, or purchase:ACCOUNT (validate:ACCOUNT) to
//                                                        post one JWS month of its first subscription to its
//                                                        purchases route (to /v1/validate)

struct Arguments {
    var mode = "inprocess"
    var fixtures = "../../shared/fixtures/apple"
    var seconds = 0.4
    var count = 2_000
    var countGiven = false
    var out = ""
    var jws = ""
    var postgres = ""
    var target = ""

    init(_ arguments: [String]) {
        var rest = arguments[...]
        if let first = rest.first, !first.hasPrefix("--") { mode = rest.removeFirst() }
        while let flag = rest.popFirst() {
            let value = rest.popFirst() ?? ""
            switch flag {
            case "--fixtures": fixtures = value
            case "--seconds": seconds = Double(value) ?? seconds
            case "--count":
                count = Int(value) ?? count
                countGiven = true
            case "--out": out = value
            case "--jws": jws = value
            case "--postgres": postgres = value
            case "--target": target = value
            default:
                FileHandle.standardError.write(Data("unknown argument \(flag)\n".utf8))
                exit(2)
            }
        }
    }
}

func read(_ path: String) -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else {
        FileHandle.standardError.write(Data("cannot read \(path)\n".utf8))
        exit(1)
    }
    return Array(data)
}

/// Validation plus the JSON answer, as `POST /v1/validate` does once the body is read.
func fullValidation(_ validator: ReceiptValidator, _ receipt: [UInt8], at time: Date) -> Int {
    let result = validator.validate(receipt, at: time)
    return ResultJSON.encode(result).count + (result.isValid ? 1 : 0)
}

func microseconds(_ nanoseconds: Double) -> String { String(format: "%9.2f µs", nanoseconds / 1000) }

func row(_ label: String, _ value: String, _ note: String = "") {
    print(label.padding(toLength: 46, withPad: " ", startingAt: 0) + value + (note.isEmpty ? "" : "   " + note))
}

let arguments = Arguments(Array(CommandLine.arguments.dropFirst()))
if arguments.mode == "forge-notifications" {
    writeIngestNotifications(count: arguments.count, to: arguments.out)
    exit(0)
}
if arguments.mode == "accounts" || arguments.mode == "profile-accounts" {
    accountsBenchmark(
        repetitions: arguments.countGiven ? arguments.count : 400,
        profiling: arguments.mode == "profile-accounts" ? arguments.target : nil)
    exit(0)
}

let typical = read(arguments.fixtures + "/receipts/tpinapp_1.der")
let large = read(arguments.fixtures + "/receipts/tpinapp_3.der")
let appleRoot = read(arguments.fixtures + "/certs/AppleIncRootCertificate.cer")
let now = Date()
let appleValidator = ReceiptValidator(policy: ValidationPolicy())

switch arguments.mode {
case "profile":
    var sink = 0
    for _ in 0..<arguments.count { sink &+= fullValidation(appleValidator, typical, at: now) }
    print("\(arguments.count) validations, \(sink) bytes of JSON")
    exit(0)
case "profile-route", "profile-route-token":
    // What a token costs: parsing the header, SHA-256 of the token, a constant-time compare against each entry.
    // Both modes run the same validation through ReceiptRoutes.handle; only the authorization differs.
    let token = "bench-token-0123456789abcdefghijklmnopqrstuvwxyzAB"
    var configuration = ServiceConfiguration()
    var headers = HTTPHeaders([("Content-Type", "application/octet-stream")])
    if arguments.mode == "profile-route-token" {
        configuration.apiTokens = [
            APIToken(name: "metrics-scraper", token: token + "-other", scopes: [.metrics]),
            APIToken(name: "backend", token: token, scopes: [.validate, .ledgerRead, .claim]),
        ]
        headers.add(name: "Authorization", value: "Bearer \(token)")
    }
    let routes = ReceiptRoutes(
        configuration: configuration, validator: appleValidator, metrics: ServiceMetrics(), clock: { now })
    let request = HTTPRequest(
        method: .post, target: "/v1/validate", headers: headers, body: typical, peer: .benchmarkClient,
        listener: .benchmarkListener)
    var ok = 0
    for _ in 0..<arguments.count where routes.handle(request, on: .main).status == .ok { ok += 1 }
    print("\(ok) of \(arguments.count) validations answered 200 (\(arguments.mode))")
    exit(ok == arguments.count ? 0 : 1)
case "profile-floor":
    // The same count of signature-only checks, to compare instruction counts under callgrind.
    let baselines = try OpenSSLBaselines(receipt: typical, root: appleRoot)
    var verified = 0
    for _ in 0..<arguments.count where baselines.signatureOnly() { verified += 1 }
    print("\(verified) signature checks")
    exit(0)
case "rate":
    // run.sh measures this just before and after the HTTP runs: this virtual machine's speed drifts by a third over
    // minutes, and the HTTP ratio must compare rates taken at the same speed.
    let (times, consumed) = measureInterleaved(sampleSeconds: arguments.seconds, [
        { fullValidation(appleValidator, typical, at: now) }
    ])
    print("in_process_rate_per_core=\(Int(1e9 / times[0]))")
    exit(consumed == 42 ? 1 : 0)
case "forged":
    forgedReceipts(count: arguments.countGiven ? arguments.count : 512)
    exit(0)
case "forge-receipts":
    writeForgedReceipts(count: arguments.countGiven ? arguments.count : 512, to: arguments.out)
    exit(0)
case "jws":
    storeKit(count: arguments.countGiven ? arguments.count : 256)
    exit(0)
case "profile-jws":
    // Genuine StoreKit 2 verifications only, chain cached, for callgrind.
    let path = arguments.jws.isEmpty ? arguments.fixtures + "/../apple-jws/transaction_5.jws" : arguments.jws
    let text = Array(read(path))
    let verifier = JWSVerifier(policy: ValidationPolicy())
    var valid = 0
    for _ in 0..<arguments.count where verifier.verify(text, at: now).isValid { valid += 1 }
    print("\(valid) valid StoreKit 2 verifications")
    exit(0)
case "ledger":
    ledgerCosts(
        receipt: typical, senders: arguments.countGiven ? arguments.count : 16,
        postgres: arguments.postgres.isEmpty ? nil : arguments.postgres)
    exit(0)
case "real-path":
    realPath()
    exit(0)
case "profile-real-path", "profile-floor-jws":
    // The same JWS in both; the random test chain changes between runs, the instruction counts do not.
    let path = try RealPath(now: now)
    var sink = 0
    if arguments.mode == "profile-floor-jws" {
        let floor = try ES256Floor(jws: path.jws)
        for _ in 0..<arguments.count where floor.verify() { sink += 1 }
    } else {
        for _ in 0..<arguments.count { sink &+= path.handle() }
    }
    print("\(arguments.count) \(arguments.mode), sink \(sink)")
    exit(sink > 0 ? 0 : 1)
case "write-accounts":
    writeAccountsLedger(to: arguments.out)
    exit(0)
case "write-real-path":
    writeRealPath(to: arguments.out)
    exit(0)
case "inprocess":
    break
default:
    FileHandle.standardError.write(Data("unknown mode \(arguments.mode)\n".utf8))
    exit(2)
}

// Check every input gives the verdict it should before timing anything.
let typicalResult = appleValidator.validate(typical, at: now)
let largeResult = appleValidator.validate(large, at: now)
guard typicalResult.isValid, largeResult.isValid else {
    print("fixture receipts do not validate: \(typicalResult.error?.description ?? "-") / \(largeResult.error?.description ?? "-")")
    exit(1)
}
let typicalPurchases = typicalResult.receipt!.inAppPurchases.count
let largePurchases = largeResult.receipt!.inAppPurchases.count

// A forged PKI and receipts of 5 and 3,000 purchases, signed like Apple's (SHA-256, root included).
let authority = try TestCertificateAuthority.generate()
let forgedValidator = ReceiptValidator(policy: ValidationPolicy(additionalTrustAnchors: [authority.rootAnchor]))
func forged(purchases: Int) throws -> [UInt8] {
    let created = ReceiptDate(now.addingTimeInterval(-3600))
    var blueprint = ReceiptBlueprint(bundleID: "com.example.bench", applicationVersion: "1.0", creationDate: created)
    blueprint.purchases = (0..<purchases).map { index in
        PurchaseBlueprint(
            productID: "com.example.bench.product\(index % 7)", transactionID: String(100_000_000_000 + index),
            purchaseDate: created)
    }
    return try blueprint.forge(with: authority)
}
let forged5 = try forged(purchases: 5)
let forged3000 = try forged(purchases: 3000)
guard forgedValidator.validate(forged5, at: now).isValid, forgedValidator.validate(forged3000, at: now).isValid else {
    print("forged receipts do not validate")
    exit(1)
}

let baselines = try OpenSSLBaselines(receipt: typical, root: appleRoot)
let seconds = arguments.seconds
var sink = 0
@MainActor func timed(_ bodies: [() -> Int]) -> [Double] {
    let (times, consumed) = measureInterleaved(sampleSeconds: seconds, bodies)
    sink &+= consumed
    return times
}

print("receipt-bench: in-process, one thread; median of 7 interleaved samples of ~\(seconds) s each")
print(
    "typical receipt: tpinapp_1.der, \(typical.count) bytes, \(typicalPurchases) purchases, "
        + "signed attributes: \(baselines.hasSignedAttributes ? "yes" : "no")")
print("")

let headline = timed([
    { baselines.signatureOnly() ? 1 : 0 },
    { fullValidation(appleValidator, typical, at: now) },
    { appleValidator.validate(typical, at: now).isValid ? 1 : 0 },
    { ResultJSON.encode(typicalResult).count },
])
let (floor, full, validateOnly, encodeOnly) = (headline[0], headline[1], headline[2], headline[3])
let naive = timed([{ baselines.naivePKCS7Verify() ? 1 : 0 }])[0]

row("signature-only floor (SHA-256 + RSA verify)", microseconds(floor))
row("naive d2i_PKCS7 + PKCS7_verify with chain", microseconds(naive), String(format: "%.1fx floor", naive / floor))
row("receiptd validate()", microseconds(validateOnly), String(format: "%.2fx floor", validateOnly / floor))
row("  of which ResultJSON.encode alone", microseconds(encodeOnly))
row("receiptd full validation (validate + JSON)", microseconds(full), String(format: "%.2fx floor", full / floor))
row("ratio full / floor", String(format: "%9.2f", full / floor), full / floor <= 2 ? "(goal <= 2.00: met)" : "(goal <= 2.00: NOT met)")
row("ratio naive / full", String(format: "%9.2f", naive / full))
row("full validations per second, one core", String(format: "%9.0f /s", 1e9 / full))
print("")

let scaling = timed([
    { fullValidation(forgedValidator, forged5, at: now) },
    { fullValidation(appleValidator, large, at: now) },
    { fullValidation(forgedValidator, forged3000, at: now) },
])
let (forged5Time, largeTime, forged3000Time) = (scaling[0], scaling[1], scaling[2])
func perPurchase(_ total: Double, _ count: Int) -> String {
    String(format: "%7.2f µs/purchase overall", total / 1000 / Double(count))
}
row("forged, 5 purchases (\(forged5.count) bytes)", microseconds(forged5Time), perPurchase(forged5Time, 5))
row("tpinapp_3, \(largePurchases) purchases (\(large.count) bytes)", microseconds(largeTime), perPurchase(largeTime, largePurchases))
row("forged, 3000 purchases (\(forged3000.count) bytes)", microseconds(forged3000Time), perPurchase(forged3000Time, 3000))
let marginalLarge = (largeTime - full) / Double(largePurchases - typicalPurchases) / 1000
let marginalForged = (forged3000Time - forged5Time) / 2995 / 1000
row("  marginal per purchase, tpinapp_3 vs _1", String(format: "%9.2f µs", marginalLarge))
row("  marginal per purchase, forged 3000 vs 5", String(format: "%9.2f µs", marginalForged))
print("")
// For run.sh: the HTTP goal is 60% of this rate times the cores in use.
print("in_process_rate_per_core=\(Int(1e9 / full))")
if sink == 42 { print("") }

/// Takes the next item of a fixed list on every call, so each call of a timed body sees another forgery.
final class Cycle<Item> {
    private let items: [Item]
    private var index = 0

    init(_ items: [Item]) { self.items = items }

    func next() -> Item {
        defer { index = index + 1 == items.count ? 0 : index + 1 }
        return items[index]
    }
}

/// Genuine receipts (chain decided once, then cached) against distinct forgeries under Apple's genuine intermediate
/// and root, interleaved. Refusals are never cached, so cycling through the forgeries is the same as never repeating.
@MainActor func forgedReceipts(count: Int) {
    let genuineResult = appleValidator.validate(typical, at: now)
    guard genuineResult.isValid else {
        print("the genuine receipt does not validate: \(genuineResult.error?.description ?? "-")")
        exit(1)
    }
    let forgeries: [[UInt8]]
    do { forgeries = try Forgeries.receipts(from: typical, count: count) } catch {
        print("forging: \(error)")
        exit(1)
    }
    for forgery in forgeries.prefix(8) {
        let result = appleValidator.validate(forgery, at: now)
        guard result.error?.code == .certificateUntrusted else {
            print("a forged receipt is not refused as certificate_untrusted: \(result.error?.description ?? "valid")")
            exit(1)
        }
    }
    let cycle = Cycle(forgeries)
    let (times, consumed) = measureInterleaved(sampleSeconds: arguments.seconds, [
        { fullValidation(appleValidator, typical, at: now) },
        { fullValidation(appleValidator, cycle.next(), at: now) },
    ])
    print("receipt-bench: forged receipts, in-process, one thread; median of 7 interleaved samples of ~\(arguments.seconds) s")
    print("forgeries: \(count) distinct leaves (fresh RSA-2048 key, Apple's names, own serial) under the intermediate and root of tpinapp_1.der")
    print("refusal: \(appleValidator.validate(forgeries[0], at: now).error?.description ?? "-")")
    print("")
    row("genuine tpinapp_1, chain cached (+ JSON)", microseconds(times[0]))
    row("distinct forged receipts (+ JSON)", microseconds(times[1]))
    row("ratio forged / genuine", String(format: "%9.2f", times[1] / times[0]), times[1] / times[0] <= 2 ? "(goal <= 2.00: met)" : "(goal <= 2.00: NOT met)")
    print("forged_receipt_ratio=\(String(format: "%.2f", times[1] / times[0]))")
    if consumed == 42 { print("") }
}

func writeForgedReceipts(count: Int, to directory: String) {
    guard !directory.isEmpty else {
        FileHandle.standardError.write(Data("forge-receipts needs --out DIR\n".utf8))
        exit(2)
    }
    do {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (index, forgery) in try Forgeries.receipts(from: typical, count: count).enumerated() {
            let path = directory + "/" + String(format: "%05d.der", index)
            guard FileManager.default.createFile(atPath: path, contents: Data(forgery)) else {
                throw CocoaError(.fileWriteUnknown)
            }
        }
    } catch {
        print("forging: \(error)")
        exit(1)
    }
    print("wrote \(count) forged receipts to \(directory)")
}

/// StoreKit 2: a real Apple-signed transaction verified with its chain decision cached, against the floor of one
/// ES256 verification (SHA-256 over the signing input included), and distinct forgeries under Apple's real G6
/// intermediate and G3 root, all interleaved.
@MainActor func storeKit(count: Int) {
    let path = arguments.jws.isEmpty ? arguments.fixtures + "/../apple-jws/transaction_5.jws" : arguments.jws
    let text = String(decoding: read(path), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    let verifier = JWSVerifier(policy: ValidationPolicy())
    let genuine = verifier.verify(text, at: now)
    guard genuine.isValid else {
        print("\(path) does not verify: \(genuine.error?.description ?? "-")")
        exit(1)
    }
    let floor: ES256Floor
    let forgeries: [String]
    do {
        floor = try ES256Floor(jws: text)
        forgeries = try Forgeries.jws(from: text, count: count)
    } catch {
        print("\(error)")
        exit(1)
    }
    for forgery in forgeries.prefix(8) {
        let result = verifier.verify(forgery, at: now)
        guard result.error?.code == .certificateUntrusted else {
            print("a forged JWS is not refused as certificate_untrusted: \(result.error?.description ?? "valid")")
            exit(1)
        }
    }
    let bytes = Array(text.utf8)
    let cycle = Cycle(forgeries.map { Array($0.utf8) })
    let (times, consumed) = measureInterleaved(sampleSeconds: arguments.seconds, [
        { floor.verify() ? 1 : 0 },
        { verifier.verify(bytes, at: now).isValid ? 1 : 0 },
        { JWSResultJSON.encode(verifier.verify(bytes, at: now)).count },
        { JWSResultJSON.encode(verifier.verify(cycle.next(), at: now)).count },
    ])
    let (floorTime, verifyTime, fullTime, forgedTime) = (times[0], times[1], times[2], times[3])
    print("receipt-bench: StoreKit 2, in-process, one thread; median of 7 interleaved samples of ~\(arguments.seconds) s")
    print("signed transaction: \((path as NSString).lastPathComponent), \(bytes.count) bytes, Apple-signed (G3 → G6 → leaf)")
    print("forgeries: \(count) distinct leaves (fresh P-256 key, Apple's names, own serial) under Apple's G6 and G3 from its x5c")
    print("refusal: \(verifier.verify(forgeries[0], at: now).error?.description ?? "-")")
    print("")
    row("floor: SHA-256 + P-256 verify, key parsed", microseconds(floorTime))
    row("receiptd verify(), chain cached", microseconds(verifyTime), String(format: "%.2fx floor", verifyTime / floorTime))
    row("receiptd verify() + JSON answer", microseconds(fullTime), String(format: "%.2fx floor", fullTime / floorTime))
    row("ratio verify / floor", String(format: "%9.2f", verifyTime / floorTime), verifyTime / floorTime <= 1.5 ? "(goal <= 1.50: met)" : "(goal <= 1.50: NOT met)")
    row("distinct forged JWS (verify + JSON)", microseconds(forgedTime), String(format: "%.1fx genuine (verify + JSON)", forgedTime / fullTime))
    print("jws_ratio=\(String(format: "%.2f", verifyTime / floorTime)) jws_forged_ratio=\(String(format: "%.1f", forgedTime / fullTime)) jws_verify_us=\(String(format: "%.1f", verifyTime / 1000))")
    if consumed == 42 { print("") }
}
