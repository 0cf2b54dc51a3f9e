import ArgumentParser
import ReceiptService

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `receiptd`: every command, declared once; help, usage errors and shell completion come from these declarations.
struct Receiptd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receiptd",
        abstract: "Validates App Store receipts and StoreKit 2 signed data, offline or as a server.",
        discussion: """
            `receiptd help COMMAND` or `receiptd COMMAND --help` explains each command.
            Exit status: 0 success; 1 a negative answer or a failure (an invalid receipt, a sync that refused \
            notifications, a failed check); 2 a usage error (an unknown command or flag, a missing argument); \
            3 a sync skipped because another receiptd holds its lease.
            Shell completion: receiptd --generate-completion-script bash|zsh|fish (see docs/cli.md).
            """,
        version: "receiptd \(ReceiptdVersion.current)",
        subcommands: [
            Serve.self, CheckConfig.self, Verify.self, TestingCommands.self, Store.self, Accounts.self, Token.self,
            Lookup.self, Notifications.self, Webhooks.self, Subscriptions.self, Consumption.self, Offers.self,
            Version.self,
        ])
}

/// A command that does its work and says how it went as an exit status, without leaving the process: tests run
/// commands in-process, and `runReceiptd` is the one place that maps what the parser throws to a status.
protocol ReceiptdCommand: ParsableCommand {
    func execute() -> Int32
}

extension ReceiptdCommand {
    func run() throws {
        let status = execute()
        if status != ExitStatus.success { throw ExitCode(status) }
    }
}

/// Parses a command line and runs the command; returns the process's exit status.
func runReceiptd(_ arguments: [String]) -> Int32 {
    // ArgumentParser's own `help` answers an unknown topic with the top-level help and 0; a topic that names no
    // command is a mistake like any unknown command.
    if arguments.first == "help", let unknown = unknownHelpTopic(Array(arguments.dropFirst())) {
        let usage = Receiptd.usageString(for: Receiptd.self)
        printError("Error: unknown command '\(unknown)'\nUsage: \(usage)\n  See 'receiptd --help'.")
        return ExitStatus.usage
    }
    let command: any ParsableCommand
    do {
        command = try Receiptd.parseAsRoot(arguments)
    } catch {
        return report(error)
    }
    if let runnable = command as? any ReceiptdCommand { return runnable.execute() }
    let group = type(of: command)
    // A group named without one of its commands (`receiptd`, `receiptd store`): a missing argument, where
    // ArgumentParser would print the group's help and exit 0.
    if !group.configuration.subcommands.isEmpty {
        printError("Error: expected a command\n\n" + Receiptd.helpMessage(for: group))
        return ExitStatus.usage
    }
    // ArgumentParser's own commands (`help`): they end by throwing the help they print.
    do {
        var command = command
        try command.run()
        return ExitStatus.success
    } catch {
        return report(error)
    }
}

/// Help, version and completion scripts on standard output (exit 0); usage errors on standard error, exit 2.
private func report(_ error: any Error) -> Int32 {
    let end = ParseEnd(error, of: Receiptd.self)
    if end.status == ExitStatus.success {
        print(end.message)
    } else if !end.message.isEmpty {
        printError(end.message)
    }
    return end.status
}

/// Why parsing ended without a command to run: help asked for (status 0, the help as message) or a usage error
/// (status 2: ArgumentParser's 64, EX_USAGE, is this project's 2).
struct ParseEnd: Error {
    var status: Int32
    var message: String

    init<Command: ParsableCommand>(_ error: any Error, of command: Command.Type) {
        message = command.fullMessage(for: error)
        let code = command.exitCode(for: error)
        status = code == .validationFailure ? ExitStatus.usage : code.rawValue
    }
}

/// One command parsed from the arguments after its name, for callers that run it with their own output (tests,
/// `runServe`).
func parseCommand<Command: ParsableCommand>(
    _ command: Command.Type, _ arguments: [String]
) -> Result<Command, ParseEnd> {
    do {
        return .success(try command.parse(arguments))
    } catch {
        return .failure(ParseEnd(error, of: command))
    }
}

/// The first word of a `help` topic that is not a command there; nil when the whole path names one.
private func unknownHelpTopic(_ topic: [String]) -> String? {
    var commands = Receiptd.configuration.subcommands
    for word in topic where !word.hasPrefix("-") {
        guard let command = commands.first(where: { $0._commandName == word }) else { return word }
        commands = command.configuration.subcommands
    }
    return nil
}

/// The help of one command, exactly as `receiptd help COMMAND` and `COMMAND --help` print it.
func helpText(of command: any ParsableCommand.Type) -> String {
    Receiptd.helpMessage(for: command, columns: 120)
}

/// `receiptd --generate-completion-script SHELL`'s script; nil for a shell ArgumentParser does not know.
func completionScript(shell: String) -> String? {
    CompletionShell(rawValue: shell).map { Receiptd.completionScript(for: $0) }
}

/// What `--device-id` takes, for usage errors.
let deviceIdentifierForm = "a UUID (iOS) or a MAC address aa:bb:cc:dd:ee:ff (macOS)"

enum ExitStatus {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 2
    /// `store sync` found another receiptd syncing the same app and environment and did not read that span.
    static let skipped: Int32 = 3
}

func printError(_ message: String) {
    StandardStream.error.write(message + "\n")
}

/// A mistake on the command line found after parsing (a file that cannot be read, an argument the configuration
/// refuses): one line naming the argument, exit 2.
struct UsageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// `--config PATH`, shared by every command that reads the configuration.
struct ConfigOption: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The configuration file; default RECEIPTD_CONFIG when not empty, else Config/receiptd.json when present, "
                + "else built-in defaults. Repeated, the last wins.",
            valueName: "path"))
    var config: String?
}

/// A flag value that converts or is refused with what was expected; for `@Option(transform:)`.
func parsed<Value>(_ text: String, expecting expectation: String, _ convert: (String) -> Value?) throws -> Value {
    guard let value = convert(text) else {
        throw ArgumentParser.ValidationError("expected \(expectation), not \(text)")
    }
    return value
}

/// `receiptd version`, as `--version`.
struct Version: ReceiptdCommand {
    static let configuration = CommandConfiguration(abstract: "Prints receiptd's version.")

    func execute() -> Int32 {
        print("receiptd \(ReceiptdVersion.current)")
        return ExitStatus.success
    }
}
