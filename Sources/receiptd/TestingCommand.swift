import Foundation
import ReceiptEngine
import ReceiptForge
import ReceiptService

/// `receiptd testing init-ca DIR` and `receiptd testing receipt …`: a test PKI and receipts made to order, for
/// integration tests of backends that call receiptd.
func runTesting(_ arguments: [String]) -> Int32 {
    switch arguments.first {
    case "init-ca": return runInitCA(Array(arguments.dropFirst()))
    case "receipt": return runForgeReceipt(Array(arguments.dropFirst()))
    default:
        printError("receiptd testing: expected init-ca or receipt\n\n\(usage)")
        return ExitStatus.usage
    }
}

private func runInitCA(_ arguments: [String]) -> Int32 {
    guard arguments.count == 1, !arguments[0].hasPrefix("-") else {
        printError("receiptd testing init-ca: expected one directory\n\n\(usage)")
        return ExitStatus.usage
    }
    let directory = arguments[0]
    do {
        if FileManager.default.fileExists(atPath: (directory as NSString).appendingPathComponent("root.pem")) {
            throw UsageError("\(directory) already holds a test PKI; remove it or pick another directory")
        }
        try TestCertificateAuthority.generate().write(toDirectory: directory)
    } catch let error as UsageError {
        printError("receiptd testing init-ca: \(error)")
        return ExitStatus.usage
    } catch {
        printError("receiptd testing init-ca: \(error)")
        return ExitStatus.failure
    }
    printError("""
        Test PKI written to \(directory) (for tests only). Trust it in a test config:
          "trusted_roots": ["\((directory as NSString).appendingPathComponent("root.pem"))"]
        """)
    return ExitStatus.success
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
            valued: [
                "--ca", "--bundle-id", "--app-version", "--original-version", "--device-id", "--environment",
                "--created", "--purchase", "--format", "--out",
            ],
            switches: [])
        guard reader.positional.isEmpty else { throw UsageError("unexpected argument \(reader.positional[0])") }
        guard let directory = try reader.value("--ca") else { throw UsageError("--ca DIR is required") }
        guard let bundleID = try reader.value("--bundle-id"), !bundleID.isEmpty else {
            throw UsageError("--bundle-id is required")
        }
        guard let version = try reader.value("--app-version"), !version.isEmpty else {
            throw UsageError("--app-version is required")
        }
        var device: DeviceIdentifier?
        if let text = try reader.value("--device-id") {
            guard let parsed = DeviceIdentifier(text) else {
                throw UsageError("--device-id: expected a UUID (iOS) or a MAC address aa:bb:cc:dd:ee:ff (macOS)")
            }
            device = parsed
        }
        deviceWasGiven = device != nil
        var created = ReceiptDate(Date())
        if let text = try reader.value("--created") {
            guard let date = ReceiptDate(rfc3339: text) else {
                throw UsageError("--created: \"\(text)\" is not an RFC 3339 date (2026-01-01T00:00:00Z)")
            }
            created = date
        }
        var draft = ReceiptBlueprint(
            bundleID: bundleID, applicationVersion: version, deviceIdentifier: device, creationDate: created)
        if let original = try reader.value("--original-version") { draft.originalApplicationVersion = original }
        switch try reader.value("--environment") ?? "Production" {
        case "Production": draft.receiptType = "Production"
        case "Sandbox": draft.receiptType = "ProductionSandbox"
        case let other: throw UsageError("--environment: \"\(other)\" is not Production or Sandbox")
        }
        do {
            draft.purchases = try reader.values("--purchase").map { try PurchaseBlueprint(spec: $0, defaultDate: created) }
        } catch let error as BlueprintError {
            throw UsageError("--purchase: \(error.message)")
        }
        format = try reader.value("--format") ?? "der"
        guard format == "der" || format == "base64" else { throw UsageError("--format: expected der or base64") }
        output = try reader.value("--out")
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
        FileHandle.standardOutput.write(Data(bytes))
    }
    return ExitStatus.success
}
