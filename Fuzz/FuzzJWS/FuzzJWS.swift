// libFuzzer target for StoreKit 2 verification: compact parsing, the header, x5c, the payload JSON, claims and a
// notification's nested JWS, all reached through `JWSVerifier.verify`. Build with
// `swift build -c release --sanitize=fuzzer --sanitize=address`; a plain `swift build` links it as a program that
// does nothing.
//
// The first input byte picks what the rest is:
//   bit 0 clear: a whole compact JWS, verified as it is (cached chains, forged leaves, broken base64 and JSON);
//   bit 0 set, bit 1 clear: a payload, signed here by a test chain first, so that mutations reach the kind, the
//                claims and nested JWS instead of dying at the signature;
//   bit 0 set, bit 1 set: a header, signed here over a fixed payload, so that mutations reach alg, crit, kid and x5c.
// JWS_FUZZ_CA=DIR makes the chain that of DIR (created there when missing, `receiptd testing init-ca` layout), so
// whole JWS forged from it verify; JWS_FUZZ_WRITE_SEEDS=DIR writes a seed corpus and exits.

import Foundation
import JSONText
import ReceiptEngine
import ReceiptForge
import ReceiptService
import StoreKitJWS

private let validationTime = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
private let bundleID = "com.example.fuzz"
private let device = DeviceIdentifier("6E1D8A9C-2B1F-4D3E-9A7B-0C5D4E3F2A1B")!

private let authority: JWSTestAuthority = {
    var options = JWSTestAuthority.Options(now: validationTime)
    options.notBefore = Date(timeIntervalSince1970: 0)
    options.notAfter = Date(timeIntervalSince1970: 4_102_444_799)
    guard let directory = ProcessInfo.processInfo.environment["JWS_FUZZ_CA"] else {
        return try! JWSTestAuthority.generate(options)
    }
    if !FileManager.default.fileExists(atPath: (directory as NSString).appendingPathComponent("jws-root.pem")) {
        try! JWSTestAuthority.generate(options).write(toDirectory: directory)
    }
    return try! JWSTestAuthority(directory: directory)
}()

private let verifier = JWSVerifier(
    policy: ValidationPolicy(
        additionalTrustAnchors: [authority.rootAnchor],
        apps: [AppPolicy(bundleID: bundleID, acceptedVersions: ["1.0"], appAppleID: 1_234)],
        environments: [.production, .sandbox, .xcode], maximumReceiptBytes: 64 * 1024))

private let fixedPayload = TransactionBlueprint(bundleID: bundleID, signedDate: validationTime).payload.serialized()

@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> CInt {
    _ = verifier
    if let directory = ProcessInfo.processInfo.environment["JWS_FUZZ_WRITE_SEEDS"] {
        do {
            try writeSeeds(to: directory)
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("writing seeds: \(error)\n".utf8))
            exit(1)
        }
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let mode = data[0]
    let rest = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let jws: [UInt8]
    if mode & 1 == 0 {
        jws = rest
    } else if mode & 2 == 0 {
        guard let signed = try? authority.sign(payloadBytes: rest) else { return 0 }
        jws = Array(signed.utf8)
    } else {
        guard let signed = try? authority.sign(headerBytes: rest, payloadBytes: fixedPayload) else { return 0 }
        jws = Array(signed.utf8)
    }
    let result = verifier.verify(jws, deviceIdentifier: mode & 4 == 0 ? nil : device, at: validationTime)
    // Contracts of JWSValidationResult: a valid verdict carries its kind and payload, and the answer serializes.
    if result.isValid, result.kind == nil || result.payload == nil { fatalError("valid verdict without kind or payload") }
    if result.payload == nil, result.kind != nil { fatalError("a kind reported from an unverified payload") }
    _ = JWSResultJSON.encode(result)
    return 0
}

/// Seeds made with the forge (never Apple's JWS): payloads and headers for the signing modes, whole JWS for mode 0.
private func writeSeeds(to directory: String) throws {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    func write(_ name: String, _ mode: UInt8, _ bytes: [UInt8]) throws {
        let path = (directory as NSString).appendingPathComponent(name)
        try Data([mode] + bytes).write(to: URL(fileURLWithPath: path))
    }
    var transaction = TransactionBlueprint(bundleID: bundleID, signedDate: validationTime)
    let nonce = UUID(uuidString: "9B58902D-4436-4E92-AD01-CA69747F2754")!
    transaction.deviceVerification = (deviceVerification(device: device, nonce: nonce), nonce)
    let renewal = RenewalInfoBlueprint(signedDate: validationTime)
    var app = AppTransactionBlueprint(bundleID: bundleID, receiptCreationDate: validationTime, receiptType: "Production")
    app.appAppleID = 1_234
    app.bind(to: device, nonce: nonce)
    var notification = NotificationBlueprint(
        type: "DID_RENEW", bundleID: bundleID, signedDate: validationTime, environment: "Production")
    notification.appAppleID = 1_234
    notification.status = 1
    notification.signedTransactionInfo = try authority.sign(transaction.payload)
    notification.signedRenewalInfo = try authority.sign(renewal.payload)
    var external = NotificationBlueprint(
        type: "EXTERNAL_PURCHASE_TOKEN", subtype: "UNREPORTED", bundleID: bundleID, signedDate: validationTime)
    external.section = .externalPurchaseToken

    try write("payload-transaction", 5, transaction.payload.serialized())
    try write("payload-renewal-info", 1, renewal.payload.serialized())
    try write("payload-app-transaction", 5, app.payload.serialized())
    try write("payload-notification", 1, notification.payload.serialized())
    try write("payload-external-token", 1, external.payload.serialized())
    try write("header", 3, authority.header)
    try write("jws-transaction", 0, Array(try authority.sign(transaction.payload).utf8))
    try write("jws-notification", 0, Array(try authority.sign(notification.payload).utf8))
}
