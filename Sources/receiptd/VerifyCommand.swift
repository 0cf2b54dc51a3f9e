#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import ArgumentParser
import JSONText
import ReceiptEngine
import ReceiptService
import StoreKitJWS
import CryptoFloor

/// `receiptd verify FILE... [--config PATH] [--device-id ID] [--bundle-id ID] [--kind KIND] [--json]`
struct Verify: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validates receipts and StoreKit 2 signed data offline and prints each verdict.",
        discussion: """
            A file holds an App Store receipt (DER, or base64 as copied from logs) or StoreKit 2 signed data: a \
            compact JWS (a transaction, renewal info, app transaction or notification), or a notification's body \
            {"signedPayload": "..."}. `-` reads standard input. Several files end with a summary, and --json prints \
            one object per file (with "file" when there are several).
            Environment: RECEIPTD_CONFIG (the config file when --config is not given; empty means defaults).
            Exit status: 0 every file is valid; 1 any is not; 2 a usage error or an unreadable file.
            """)

    @Argument(help: ArgumentHelp("The receipts or signed data to validate (`-`: standard input).", valueName: "file"))
    var files: [String]

    @OptionGroup var config: ConfigOption

    @Option(
        help: ArgumentHelp(
            "The device the receipts and signed data must be bound to (a UUID on iOS, a MAC address on macOS).",
            valueName: "id"),
        transform: { text in try parsed(text, expecting: deviceIdentifierForm, DeviceIdentifier.init) })
    var deviceId: DeviceIdentifier?

    @Option(help: ArgumentHelp("Accept this app instead of the configured ones.", valueName: "id"))
    var bundleId: String?

    @Option(
        help: ArgumentHelp(
            "Require this kind: receipt, transaction, renewal_info, app_transaction or notification; anything else is "
                + "invalid (kind_mismatch), as with ?kind= over HTTP.",
            valueName: "kind"),
        transform: { text in
            try parsed(
                text, expecting: SignedDataKind.allCases.map(\.rawValue).joined(separator: ", "),
                SignedDataKind.init(rawValue:))
        })
    var kind: SignedDataKind?

    @Flag(help: "Print each verdict as JSON.")
    var json = false

    func validate() throws {
        guard !files.isEmpty else { throw ArgumentParser.ValidationError("verify needs at least one file") }
    }

    func execute() -> Int32 {
        let configuration: ServiceConfiguration
        do {
            configuration = try ServiceConfiguration.resolve(
                configPath: config.config, environment: ProcessInfo.processInfo.environment,
                fileExists: { FileManager.default.fileExists(atPath: $0) })
        } catch {
            printError("receiptd verify: \(error)")
            return ExitStatus.usage
        }
        return verify(configuration)
    }

    private func verify(_ configuration: ServiceConfiguration) -> Int32 {
        let device = deviceId
        let requiredKind = kind
        let expectedBundleID = bundleId
        let validator = configuration.makeValidator()
        let verifier = makeJWSVerifier(configuration, expectedBundleID: expectedBundleID)
        let showProgress = files.count > 1 && isatty(STDERR_FILENO) == 1
        var tally: [String: Int] = [:]
        var unreadable = 0
        var readSignedData = false
        for (index, file) in files.enumerated() {
            if showProgress {
                StandardStream.error.write("\r[\(index + 1)/\(files.count)] \(file)\u{1B}[K")
            }
            let data: [UInt8]
            switch readInput(file) {
            case .success(let bytes): data = bytes
            case .failure(let problem):
                if showProgress { StandardStream.error.write("\n") }
                printError("receiptd verify: \(file): \(problem.description)")
                unreadable += 1
                continue
            }
            let verdict: JSONValue
            let report: String
            if let jws = signedData(in: data) {
                readSignedData = true
                let result = verifier.verify(jws, deviceIdentifier: device, requiredKind: requiredKind)
                tally[result.error?.code.rawValue ?? "valid", default: 0] += 1
                verdict = JWSResultJSON.value(of: result)
                report = json ? "" : VerdictReport.text(for: result, file: files.count > 1 ? file : nil)
            } else {
                // Files hold DER as Xcode and StoreKit write it, or base64 as it is copied from logs.
                let bytes = ReceiptText.decodeDEROrBase64(data)
                let result = validator.validate(
                    bytes, deviceIdentifier: device, expectedBundleID: expectedBundleID, requiredKind: requiredKind)
                tally[result.error?.code.rawValue ?? "valid", default: 0] += 1
                verdict = ResultJSON.value(of: result)
                report = json ? "" : VerdictReport.text(for: result, file: files.count > 1 ? file : nil)
            }
            if json {
                let value = files.count > 1 ? verdict.prepending(key: "file", .string(file)) : verdict
                StandardStream.output.write(value.serialized(pretty: files.count == 1) + [0x0A])
            } else {
                if showProgress { StandardStream.error.write("\r\u{1B}[K") }
                print(report)
            }
        }
        if showProgress { StandardStream.error.write("\r\u{1B}[K") }
        if files.count > 1 && !json {
            print(
                VerdictReport.summary(
                    tally, unreadable: unreadable, total: files.count, noun: readSignedData ? "files" : "receipts"))
        }
        if unreadable > 0 { return ExitStatus.usage }
        return tally.keys.allSatisfy { $0 == "valid" } ? ExitStatus.success : ExitStatus.failure
    }
}

/// The configured verifier; with `--bundle-id`, one that accepts that app instead of the configured ones (keeping
/// the configured app's versions and Apple id when it is one of them), as `--bundle-id` does for receipts.
private func makeJWSVerifier(_ configuration: ServiceConfiguration, expectedBundleID: String?) -> JWSVerifier {
    var policy = configuration.makeValidationPolicy()
    if let expectedBundleID {
        policy.apps = [policy.apps.first { $0.bundleID == expectedBundleID } ?? AppPolicy(bundleID: expectedBundleID)]
    }
    return JWSVerifier(policy: policy)
}

/// The StoreKit 2 JWS a file holds: the file itself, or the `signedPayload` (or `jws`) member of a JSON body as
/// staff copy Apple's notification deliveries and app requests from logs. nil for anything else (a receipt).
func signedData(in bytes: [UInt8]) -> [UInt8]? {
    if JWSVerifier.looksLikeJWS(bytes) { return bytes }
    guard bytes.first(where: { !$0.isASCIIWhitespace }) == UInt8(ascii: "{"),
        let body = try? JSONValue(parsing: bytes)
    else { return nil }
    for key in ["signedPayload", "jws"] {
        if case .string(let text)? = body[key], JWSVerifier.looksLikeJWS(text) { return Array(text.utf8) }
    }
    return nil
}

/// A file's bytes, or standard input's for `-`; a failure says what was there instead and what to do.
func readInput(_ file: String) -> Result<[UInt8], UsageError> {
    if file == "-" {
        let data: [UInt8]
        do { data = try StandardStream.input.readToEnd() } catch { return .failure(UsageError("standard input: \(error)")) }
        guard !data.isEmpty else {
            return .failure(
                UsageError("standard input is empty: pipe the receipt in (receiptd verify - < receipt.der)"))
        }
        return .success(data)
    }
    var status = stat()
    guard stat(file, &status) == 0 else {
        return .failure(UsageError("no such file"))
    }
    if status.st_mode & S_IFMT == S_IFDIR {
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
