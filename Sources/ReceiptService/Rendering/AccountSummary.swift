public import JSONText
public import Ledger

/// An account as people read it (`receiptd accounts show`, the support page): read from the very JSON
/// `GET /v1/accounts/{account}` answers, so that no view can tell a different story.
public struct AccountSummary: Sendable {
    /// One entitlement: whether the account may use it at the instant evaluated, until when, and why.
    public struct EntitlementLine: Sendable, Hashable {
        public var name: String
        public var isActive: Bool
        /// The expiry (active) or when it ended (inactive), RFC 3339; nil when it never expires.
        public var until: String?
        /// The product and original transaction it comes from, and how it is held or why it ended.
        public var why: String
    }

    /// The answer of `GET /v1/accounts/{account}`.
    public let json: JSONValue

    /// The account's report at `at`, as `GET /v1/accounts/{account}?at=` answers it.
    public init(snapshot: AccountSnapshot, configuration: ServiceConfiguration, at: Int64) {
        json = AccountReport(snapshot: snapshot, configuration: configuration, at: at).json
    }

    public init(json: JSONValue) { self.json = json }

    public var entitlements: [EntitlementLine] {
        guard case .object(let members)? = json["entitlements"] else { return [] }
        return members.map { name, entitlement in
            let isActive = entitlement["active"] == .bool(true)
            var reasons = [
                text(entitlement["product_id"]), text(entitlement["original_transaction_id"]).map { "original \($0)" },
            ].compactMap { $0 }
            if isActive {
                reasons += [
                    text(entitlement["period_type"]), text(entitlement["ownership"]),
                    entitlement["will_renew"] == .bool(false) ? "will not renew" : nil,
                    entitlement["is_in_billing_retry_period"] == .bool(true) ? "in billing retry" : nil,
                    text(entitlement["grace_period_expires_date"]).map { "grace period until \($0)" },
                    text(entitlement["environment"]),
                ].compactMap { $0 }
            } else {
                reasons.insert(text(entitlement["ended_reason"]) ?? "ended", at: 0)
            }
            return EntitlementLine(
                name: name, isActive: isActive,
                until: text(isActive ? entitlement["expires_date"] : entitlement["ended_date"]),
                why: reasons.joined(separator: ", "))
        }
    }

    /// The whole account as plain lines: entitlements, then subscriptions, then purchases.
    public var lines: [String] {
        var lines = ["account: \(text(json["account"]) ?? "")"]
        if let at = text(json["at"]) { lines.append("at: \(at)") }
        lines += Self.section("entitlements", entitlements) { line in
            let state = line.isActive
                ? "active " + (line.until.map { "until \($0)" } ?? "with no end")
                : "not active" + (line.until.map { " since \($0)" } ?? "")
            return "\(line.name): \(state) (\(line.why))"
        }
        lines += Self.section("subscriptions", json["subscriptions"]?.arrayItems ?? []) { subscription in
            let expiry = text(subscription["expires_date"]).map { ", expires \($0)" } ?? ""
            return "\(text(subscription["original_transaction_id"]) ?? "?") \(text(subscription["product_id"]) ?? "?"): "
                + "\(text(subscription["status"]) ?? "?")\(expiry)"
        }
        lines += Self.section("purchases", json["purchases"]?.arrayItems ?? []) { purchase in
            let revoked = text(purchase["revocation_date"]).map { ", revoked \($0)" } ?? ""
            return "\(text(purchase["purchase_date"]) ?? "?") \(text(purchase["transaction_id"]) ?? "?") "
                + "\(text(purchase["product_id"]) ?? "?") (original \(text(purchase["original_transaction_id"]) ?? "?")"
                + ", \(text(purchase["environment"]) ?? "?")\(revoked))"
        }
        return lines
    }

    /// `title:`, then one indented line an item, or `  none`.
    private static func section<Item>(_ title: String, _ items: [Item], line: (Item) -> String) -> [String] {
        ["\(title):"] + (items.isEmpty ? ["  none"] : items.map { "  " + line($0) })
    }

    private func text(_ value: JSONValue?) -> String? {
        if case .string(let text)? = value { return text }
        return nil
    }
}

extension JSONValue {
    fileprivate var arrayItems: [JSONValue]? {
        if case .array(let items) = self { return items }
        return nil
    }
}
