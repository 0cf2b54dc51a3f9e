#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif
import JSONText
import ReceiptEngine
internal import CryptoFloor

extension ConfigurationReader {
    /// The longest `timeout`: a try must end within its lease (`min(60 s, timeout + 5 s)`), or another replica could
    /// take the delivery over while it is still being sent.
    static let longestWebhookTimeout = 55.0
    /// A secret file larger than this is not a secret someone made for receiptd (`webhooks secret new` writes 43
    /// characters).
    static let largestWebhookSecretBytes = 4096

    /// `webhooks`: an array of `{name, url, secret_file, events, apps, environments, timeout, allow_http, ca_file}`.
    /// Each secret file is read here, so that `serve` and `check-config` stop at start when one is missing or empty.
    func webhooks(_ value: JSONValue, baseDirectory: String) throws(ConfigurationError) -> [Webhook] {
        guard case .array(let elements) = value else { throw invalid("webhooks", "expected an array of objects") }
        var webhooks: [Webhook] = []
        for (index, element) in elements.enumerated() {
            let webhook = try webhook(element, "webhooks[\(index)]", baseDirectory: baseDirectory)
            guard !webhooks.contains(where: { $0.name == webhook.name }) else {
                throw invalid("webhooks[\(index)].name", "\(webhook.name) is configured twice; names must be unique")
            }
            webhooks.append(webhook)
        }
        return webhooks
    }

    private func webhook(_ value: JSONValue, _ prefix: String, baseDirectory: String) throws(ConfigurationError) -> Webhook {
        guard case .object(let members) = value else { throw invalid(prefix, "expected an object") }
        func resolved(_ file: String) -> String { file.hasPrefix("/") ? file : baseDirectory.appendingPathComponent(file) }
        var name: String?
        var url: String?
        var secretFile: String?
        var webhook = Webhook(name: "", url: "", secretFile: "", secret: WebhookSecret([]))
        for (key, member) in members {
            let memberKey = "\(prefix).\(key)"
            switch key {
            case "name":
                guard case .string(let text) = member, Self.isEntitlementName(text) else {
                    throw invalid(memberKey, "expected a name of 1 to 64 of [0-9A-Za-z._-]")
                }
                name = text
            case "url": url = try nonEmptyString(member, memberKey)
            case "secret_file": secretFile = resolved(try nonEmptyString(member, memberKey))
            case "events": webhook.events = try eventTypes(member, memberKey)
            case "apps": webhook.apps = try nonEmptySet(strings(member, memberKey), memberKey, "bundle ids")
            case "environments":
                let names = try strings(member, memberKey)
                for (index, name) in names.enumerated() where ReceiptEnvironment(rawValue: name) == nil {
                    throw invalid("\(memberKey)[\(index)]", "expected \"Production\", \"Sandbox\" or \"Xcode\"")
                }
                webhook.environments = try nonEmptySet(names, memberKey, "environments")
            case "timeout":
                let timeout = try seconds(member, memberKey)
                guard timeout <= Self.longestWebhookTimeout else {
                    throw invalid(
                        memberKey,
                        "expected seconds above 0, at most \(Int(Self.longestWebhookTimeout)) (a try must end within "
                            + "its 60 s lease)")
                }
                webhook.timeout = timeout
            case "allow_http":
                guard case .bool(let flag) = member else { throw invalid(memberKey, "expected true or false") }
                webhook.allowHTTP = flag
            case "ca_file":
                if case .null = member {
                    webhook.caFile = nil
                } else {
                    let file = resolved(try nonEmptyString(member, memberKey))
                    guard FileManager.default.isReadableFile(atPath: file) else {
                        throw invalid(memberKey, "cannot read \(file)")
                    }
                    webhook.caFile = file
                }
            default:
                throw ConfigurationError(.unknownKey, "config \(path): \(memberKey): unknown key")
            }
        }
        guard let name else { throw invalid("\(prefix).name", "required") }
        guard let url else { throw invalid("\(prefix).url", "required") }
        guard let secretFile else {
            throw invalid("\(prefix).secret_file", "required (a file holding the signing secret; receiptd webhooks secret new)")
        }
        try checkWebhookURL(url, "\(prefix).url", allowHTTP: webhook.allowHTTP)
        webhook.name = name
        webhook.url = url
        webhook.secretFile = secretFile
        webhook.secret = try webhookSecret(secretFile, "\(prefix).secret_file")
        return webhook
    }

