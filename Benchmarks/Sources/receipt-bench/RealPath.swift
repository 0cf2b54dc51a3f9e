import Foundation
import HTTP1Server
import JSONText
import ReceiptEngine
import ReceiptForge
import ReceiptService
import StoreKitJWS

/// The server's own intake, without the socket: a body goes through `ReceiptRoutes.handle` exactly as the HTTP layer
/// hands it over (media type, detection, decoding, verification, checks, the JSON answer), so what is timed here is
/// what `POST /v1/validate` costs once the request is read.
struct RealPath {
    /// A transaction as Apple signs one today, every documented member set, forged under a test chain shaped like
    /// Apple's (P-384 root, P-384 intermediate with the WWDR marker, P-256 leaf with the signing marker).
    let jws: String
    let authority: JWSTestAuthority
    let routes: ReceiptRoutes
    let request: HTTPRequest

    init(now: Date) throws {
        authority = try JWSTestAuthority.generate(JWSTestAuthority.Options(now: now))
        var transaction = TransactionBlueprint(
            bundleID: "com.example.receiptd.bench", signedDate: now.addingTimeInterval(-120), environment: "Production")
        transaction.transactionID = "2000000812345678"
        transaction.originalTransactionID = "2000000712345678"
        transaction.webOrderLineItemID = "2000000098765432"
        transaction.productID = "com.example.receiptd.bench.premium.yearly"
        transaction.type = "Auto-Renewable Subscription"
        transaction.deviceVerification = (
            "9uTJUzVk3R3FjhS5yCQm7a0c3QFmO0a0uWmN0mJqv5dX1YtJf8y3e6yQvQXgWcYq", UUID())
        func milliseconds(_ seconds: TimeInterval) -> JSONValue { .integer(Int64((now.timeIntervalSince1970 + seconds) * 1000)) }
        transaction.edits.set = [
            ("appAccountToken", .string("7e3fb20b-4cdb-47cc-936d-99d65f608138")),
            ("appTransactionId", .string("704289572311573129")),
            ("subscriptionGroupIdentifier", .string("21452011")),
            ("isUpgraded", .bool(false)),
            ("offerType", .integer(1)),
            ("offerIdentifier", .string("com.example.receiptd.bench.intro.free-week")),
            ("offerDiscountType", .string("FREE_TRIAL")),
            ("offerPeriod", .string("P1W")),
            ("revocationType", .string("REFUND_FULL")),
            ("revocationPercentage", .integer(0)),
            ("billingPlanType", .string("UPFRONT")),
            ("storefront", .string("DEU")),
            ("storefrontId", .string("143443")),
            ("price", .integer(49_990)),
            ("currency", .string("EUR")),
            ("transactionReason", .string("PURCHASE")),
            ("commitmentInfo", .object([
                ("commitmentPeriod", .string("P1Y")), ("commitmentStartDate", milliseconds(-86_400)),
                ("commitmentEndDate", milliseconds(364 * 86_400)), ("commitmentPrice", .integer(49_990)),
            ])),
            ("advancedCommerceInfo", .object([
                ("requestReferenceId", .string("c1b2a3f4-0000-4e5d-9a8b-7c6d5e4f3a2b")),
                ("taxCode", .string("C003-00-2")), ("taxExclusivePrice", .integer(42_010)),
                ("taxRate", .string("0.19")), ("estimatedTax", .integer(7_980)),
                ("period", .string("P1Y")), ("descriptors", .object([
                    ("displayName", .string("Premium")), ("description", .string("Every feature, for a year")),
                ])),
            ])),
        ]
        jws = try authority.sign(transaction.payload)

        var configuration = ServiceConfiguration()
        configuration.apps = []
        let policy = ValidationPolicy(additionalTrustAnchors: [authority.rootAnchor])
        routes = ReceiptRoutes(
            configuration: configuration, validator: ReceiptValidator(policy: policy), metrics: ServiceMetrics(),
            clock: { now })
        // What a client library sends: the JWS as it came from StoreKit, as text.
        request = HTTPRequest(
            method: .post, target: "/v1/validate", headers: HTTPHeaders([("Content-Type", "text/plain")]),
            body: Array(jws.utf8), peer: .benchmarkClient, listener: .benchmarkListener)
    }

