#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ReceiptEngine
import ReceiptForge
import ReceiptService
import CryptoFloor

let testingUsage = """
    usage: receiptd testing init-ca DIR
           receiptd testing receipt --ca DIR --bundle-id ID --app-version V [flags]
           receiptd testing transaction --ca DIR --bundle-id ID [flags]
           receiptd testing renewal-info --ca DIR [flags]
           receiptd testing app-transaction --ca DIR --bundle-id ID [--device-id ID [--nonce UUID]] [flags]
           receiptd testing notification --ca DIR --type TYPE [--subtype SUBTYPE] --bundle-id ID [flags] [--post URL]
      A test PKI, receipts and StoreKit 2 signed data made to order, for integration tests of backends that call
      receiptd. Receipts validate only where the PKI's root.pem is listed in trusted_roots, signed data only where its
      jws-root.pem is. `receiptd testing COMMAND --help` for more.
    """

let initCAUsage = """
    usage: receiptd testing init-ca DIR
      Writes two test PKIs to DIR, for tests only: a root, intermediate and receipt-signing certificate (root.pem …)
      and an EC chain shaped like Apple's StoreKit 2 one (jws-root.pem …), each with its keys. A DIR made before
      StoreKit 2 support gets the EC chain added.
    """

let forgeReceiptUsage = """
    usage: receiptd testing receipt --ca DIR --bundle-id ID --app-version V [--original-version V] [--device-id ID]
                                    [--environment Production|Sandbox] [--created DATE] [--purchase SPEC]...
                                    [--format der|base64] [--out FILE]
      Signs a receipt with the test PKI in DIR (made by init-ca).
      --device-id ID    a UUID (iOS) or a MAC address (macOS); without it a random one is printed on stderr
      --created DATE    RFC 3339 (2026-01-01T00:00:00Z); default now
      --purchase SPEC   once per in-app transaction, comma-separated field=value: product, transaction (both
                        required), original, quantity, purchased, original_purchased, expires, cancelled,
                        web_order, trial, intro, offer
      --out FILE        default standard output
    """

/// `receiptd testing init-ca DIR`, `receiptd testing receipt …` and the StoreKit 2 forges: a test PKI, receipts and
/// signed data made to order, for integration tests of backends that call receiptd.
func runTesting(_ arguments: [String]) -> Int32 {
    let rest = Array(arguments.dropFirst())
    switch arguments.first {
    case "init-ca": return runInitCA(rest)
    case "receipt": return runForgeReceipt(rest)
    case "transaction": return runForgeTransaction(rest)
    case "renewal-info": return runForgeRenewalInfo(rest)
    case "app-transaction": return runForgeAppTransaction(rest)
    case "notification": return runForgeNotification(rest)
    case "--help", "-h", "help":
        print(testingUsage)
        return ExitStatus.success
    default:
        printError(
            "receiptd testing: expected init-ca, receipt, transaction, renewal-info, app-transaction or notification"
                + "\n\n\(testingUsage)")
        return ExitStatus.usage
    }
}

private func runInitCA(_ arguments: [String]) -> Int32 {
    let directory: String
    do {
        let reader = try ArgumentReader(arguments, options: [])
        if reader.wantsHelp {
            print(initCAUsage)
            return ExitStatus.success
        }
        try reader.expectPositional(atMost: 1)
        guard let first = reader.positional.first else { throw UsageError("expected one directory") }
        directory = first
    } catch {
        printError("receiptd testing init-ca: \(error)\n\n\(initCAUsage)")
        return ExitStatus.usage
    }
    func path(_ name: String) -> String { directory.appendingPathComponent(name) }
    let hasReceiptPKI = FileManager.default.fileExists(atPath: path("root.pem"))
    // A PKI made before StoreKit 2 support is completed rather than refused, so its receipts stay trusted.
    if FileManager.default.fileExists(atPath: path("jws-root.pem")) {
        printError(
            "receiptd testing init-ca: \(directory) already holds a test PKI; remove it or pick another directory")
        return ExitStatus.usage
    }
    do {
        if !hasReceiptPKI { try TestCertificateAuthority.generate().write(toDirectory: directory) }
        try JWSTestAuthority.generate().write(toDirectory: directory)
        try appendStoreKitNote(toReadmeIn: directory)
    } catch {
        printError("receiptd testing init-ca: \(error)")
        return ExitStatus.failure
    }
    printError(
        """
        Test PKI written to \(directory) (for tests only): root.pem signs receipts, jws-root.pem StoreKit 2 signed data.
        Trust both in a test config:
          "trusted_roots": ["\(path("root.pem"))", "\(path("jws-root.pem"))"]
        """)
    return ExitStatus.success
}

