import ArgumentParser
import CryptoFloor
import ReceiptService

#if canImport(Glibc)
import Glibc
#endif

/// `receiptd token`.
struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Makes API tokens for the config's api_tokens.", subcommands: [NewToken.self])
}

/// `receiptd token new`.
struct NewToken: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "new",
        abstract: "Prints a new API token once, and the api_tokens entry for it.",
        discussion: """
            The token is 32 random bytes from the kernel, base64url; the entry holds only its SHA-256. Keep the token \
            in the caller's secret store; add the entry to the config's "api_tokens" (or RECEIPTD_API_TOKENS, which \
            serve reads instead of the file's). Nothing is written anywhere.
            Exit status: 0 printed; 2 a usage error.
            """)

    @Option(
        help: ArgumentHelp(
            "Names the caller in the access log: 1 to 64 characters of 0-9 A-Z a-z . _ -", valueName: "name"),
        transform: { text in
            try parsed(text, expecting: "1 to 64 characters of 0-9 A-Z a-z . _ -") {
                APIToken.isValidName($0) ? $0 : nil
            }
        })
    var name: String

    @Option(
        help: ArgumentHelp(
            "Comma-separated: \(APIScope.allCases.map(\.rawValue).joined(separator: ", ")).", valueName: "scope,..."),
        transform: { text in
            let known = APIScope.allCases.map(\.rawValue).joined(separator: ", ")
            var scopes = Set<APIScope>()
            for word in text.split(separator: ",", omittingEmptySubsequences: false) {
                scopes.insert(
                    try parsed(String(word), expecting: "a comma-separated list of \(known)", APIScope.init(rawValue:)))
            }
            return scopes
        })
    var scopes: Set<APIScope>

    func execute() -> Int32 {
        execute(output: { print($0) }, randomBytes: systemRandomBytes)
    }

    func execute(output: (String) -> Void, randomBytes: (Int) -> [UInt8]) -> Int32 {
        // RFC 4648 §5 without padding: safe in a header, a URL, a shell and a YAML string as it is.
        let token = Base64.encode(randomBytes(32), alphabet: .url)
        let entry = APIToken(name: name, token: token, scopes: scopes)
        output("token: \(token)")
        output("api_tokens entry: \(entry.configurationJSON)")
        return ExitStatus.success
    }
}

/// The kernel's CSPRNG (`getentropy` is `getrandom` for up to 256 bytes); blocks only until it is first seeded at
/// boot, and never returns fewer bytes than asked.
func systemRandomBytes(_ count: Int) -> [UInt8] {
    precondition(count <= 256, "getentropy gives at most 256 bytes a call")
    var bytes = [UInt8](repeating: 0, count: count)
    let result = bytes.withUnsafeMutableBytes { getentropy($0.baseAddress!, count) }
    guard result == 0 else { fatalError("getentropy failed: errno \(errno)") }
    return bytes
}
