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
    // PLACEHOLDER for the webhook-delivery branch, which signs and sends.
    /// Sends a `TEST` event to this webhook now, outside the outbox (`receiptd webhooks test NAME`).
    public func sendTest(at unixMilliseconds: Int64) -> WebhookAnswer {
        WebhookAnswer(status: nil, error: "not implemented", bodyPrefix: "", seconds: 0)
    }
}
