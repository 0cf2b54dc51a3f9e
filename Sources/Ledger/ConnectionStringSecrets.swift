// libpq's messages may quote parts of a malformed connection string; receiptd prints and logs them only through this.

/// `message` with a libpq connection string, and its password (`password=…` or a URI's `user:password@`), masked.
public func redactingSecrets(of connectionString: String, in message: String) -> String {
    var secrets: [String] = []
    if let scheme = connectionString.firstRange(of: "://") {
        let afterScheme = connectionString[scheme.upperBound...]
        if let at = afterScheme.firstIndex(of: "@") {
            let userInfo = afterScheme[..<at]
            if let colon = userInfo.firstIndex(of: ":") {
                secrets.append(String(userInfo[userInfo.index(after: colon)...]))
            }
        }
        for parameter in connectionString.split(whereSeparator: { $0 == "?" || $0 == "&" }) {
            if parameter.hasPrefix("password=") { secrets.append(String(parameter.dropFirst("password=".count))) }
        }
    } else {
        let words = connectionString.split(whereSeparator: \.isWhitespace)
        for word in words where word.hasPrefix("password=") {
            var secret = word.dropFirst("password=".count)
            if secret.hasPrefix("'") { secret = secret.dropFirst() }
            if secret.hasSuffix("'") { secret = secret.dropLast() }
            secrets.append(String(secret))
        }
    }
    var redacted = replacingEvery(connectionString, with: "(connection string)", in: message)
    for secret in secrets where !secret.isEmpty {
        redacted = replacingEvery(secret, with: "***", in: redacted)
    }
    return redacted
}

/// `text` with every occurrence of `target` replaced, compared as UTF-8 bytes: a password that begins with a combining
/// mark joins the `=` before it into one `Character`, where a search by `Character` would not find it.
private func replacingEvery(_ target: String, with replacement: String, in text: String) -> String {
    guard !target.isEmpty else { return text }
    let replaced = Array(text.utf8).replacing(Array(target.utf8), with: Array(replacement.utf8))
    return String(decoding: replaced, as: UTF8.self)
}