    /// One request through the routes; the answer's length, so nothing is optimized away.
    func handle() -> Int {
        let response = routes.handle(request, on: .main)
        return response.status == .ok ? response.body.count : -1_000_000
    }
}

/// The intake against its floors, interleaved: the realistic JWS through the routes against SHA-256 + one P-256
/// verification of the same JWS, and `tpinapp_1.der` through the routes against SHA-256 + one RSA-2048 verification.
@MainActor func realPath() {
    let path: RealPath
    let floor: ES256Floor
    let baselines: OpenSSLBaselines
    do {
        path = try RealPath(now: now)
        floor = try ES256Floor(jws: path.jws)
        baselines = try OpenSSLBaselines(receipt: typical, root: appleRoot)
    } catch {
        print("\(error)")
        exit(1)
    }
    let receiptRoutes = ReceiptRoutes(
        configuration: ServiceConfiguration(), validator: appleValidator, metrics: ServiceMetrics(), clock: { now })
    let receiptRequest = HTTPRequest(
        method: .post, target: "/v1/validate", headers: HTTPHeaders([("Content-Type", "application/octet-stream")]),
        body: typical, peer: .benchmarkClient, listener: .benchmarkListener)
    guard path.handle() > 0, receiptRoutes.handle(receiptRequest, on: .main).status == .ok else {
        print("the realistic JWS or tpinapp_1.der is not answered 200: "
            + String(decoding: path.routes.handle(path.request, on: .main).body, as: UTF8.self))
        exit(1)
    }
    let (times, consumed) = measureInterleaved(sampleSeconds: arguments.seconds, [
        { floor.verify() ? 1 : 0 },
        { path.handle() },
        { baselines.signatureOnly() ? 1 : 0 },
        { receiptRoutes.handle(receiptRequest, on: .main).body.count },
    ])
    let (jwsFloor, jwsRoute, receiptFloor, receiptRoute) = (times[0], times[1], times[2], times[3])
    print("receipt-bench: the server's intake (ReceiptRoutes.handle: body -> detection -> verify -> JSON answer),")
    print("in-process, one thread; median of 7 interleaved samples of ~\(arguments.seconds) s")
    print("JWS: a forged transaction, every documented member set, \(path.jws.utf8.count) bytes, text/plain, test chain"
        + " shaped like Apple's (P-384 root and intermediate, P-256 leaf)")
    print("")
    row("floor: SHA-256 + P-256 verify of that JWS", microseconds(jwsFloor))
    row("POST /v1/validate of that JWS, in process", microseconds(jwsRoute), String(format: "%.2fx floor", jwsRoute / jwsFloor))
    row("floor: SHA-256 + RSA verify of tpinapp_1", microseconds(receiptFloor))
    row("POST /v1/validate of tpinapp_1, in process", microseconds(receiptRoute),
        String(format: "%.2fx floor", receiptRoute / receiptFloor))
    print("real_path_jws_ratio=\(String(format: "%.2f", jwsRoute / jwsFloor)) "
        + "real_path_receipt_ratio=\(String(format: "%.2f", receiptRoute / receiptFloor)) "
        + "jws_floor_rate_per_core=\(Int(1e9 / jwsFloor)) receipt_floor_rate_per_core=\(Int(1e9 / receiptFloor))")
    if consumed == 42 { print("") }
}

/// The realistic JWS, its test root and a config trusting it, for runs over HTTP and side-by-side scripts.
func writeRealPath(to directory: String) {
    guard !directory.isEmpty else {
        FileHandle.standardError.write(Data("write-real-path needs --out DIR\n".utf8))
        exit(2)
    }
    do {
        let path = try RealPath(now: now)
        try path.authority.write(toDirectory: directory)
        try Data(path.jws.utf8).write(to: URL(fileURLWithPath: directory + "/transaction.jws"))
        print("wrote \(directory)/transaction.jws (\(path.jws.utf8.count) bytes) and \(directory)/jws-root.pem")
    } catch {
        print("\(error)")
        exit(1)
    }
}
