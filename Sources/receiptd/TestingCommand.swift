import ArgumentParser
import CryptoFloor
import ReceiptEngine
import ReceiptForge
import ReceiptService

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `receiptd testing`: a test PKI, receipts and StoreKit 2 signed data made to order, for integration tests of
/// backends that call receiptd.
struct TestingCommands: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "testing",
        abstract: "Makes a test PKI, receipts and StoreKit 2 signed data to order, for tests.",
        discussion: """
            Receipts validate only where the PKI's root.pem is listed in trusted_roots, signed data only where its \
            jws-root.pem is.
            """,
        subcommands: [
            InitCA.self, ForgeReceipt.self, ForgeTransaction.self, ForgeRenewalInfo.self, ForgeAppTransaction.self,
            ForgeNotification.self,
        ])
}

struct InitCA: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "init-ca",
        abstract: "Writes two test PKIs to a directory, for tests only.",
        discussion: """
            A root, intermediate and receipt-signing certificate (root.pem …) and an EC chain shaped like Apple's \
            StoreKit 2 one (jws-root.pem …), each with its keys. A directory made before StoreKit 2 support gets \
            the EC chain added.
            Exit status: 0 written; 1 a file cannot be written; 2 a usage error or a directory that already holds a \
            test PKI.
            """)

    @Argument(help: ArgumentHelp("Where to write the PKI.", valueName: "dir"))
    var directory: String

    func execute() -> Int32 {
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
    guard var contents = FileManager.default.contents(atPath: readme) else {
        throw UsageError("\(readme): cannot read")
    }
    contents.append(contentsOf: note.utf8)
    try contents.write(to: URL(fileURLWithPath: readme))
}

struct ForgeReceipt: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "receipt",
        abstract: "Signs a receipt with the test PKI made by init-ca.",
        discussion: """
            SPEC, once per in-app transaction, is comma-separated field=value: product, transaction (both required), \
            original, quantity, purchased, original_purchased, expires, cancelled, web_order, trial, intro, offer.
            Exit status: 0 written; 1 signing or writing failed; 2 a usage error.
            """)

    @Option(help: ArgumentHelp("The test PKI made by `receiptd testing init-ca`.", valueName: "dir"))
    var ca: String

    @Option(help: ArgumentHelp("The app's bundle id.", valueName: "id"))
    var bundleId: String

    @Option(help: ArgumentHelp("The app's version (CFBundleVersion).", valueName: "v"))
    var appVersion: String

    @Option(help: ArgumentHelp("The version first purchased.", valueName: "v"))
    var originalVersion: String?

    @Option(
        help: ArgumentHelp(
            "A UUID (iOS) or a MAC address (macOS); without it a random one is printed on stderr.", valueName: "id"),
        transform: { text in try parsed(text, expecting: deviceIdentifierForm, DeviceIdentifier.init) })
    var deviceId: DeviceIdentifier?

    @Option(
        help: ArgumentHelp("Production or Sandbox.", valueName: "env"),
        transform: { text in
            try parsed(text, expecting: "Production or Sandbox") {
                ["Production": "Production", "Sandbox": "ProductionSandbox"][$0]
            }
        })
    var environment = "Production"

    @Option(
        help: ArgumentHelp("RFC 3339 (2026-01-01T00:00:00Z); default now.", valueName: "date"),
        transform: { text in
            try parsed(text, expecting: "an RFC 3339 date (2026-01-01T00:00:00Z)") { ReceiptDate(rfc3339: $0) }
        })
    var created: ReceiptDate?

    @Option(help: ArgumentHelp("An in-app transaction (repeatable): see below.", valueName: "spec"))
    var purchase: [String] = []

    @Option(
        help: ArgumentHelp("der (default) or base64.", valueName: "format"),
        transform: { text in try parsed(text, expecting: "der or base64") { ["der", "base64"].contains($0) ? $0 : nil }
        })
    var format = "der"

    @Option(help: ArgumentHelp("Where to write it; default standard output.", valueName: "file"))
    var out: String?

    func execute() -> Int32 {
        let blueprint: ReceiptBlueprint
        let authority: TestCertificateAuthority
        let output = out
        let deviceWasGiven = deviceId != nil
        do {
            let created = self.created ?? ReceiptDate(Date())
            var draft = ReceiptBlueprint(
                bundleID: bundleId, applicationVersion: appVersion, deviceIdentifier: deviceId, creationDate: created)
            if let originalVersion { draft.originalApplicationVersion = originalVersion }
            draft.receiptType = environment
            do {
                draft.purchases = try purchase.map { try PurchaseBlueprint(spec: $0, defaultDate: created) }
            } catch let error as BlueprintError {
                throw UsageError("--purchase: \(error.message)")
            }
            do {
                authority = try TestCertificateAuthority(directory: ca)
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
}
