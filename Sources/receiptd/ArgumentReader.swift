/// A mistake on the command line: one line naming the flag or argument, printed before the command's help.
struct UsageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The arguments of one command, read against the flags it declares: `--name value` or `--name=value` options
/// (repeatable), boolean flags, and positional arguments in any order. `--help` and `-h` are understood by every
/// command; after `--` everything is positional.
///
/// An option given more than once keeps its last value for `value(_:)` (so a wrapper script can put a default
/// `--config` before the user's own) and all of them for `values(_:)`.
struct ArgumentReader {
    private(set) var positional: [String] = []
    private(set) var wantsHelp = false
    private var options: [String: [String]] = [:]
    private var flags: Set<String> = []

    /// - Parameters:
    ///   - options: names that take a value, such as `--config`.
    ///   - flags: names that take none, such as `--json`.
    init(_ arguments: [String], options valued: Set<String>, flags switches: Set<String> = []) throws(UsageError) {
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            if argument == "--" {
                positional += remaining
                break
            }
            if argument == "--help" || argument == "-h" {
                wantsHelp = true
                continue
            }
            // A lone `-` is a file name by convention (standard input), and so is anything not shaped like a flag.
            guard argument.hasPrefix("-"), argument.count > 1 else {
                positional.append(argument)
                continue
            }
            var name = argument
            var inlineValue: String?
            if let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            if switches.contains(name) {
                guard inlineValue == nil else { throw UsageError("\(name): takes no value") }
                flags.insert(name)
            } else if valued.contains(name) {
                guard let value = inlineValue ?? remaining.popFirst() else {
                    throw UsageError("\(name): missing value")
                }
                options[name, default: []].append(value)
            } else {
                throw UsageError("unknown argument \(argument)")
            }
        }
    }

    /// The last value given for an option.
    func value(_ name: String) -> String? { options[name]?.last }

    /// Every value given for a repeatable option, in order.
    func values(_ name: String) -> [String] { options[name] ?? [] }

    /// The last value of an option, converted; one that `convert` refuses is a usage error naming the flag and
    /// saying what was expected.
    func value<Value>(
        _ name: String, expecting expectation: String, _ convert: (String) -> Value?
    ) throws(UsageError) -> Value? {
        guard let text = value(name) else { return nil }
        guard let converted = convert(text) else { throw UsageError("\(name): expected \(expectation), not \(text)") }
        return converted
    }

    /// The last value of an option that must be given and not empty.
    func required(_ name: String) throws(UsageError) -> String {
        guard let text = value(name), !text.isEmpty else { throw UsageError("\(name) is required") }
        return text
    }

    func isSet(_ flag: String) -> Bool { flags.contains(flag) }

    /// Refuses positional arguments beyond the first `count`, naming the first one too many.
    func expectPositional(atMost count: Int) throws(UsageError) {
        guard positional.count <= count else { throw UsageError("unexpected argument \(positional[count])") }
    }
}
