import ReceiptService
import CryptoFloor

#if canImport(Glibc)
import Glibc
#endif

let tokenUsage = """
    usage: receiptd token new --name NAME --scopes SCOPE[,SCOPE...]
      Prints a new API token (32 random bytes from the kernel, base64url) once, and the api_tokens entry for it,
      which holds only the token's SHA-256. Keep the token in the caller's secret store; add the entry to the
      config's "api_tokens" (or RECEIPTD_API_TOKENS). Nothing is written anywhere.
      --name     names the caller in the access log: 1 to 64 characters of 0-9 A-Z a-z . _ -
      --scopes   comma-separated: validate, ledger:read, claim, metrics, support
      exit status: 0 printed; 2 usage error
    """

/// `receiptd token new`.
func runToken(_ arguments: [String]) -> Int32 {
    runToken(arguments, output: { print($0) }, errors: printError, randomBytes: systemRandomBytes)
}

func runToken(
    _ arguments: [String], output: (String) -> Void, errors: (String) -> Void, randomBytes: (Int) -> [UInt8]
) -> Int32 {
    guard arguments.first == "new" else {
        if let first = arguments.first, ["--help", "-h", "help"].contains(first) {
            output(tokenUsage)
            return ExitStatus.success
        }
        errors("receiptd token: expected new\n\n\(tokenUsage)")
        return ExitStatus.usage
    }
    let name: String
    var scopes = Set<APIScope>()
    do throws(UsageError) {
        let reader = try ArgumentReader(Array(arguments.dropFirst()), options: ["--name", "--scopes"])
        if reader.wantsHelp {
            output(tokenUsage)
            return ExitStatus.success
        }
        try reader.expectPositional(atMost: 0)
        name = try reader.required("--name")
        guard APIToken.isValidName(name) else {
            throw UsageError("--name: expected 1 to 64 characters of 0-9 A-Z a-z . _ -, not \(name)")
        }
        for text in try reader.required("--scopes").split(separator: ",", omittingEmptySubsequences: false) {
            guard let scope = APIScope(rawValue: String(text)) else {
                let known = APIScope.allCases.map(\.rawValue).joined(separator: ", ")
                throw UsageError("--scopes: expected a comma-separated list of \(known), not \(text)")
            }
            scopes.insert(scope)
        }
    } catch {
        errors("receiptd token new: \(error)\n\n\(tokenUsage)")
        return ExitStatus.usage
    }
    // RFC 4648 §5 without padding: safe in a header, a URL, a shell and a YAML string as it is.
    let token = Base64.encode(randomBytes(32), alphabet: .url)
    let entry = APIToken(name: name, token: token, scopes: scopes)
    output("token: \(token)")
    output("api_tokens entry: \(entry.configurationJSON)")
    return ExitStatus.success
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
