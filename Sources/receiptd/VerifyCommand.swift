import Foundation
import JSONText
import ReceiptEngine
import ReceiptService

let verifyUsage = """
    usage: receiptd verify FILE... [--config PATH] [--device-id ID] [--bundle-id ID] [--json]
      Validates each receipt file (DER, or base64 as copied from logs) offline and prints its verdict; several files
      end with a summary, and --json prints one object per file (with "file" when there are several).
      config: --config, else RECEIPTD_CONFIG when not empty, else Config/receiptd.json when present, else defaults
      --device-id ID   the device the receipts must be bound to (a UUID on iOS, a MAC address on macOS)
      --bundle-id ID   accept this app instead of the configured ones
      exit status: 0 when every receipt is valid, 1 when any is not, 2 on a usage error or an unreadable file
    """

/// `receiptd verify FILE... [--config PATH] [--device-id ID] [--bundle-id ID] [--json]`
func runVerify(_ arguments: [String]) -> Int32 {
    let reader: ArgumentReader
    let validator: ReceiptValidator
    let device: DeviceIdentifier?
    do {
        reader = try ArgumentReader(arguments, options: ["--config", "--device-id", "--bundle-id"], flags: ["--json"])
        if reader.wantsHelp {
            print(verifyUsage)
            return ExitStatus.success
        }
        guard !reader.positional.isEmpty else { throw UsageError("verify needs at least one receipt file") }
        device = try reader.value("--device-id", expecting: deviceIdentifierForm, DeviceIdentifier.init)
        validator = try ServiceConfiguration.resolve(
            configPath: reader.value("--config"), environment: ProcessInfo.processInfo.environment,
            fileExists: { FileManager.default.fileExists(atPath: $0) }
        ).makeValidator()
    } catch {
        printError("receiptd verify: \(error)")
        return ExitStatus.usage
    }

    let files = reader.positional
    let expectedBundleID = reader.value("--bundle-id")
    let json = reader.isSet("--json")
    let showProgress = files.count > 1 && isatty(STDERR_FILENO) == 1
    var tally: [String: Int] = [:]
    var unreadable = 0
    for (index, file) in files.enumerated() {
        if showProgress {
            FileHandle.standardError.write(Data("\r[\(index + 1)/\(files.count)] \(file)\u{1B}[K".utf8))
        }
        let data: [UInt8]
        switch readInput(file) {
        case .success(let bytes): data = bytes
        case .failure(let problem):
            if showProgress { FileHandle.standardError.write(Data("\n".utf8)) }
            printError("receiptd verify: \(file): \(problem.description)")
            unreadable += 1
            continue
        }
        // Files hold DER as Xcode and StoreKit write it, or base64 as it is copied from logs.
        let bytes = ReceiptText.decodeDEROrBase64(data)
        let result = validator.validate(bytes, deviceIdentifier: device, expectedBundleID: expectedBundleID)
        tally[result.error?.code.rawValue ?? "valid", default: 0] += 1
        if json {
            var value = ResultJSON.value(of: result)
            if files.count > 1 { value = value.prepending(key: "file", .string(file)) }
            FileHandle.standardOutput.write(Data(value.serialized(pretty: files.count == 1) + [0x0A]))
        } else {
            if showProgress { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            print(VerdictReport.text(for: result, file: files.count > 1 ? file : nil))
        }
    }
    if showProgress { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    if files.count > 1 && !json {
        print(VerdictReport.summary(tally, unreadable: unreadable, total: files.count))
    }
    if unreadable > 0 { return ExitStatus.usage }
    return tally.keys.allSatisfy { $0 == "valid" } ? ExitStatus.success : ExitStatus.failure
}

/// A file's bytes, or standard input's for `-`; a failure says what was there instead and what to do.
func readInput(_ file: String) -> Result<[UInt8], UsageError> {
    if file == "-" {
        let data = FileHandle.standardInput.readDataToEndOfFile()
        guard !data.isEmpty else {
            return .failure(UsageError("standard input is empty: pipe the receipt in (receiptd verify - < receipt.der)"))
        }
        return .success(Array(data))
    }
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) else {
        return .failure(UsageError("no such file"))
    }
    if isDirectory.boolValue {
        return .failure(UsageError("is a directory: name the files in it (receiptd verify \(file)/*)"))
    }
    guard FileManager.default.isReadableFile(atPath: file), let data = FileManager.default.contents(atPath: file) else {
        return .failure(UsageError("cannot be read (permission denied?)"))
    }
    return .success(Array(data))
}

extension JSONValue {
    /// The same object with one member put first (`file` in many-file JSON output).
    func prepending(key: String, _ value: JSONValue) -> JSONValue {
        guard case .object(let members) = self else { return self }
        return .object([(key, value)] + members)
    }
}
