import Foundation
import TestSupport
import Testing

@testable import receiptd

/// The command line as declared: every command answers `--help` and `help COMMAND` alike, mistakes exit 2, and
/// `check-config` runs serve's start-up checks.
struct CommandLineTests {
    static let commands: [[String]] = [
        ["serve"], ["check-config"], ["verify"], ["testing"], ["testing", "init-ca"], ["testing", "receipt"],
        ["testing", "transaction"], ["testing", "renewal-info"], ["testing", "app-transaction"],
        ["testing", "notification"], ["store"], ["store", "status"], ["store", "backup"], ["store", "migrate"],
        ["store", "restore"], ["store", "sync"], ["token"], ["token", "new"], ["lookup"], ["lookup", "order"],
        ["lookup", "transaction"], ["notifications"], ["notifications", "test"], ["version"],
        ["offers"], ["offers", "sign"], ["offers", "sign", "promotional"], ["offers", "sign", "introductory-eligibility"],
    ]

    @Test(arguments: commands)
    func everyCommand_answersHelp_andHelpCommandAgrees(command: [String]) {
        #expect(runReceiptd(command + ["--help"]) == ExitStatus.success)
        #expect(runReceiptd(["help"] + command) == ExitStatus.success)
    }

    @Test func everyCommand_isListedInTheTopLevelHelp() {
        let help = helpText(of: Receiptd.self)
        for command in Self.commands where command.count == 1 {
            #expect(help.contains("  \(command[0]) "), "\(command[0]) missing from receiptd --help")
        }
        let store = helpText(of: Store.self)
        #expect(store.contains("  restore "))
    }

    @Test(arguments: [
        ["frobnicate"], ["help", "nonsense"], ["help", "store", "nonsense"], [], ["store"], ["testing"],
        ["verify"], ["verify", "a.der", "--frobnicate"], ["verify", "a.der", "--kind", "receipts"],
        ["serve", "--port", "http"], ["store", "backup"], ["token", "new", "--name", "a"], ["lookup", "refund", "1"],
        ["--generate-completion-script", "tcsh"],
    ])
    func mistakes_areUsageErrors(arguments: [String]) {
        #expect(runReceiptd(arguments) == ExitStatus.usage)
    }

    @Test(arguments: ["bash", "zsh", "fish"])
    func completionScript_namesEveryCommand(shell: String) {
        let script = completionScript(shell: shell) ?? ""
        for command in ["serve", "check-config", "verify", "testing", "store", "restore", "sync", "lookup"] {
            #expect(script.contains(command), "\(shell) completion lacks \(command)")
        }
        #expect(runReceiptd(["--generate-completion-script", shell]) == ExitStatus.success)
    }

    @Test func environmentVariables_appearInTheHelpOfTheCommandsThatReadThem() {
        let serve = helpText(of: Serve.self)
        for variable in [
            "RECEIPTD_CONFIG", "RECEIPTD_HOST", "RECEIPTD_PORT", "RECEIPTD_API_TOKENS", "RECEIPTD_STORE_POSTGRES",
        ] {
            #expect(serve.contains(variable), "serve --help lacks \(variable)")
        }
        #expect(helpText(of: StoreSync.self).contains("RECEIPTD_STORE_POSTGRES"))
        #expect(helpText(of: Verify.self).contains("RECEIPTD_CONFIG"))
    }

    @Test func verifyKind_acceptsReceipt_asTheHTTPQueryDoes() throws {
        let folder = try ScratchFolder()
        let file = try folder.write("receipt.b64", "not a receipt")
        // Parsed and run: an unreadable receipt is invalid (1), not a usage error (2).
        #expect(runReceiptd(["verify", file, "--kind", "receipt"]) == ExitStatus.failure)
    }

    // MARK: check-config

    @Test func checkConfig_ofAGoodConfig_exitsZero() throws {
        let folder = try ScratchFolder()
        let config = try folder.write(
            "receiptd.json", #"{"apps": [{"bundle_id": "com.example.app"}], "store": {"sqlite": "ledger.sqlite"}}"#)
        #expect(runReceiptd(["check-config", "--config", config]) == ExitStatus.success)
        // Checked read-only: nothing is created.
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/ledger.sqlite"))
    }

    @Test(arguments: [
        #"{"aps": []}"#, #"{"trusted_roots": ["missing.pem"]}"#,
        #"{"apps": [{"bundle_id": "a", "server_api": {"key_id": "K", "issuer_id": "I", "private_key_file": "none.p8"}}]}"#,
        #"{"store": {"sqlite": "damaged.sqlite"}}"#,
    ])
    func checkConfig_namesEachProblem_andExitsOne(config: String) throws {
        let folder = try ScratchFolder()
        _ = try folder.write("damaged.sqlite", String(repeating: "not a database ", count: 512))
        let path = try folder.write("receiptd.json", config)
        #expect(runReceiptd(["check-config", "--config", path]) == ExitStatus.failure)
    }

    @Test func serve_refusesAnUnreadableServerAPIKey_asCheckConfigDoes() throws {
        let folder = try ScratchFolder()
        let path = try folder.write(
            "receiptd.json",
            #"{"apps": [{"bundle_id": "a", "server_api": {"key_id": "K", "issuer_id": "I", "private_key_file": "none.p8"}}]}"#
        )
        let errors = CapturedLines()
        let status = runServe(
            arguments: ["--config", path, "--port", "0"], environment: [:], output: CapturedLines().sink,
            errors: errors.sink)
        #expect(status == ExitStatus.failure)
        #expect(errors.all.contains { $0.contains("private_key_file") })
    }
}
