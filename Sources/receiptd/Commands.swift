import Foundation
import ReceiptService

let usage = """
    receiptd: validates App Store receipts offline.

    Usage:
      receiptd serve [--config PATH] [--host H] [--port N] [--log-format json|text]
      receiptd verify FILE... [--config PATH] [--device-id ID] [--bundle-id ID] [--json]
      receiptd testing init-ca DIR
      receiptd testing receipt --ca DIR --bundle-id ID --app-version V [--original-version V] [--device-id ID]
                               [--environment Production|Sandbox] [--created DATE] [--purchase SPEC]...
                               [--format der|base64] [--out FILE]
      receiptd help

    verify exits 0 when every receipt is valid, 1 when any is not, 2 on a usage error.
    """

/// Dispatches a command line; returns the process's exit status.
func runReceiptd(_ arguments: [String]) -> Int32 {
    guard let command = arguments.first else {
        printError(usage)
        return ExitStatus.usage
    }
    let rest = Array(arguments.dropFirst())
    switch command {
    case "serve": return runServe(arguments: rest)
    case "verify": return runVerify(rest)
    case "testing": return runTesting(rest)
    case "help", "--help", "-h":
        print(usage)
        return ExitStatus.success
    default:
        printError("receiptd: unknown command '\(command)'\n\n\(usage)")
        return ExitStatus.usage
    }
}

enum ExitStatus {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 2
}

struct UsageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func printError(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

/// Reads `--flag value` options and positional arguments, in any order.
struct ArgumentReader {
    private(set) var positional: [String] = []
    private var options: [String: [String]] = [:]
    private var flags: Set<String> = []

    /// - Parameters:
    ///   - valued: options that take a value (`--config PATH`, also `--config=PATH`).
    ///   - switches: options without a value (`--json`).
    init(_ arguments: [String], valued: Set<String>, switches: Set<String>) throws {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--"), argument.count > 2 else {
                positional.append(argument)
                continue
            }
            var name = argument
            var inlineValue: String?
            if let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            if switches.contains(name), inlineValue == nil {
                flags.insert(name)
            } else if valued.contains(name) {
                if let inlineValue {
                    options[name, default: []].append(inlineValue)
                } else {
                    guard index < arguments.count else { throw UsageError("\(name) needs a value") }
                    options[name, default: []].append(arguments[index])
                    index += 1
                }
            } else {
                throw UsageError("unknown option \(name)")
            }
        }
    }

    func value(_ name: String) throws -> String? {
        guard let values = options[name] else { return nil }
        guard values.count == 1 else { throw UsageError("\(name) is given more than once") }
        return values[0]
    }

    func values(_ name: String) -> [String] { options[name] ?? [] }
    func isSet(_ name: String) -> Bool { flags.contains(name) }
}
