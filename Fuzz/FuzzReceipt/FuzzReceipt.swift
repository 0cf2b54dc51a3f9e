// libFuzzer target for the receipt decoder: the PKCS#7 container, the trust path and the payload, all reached
// through `ReceiptValidator.validate`. Build with `swift build -c release --sanitize=fuzzer --sanitize=address`;
// a plain `swift build` links it as a program that does nothing.
//
// The first input byte picks what the rest is:
//   bit 0 clear: a whole receipt (DER or BER), validated as it is;
//   bit 0 set:   a receipt payload, signed here by a test authority first, so that mutations reach the payload
//                decoder instead of dying at the signature check; bit 1 re-encodes the signed receipt with
//                indefinite lengths (Xcode's BER), bit 2 signs with SHA-1 instead of SHA-256.
// RECEIPT_FUZZ_CA=DIR makes the authority that of DIR (created there when missing, `receiptd testing init-ca`
// layout), so whole receipts forged from it verify; RECEIPT_FUZZ_WRITE_SEEDS=DIR writes a seed corpus and exits.

import Foundation
import ReceiptEngine
import ReceiptForge

private let validationTime = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
private let bundleID = "com.example.fuzz"
private let device = DeviceIdentifier("6E1D8A9C-2B1F-4D3E-9A7B-0C5D4E3F2A1B")!

private let authority: TestCertificateAuthority = {
    var options = TestCertificateAuthority.Options(now: validationTime)
    // Wide enough that forged creation dates from 1970 to 2099 fall inside the chain's validity.
    options.notBefore = Date(timeIntervalSince1970: 0)
    options.notAfter = Date(timeIntervalSince1970: 4_102_444_799)
    options.keyBits = 1024  // Signing runs once per input: a small key keeps executions fast.
    guard let directory = ProcessInfo.processInfo.environment["RECEIPT_FUZZ_CA"] else {
        return try! TestCertificateAuthority.generate(options)
    }
    if !FileManager.default.fileExists(atPath: (directory as NSString).appendingPathComponent("root.pem")) {
        try! TestCertificateAuthority.generate(options).write(toDirectory: directory)
    }
    return try! TestCertificateAuthority(directory: directory)
}()

private let validator = ReceiptValidator(
    policy: ValidationPolicy(
        additionalTrustAnchors: [authority.rootAnchor],
        apps: [AppPolicy(bundleID: bundleID, acceptedVersions: ["1.0", "2.0"])]))

@_cdecl("LLVMFuzzerInitialize")
public func initialize(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> CInt {
    _ = validator
    if let directory = ProcessInfo.processInfo.environment["RECEIPT_FUZZ_WRITE_SEEDS"] {
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
    let receipt: [UInt8]
    if mode & 1 == 0 {
        receipt = rest
    } else {
        guard let signed = try? authority.sign(payload: rest, digest: mode & 4 == 0 ? .sha256 : .sha1) else { return 0 }
        if mode & 2 == 0 {
            receipt = signed
        } else {
            guard let ber = try? indefiniteLengthReceipt(signed, chunkSize: 1 + Int(mode >> 3)) else { return 0 }
            receipt = ber
        }
    }
    let result = validator.validate(receipt, deviceIdentifier: device, at: validationTime)
    // Contract of ValidationResult: a valid verdict always carries the receipt it is about.
    if result.isValid, result.receipt == nil { fatalError("valid verdict without a receipt") }
    return 0
}

/// Seeds made with the forge (never Apple's receipts): payloads for the signing modes, whole receipts for mode 0.
private func writeSeeds(to directory: String) throws {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    func date(_ text: String) -> ReceiptDate { ReceiptDate(rfc3339: text)! }
    func write(_ name: String, _ mode: UInt8, _ bytes: [UInt8]) throws {
        let path = (directory as NSString).appendingPathComponent(name)
        try Data([mode] + bytes).write(to: URL(fileURLWithPath: path))
    }

    var plain = ReceiptBlueprint(
        bundleID: bundleID, applicationVersion: "1.0", deviceIdentifier: device, creationDate: date("2025-06-01T12:00:00Z"))
    plain.opaqueValue = Array(0..<16)

    var purchases = plain
    purchases.receiptType = "ProductionSandbox"
    purchases.expirationDate = date("2026-06-01T00:00:00Z")
    var monthly = PurchaseBlueprint(
        productID: "pro.monthly", transactionID: "1001", originalTransactionID: "1000",
        purchaseDate: date("2025-12-15T00:00:00Z"), expiresDate: date("2026-01-15T00:00:00Z"))
    monthly.webOrderLineItemID = 77
    monthly.isInIntroOfferPeriod = true
    monthly.promotionalOfferID = "winback"
    var cancelled = PurchaseBlueprint(
        productID: "pro.yearly", transactionID: "2001", purchaseDate: date("2025-01-01T00:00:00.250+02:00"),
        expiresDate: date("2026-01-01T00:00:00Z"))
    cancelled.cancellationDate = date("2025-03-01T00:00:00Z")
    cancelled.isTrialPeriod = true
    var coins = PurchaseBlueprint(productID: "coins.100", transactionID: "3001", purchaseDate: date("2025-05-05T05:05:05Z"))
    coins.quantity = 3
    purchases.purchases = [monthly, cancelled, coins]

    var odd = plain
    odd.applicationVersion = "9.9"
    odd.extraAttributes = [
        ReceiptAttributeBlueprint(type: 999, value: [0x05, 0x00]),
        ReceiptAttributeBlueprint(type: -1, version: 7, value: []),
        ReceiptAttributeBlueprint(type: 16, value: [0x02, 0x01, 0x2A]),
    ]
    odd.omittedTypes = [19]

    try write("payload-plain", 1, plain.payload)
    try write("payload-purchases", 1, purchases.payload)
    try write("payload-purchases-ber", 3 | (7 << 3), purchases.payload)
    try write("payload-purchases-sha1", 5, purchases.payload)
    try write("payload-odd-attributes", 1, odd.payload)
    try write("receipt-plain", 0, try plain.forge(with: authority))
    try write("receipt-purchases", 0, try purchases.forge(with: authority))
    try write("receipt-purchases-ber", 0, try indefiniteLengthReceipt(try purchases.forge(with: authority), chunkSize: 64))
    try write("receipt-sha1", 0, try plain.forge(with: authority, digest: .sha1))
}
