import ReceiptEngine

/// What one POST to a webhook got back.
public struct WebhookAnswer: Sendable, Hashable {
    /// The receiver's HTTP status; nil when no answer came (`error` says why).
    public var status: Int?
    /// Why there was no 2xx, in a few words (a transport failure, a status); nil on a 2xx.
    public var error: String?
    /// The start of the receiver's answer body, for `webhooks test`.
    public var bodyPrefix: String
    public var seconds: Double

    public init(status: Int?, error: String?, bodyPrefix: String, seconds: Double) {
        self.status = status
        self.error = error
        self.bodyPrefix = bodyPrefix
        self.seconds = seconds
    }
}

extension Webhook {
    /// Sends a `TEST` event to this webhook now, outside the outbox (`receiptd webhooks test NAME`): signed like any
    /// event, sent once, never retried.
    public func sendTest(at unixMilliseconds: Int64) -> WebhookAnswer {
        let eventID = Self.testEventID()
        return WebhookSender(webhook: self).send(
            eventID: eventID, body: Self.testEventBody(id: eventID, at: unixMilliseconds), at: unixMilliseconds)
    }

    /// `evt_test_` and 32 random hex digits: never the id of a stored event.
    static func testEventID() -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = (0..<2).map { _ in
            let text = String(generator.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - text.count) + text
        }
        return "evt_test_" + digits.joined()
    }

    /// A `TEST` event's body: every member of an event (docs/events.md), none of them about a purchase.
    static func testEventBody(id: String, at unixMilliseconds: Int64) -> [UInt8] {
        let body = "{\"id\":\"\(id)\",\"type\":\"\(EventType.test.rawValue)\","
            + "\"created_at\":\"\(EventTime.format(unixMilliseconds))\",\"sequence\":0,"
            + "\"environment\":null,\"app\":null,\"account\":null,\"entitlements\":[],\"product_id\":null,"
            + "\"original_transaction_id\":null,\"transaction\":null,\"subscription\":null,\"notification\":null}"
        return Array(body.utf8)
    }
}
