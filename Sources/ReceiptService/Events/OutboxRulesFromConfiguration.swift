public import Ledger
import ReceiptEngine

extension ServiceConfiguration {
    /// What events each ledger write implies (``EventRules``) and which webhooks want them; `.none` without webhooks,
    /// so that a server that sends nothing has its writes read nothing more.
    public var outboxRules: OutboxRules {
        guard !webhooks.isEmpty else { return .none }
        let rules = EventRules(configuration: self)
        let webhooks = self.webhooks
        return OutboxRules(
            events: { change in rules.events(change) },
            subscribers: { draft in
                webhooks.filter { $0.wants(type: draft.type, bundleID: draft.bundleID, environment: draft.environment) }
                    .map(\.name)
            },
            formatTime: EventTime.format)
    }
}

/// `created_at` in event bodies.
enum EventTime {
    /// ISO 8601 UTC with milliseconds, `2026-11-27T04:05:06.789Z`: receiptd's RFC 3339 with the milliseconds events
    /// need to tell apart what one second saw.
    @Sendable static func format(_ unixMilliseconds: Int64) -> String {
        let date = ReceiptDate(millisecondsSince1970: unixMilliseconds)
        var text: [UInt8] = []
        text.reserveCapacity(24)
        date.appendRFC3339(to: &text)
        text.removeLast()  // the "Z", which follows the milliseconds
        let milliseconds = Int(unixMilliseconds - date.secondsSince1970 * 1000)
        let zero = UInt8(ascii: "0")
        text += [
            UInt8(ascii: "."), zero + UInt8(milliseconds / 100), zero + UInt8(milliseconds / 10 % 10),
            zero + UInt8(milliseconds % 10), UInt8(ascii: "Z"),
        ]
        return String(decoding: text, as: UTF8.self)
    }
}
