internal import AppStoreServerAPI
internal import Dispatch

/// Posts signed events to one webhook over its own libcurl transport: certificates verified (the system store and
/// `ca_file`), plain http only with `allow_http`, connections and TLS sessions kept between posts.
///
/// Logs nothing itself, and nothing it returns holds the secret or the body.
public final class WebhookSender: Sendable {
    public let webhook: Webhook
    private let transport: HTTPSTransport
    /// The start of a receiver's answer worth showing (`webhooks test`); the rest is read and dropped.
    static let bodyPrefixBytes = 512

    /// - Parameter concurrency: posts that may be under way at once; as many connections are kept for reuse.
    public init(webhook: Webhook, concurrency: Int = 1) {
        self.webhook = webhook
        transport = HTTPSTransport(
            caFile: webhook.caFile, timeoutSeconds: Int(webhook.timeout.rounded(.up)),
            allowsPlainHTTP: webhook.allowHTTP, maximumIdleHandles: max(1, concurrency))
    }

    /// POSTs `body` as event `eventID`, signed at `unixMilliseconds`, and waits at most the webhook's `timeout`.
    public func send(eventID: String, body: [UInt8], at unixMilliseconds: Int64) -> WebhookAnswer {
        let seconds = unixMilliseconds >= 0 ? unixMilliseconds / 1000 : (unixMilliseconds - 999) / 1000
        let request = OutboundRequest(
            method: "POST", url: webhook.url,
            headers: [
                ("Content-Type", "application/json"),
                ("User-Agent", "receiptd/\(ReceiptdVersion.current)"),
                ("Receiptd-Event-Id", eventID),
                (WebhookSignature.headerName,
                 WebhookSignature.header(secret: webhook.secret, unixSeconds: seconds, body: body)),
                // libcurl would otherwise wait up to a second for a "100 Continue" before a larger body.
                ("Expect", ""),
            ],
            body: body)
        let start = DispatchTime.now().uptimeNanoseconds
        let outcome = transport.send(request, timeoutMilliseconds: Int((webhook.timeout * 1000).rounded(.up)))
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        switch outcome {
        case .success(let response):
            let prefix = String(decoding: response.body.prefix(Self.bodyPrefixBytes), as: UTF8.self)
            let isSuccess = (200...299).contains(response.status)
            return WebhookAnswer(
                status: response.status, error: isSuccess ? nil : "status \(response.status)", bodyPrefix: prefix,
                seconds: elapsed)
        case .failure(let failure):
            return WebhookAnswer(
                status: nil, error: "\(failure.message) (curl \(failure.curlCode))", bodyPrefix: "", seconds: elapsed)
        }
    }
}

extension WebhookAnswer {
    /// Whether the receiver took the event: any 2xx.
    public var isDelivered: Bool { status.map { (200...299).contains($0) } ?? false }
}