/// README.txt is the receipt PKI's; it gains how to trust the EC chain beside it.
private func appendStoreKitNote(toReadmeIn directory: String) throws {
    let readme = directory.appendingPathComponent("README.txt")
    let note = """

        StoreKit 2: jws-root.pem -> jws-intermediate.pem -> jws-signing.pem sign transactions, renewal info, app
        transactions and notifications (receiptd testing transaction|renewal-info|app-transaction|notification; see
        jws-README.txt). Trust receipts and signed data both with:
          "trusted_roots": ["\(directory)/root.pem", "\(directory)/jws-root.pem"]

        """
    guard var contents = FileManager.default.contents(atPath: readme) else { throw UsageError("\(readme): cannot read") }
    contents.append(contentsOf: note.utf8)
    try contents.write(to: URL(fileURLWithPath: readme))
}

private func runForgeReceipt(_ arguments: [String]) -> Int32 {
    let blueprint: ReceiptBlueprint
    let authority: TestCertificateAuthority
    let format: String
    let output: String?
    let deviceWasGiven: Bool
    do {
        let reader = try ArgumentReader(
            arguments,
            options: [
                "--ca", "--bundle-id", "--app-version", "--original-version", "--device-id", "--environment",
                "--created", "--purchase", "--format", "--out",
            ])
        if reader.wantsHelp {
            print(forgeReceiptUsage)
            return ExitStatus.success
        }
        try reader.expectPositional(atMost: 0)
        let directory = try reader.required("--ca")
        let bundleID = try reader.required("--bundle-id")
        let version = try reader.required("--app-version")
        let device = try reader.value("--device-id", expecting: deviceIdentifierForm, DeviceIdentifier.init)
        deviceWasGiven = device != nil
        let created =
            try reader.value("--created", expecting: "an RFC 3339 date (2026-01-01T00:00:00Z)") {
                ReceiptDate(rfc3339: $0)
            } ?? ReceiptDate(Date())
        var draft = ReceiptBlueprint(
            bundleID: bundleID, applicationVersion: version, deviceIdentifier: device, creationDate: created)
        if let original = reader.value("--original-version") { draft.originalApplicationVersion = original }
        let environments = ["Production": "Production", "Sandbox": "ProductionSandbox"]
        draft.receiptType =
            try reader.value("--environment", expecting: "Production or Sandbox") { environments[$0] } ?? "Production"
        do {
            draft.purchases = try reader.values("--purchase").map {
                try PurchaseBlueprint(spec: $0, defaultDate: created)
            }
        } catch let error as BlueprintError {
            throw UsageError("--purchase: \(error.message)")
        }
        let formats: Set = ["der", "base64"]
        format = try reader.value("--format", expecting: "der or base64") { formats.contains($0) ? $0 : nil } ?? "der"
        output = reader.value("--out")
        do {
            authority = try TestCertificateAuthority(directory: directory)
        } catch {
            throw UsageError("--ca: \(error)")
        }
        blueprint = draft
    } catch {
        printError("receiptd testing receipt: \(error)")
        return ExitStatus.usage
    }

    let receipt: [UInt8]
    do {
        receipt = try blueprint.forge(with: authority)
    } catch {
        printError("receiptd testing receipt: signing failed: \(error)")
        return ExitStatus.failure
    }
    if !deviceWasGiven {
        printError("device id: \(blueprint.deviceIdentifier.formatted)")
    }
    let bytes = format == "base64" ? Array((Data(receipt).base64EncodedString() + "\n").utf8) : receipt
    if let output {
        guard FileManager.default.createFile(atPath: output, contents: Data(bytes)) else {
            printError("receiptd testing receipt: \(output): cannot write")
            return ExitStatus.failure
        }
    } else {
        StandardStream.output.write(bytes)
    }
    return ExitStatus.success
}