    /// `["*"]` (nil: every type) or names of ``EventType``.
    private func eventTypes(_ value: JSONValue, _ key: String) throws(ConfigurationError) -> Set<String>? {
        let names = try strings(value, key)
        if names == ["*"] { return nil }
        for (index, name) in names.enumerated() where EventType(rawValue: name) == nil {
            throw invalid(
                "\(key)[\(index)]",
                "\(ConfigurationReader.quoted(name)) is not an event type; expected [\"*\"] or names such as "
                    + "\"RENEWAL\" (docs/events.md lists them)")
        }
        return try nonEmptySet(names, key, "event types, or [\"*\"] for all")
    }

    private func nonEmptySet(_ names: [String], _ key: String, _ what: String) throws(ConfigurationError) -> Set<String> {
        guard !names.isEmpty else { throw invalid(key, "expected at least one of the \(what); leave the key out for all") }
        return Set(names)
    }

    /// https, or http to a loopback host when `allow_http` says so: events carry purchases and accounts, and a
    /// signature proves where they came from, not that nobody else read them.
    private func checkWebhookURL(_ url: String, _ key: String, allowHTTP: Bool) throws(ConfigurationError) {
        guard url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw invalid(key, "expected a URL without spaces or control characters")
        }
        let lowercased = url.lowercased()
        let rest: Substring
        let isHTTPS: Bool
        if lowercased.hasPrefix("https://") {
            (rest, isHTTPS) = (url.dropFirst(8), true)
        } else if lowercased.hasPrefix("http://") {
            (rest, isHTTPS) = (url.dropFirst(7), false)
        } else {
            throw invalid(key, "expected an https:// URL")
        }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.contains("@") else {
            throw invalid(key, "expected no user or password in the URL; the signature authenticates receiptd")
        }
        let host: Substring
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw invalid(key, "expected a host in the URL") }
            host = authority[authority.index(after: authority.startIndex)..<close]
        } else {
            host = authority.prefix { $0 != ":" }
        }
        guard !host.isEmpty else { throw invalid(key, "expected a host in the URL") }
        guard !isHTTPS else { return }
        guard Self.isLoopback(host.lowercased()) else {
            throw invalid(key, "expected an https:// URL (http:// is allowed only to a loopback host, with allow_http)")
        }
        guard allowHTTP else { throw invalid(key, "an http:// URL needs \"allow_http\": true (tests only)") }
    }

    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets.first == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    /// The secret file's text trimmed of surrounding whitespace, as UTF-8 bytes. Messages name the file, never what
    /// it holds.
    private func webhookSecret(_ file: String, _ key: String) throws(ConfigurationError) -> WebhookSecret {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw invalid(key, "cannot read \(file); make one with receiptd webhooks secret new")
        }
        guard data.count <= Self.largestWebhookSecretBytes else {
            throw invalid(key, "\(file) is larger than \(Self.largestWebhookSecretBytes) bytes; is it the right file?")
        }
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        var bytes = [UInt8](data)[...]
        while let first = bytes.first, isSpace(first) { bytes = bytes.dropFirst() }
        while let last = bytes.last, isSpace(last) { bytes = bytes.dropLast() }
        guard !bytes.isEmpty else {
            throw invalid(key, "\(file) is empty; put a secret in it (receiptd webhooks secret new)")
        }
        return WebhookSecret(Array(bytes))
    }
}
