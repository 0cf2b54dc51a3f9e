internal import CryptoFloor

/// `Receiptd-Signature: t=UNIX_SECONDS,v1=HEX` (issue 25, the scheme Stripe uses): `v1` is the lowercase hex
/// HMAC-SHA256 of `"\(t)."` followed by the body's bytes, keyed with the secret's bytes. The time is signed with the
/// body so that a receiver can refuse a replayed old request.
public enum WebhookSignature {
    public static let headerName = "Receiptd-Signature"

    /// The header's value for `body` sent at `unixSeconds`.
    public static func header(secret: WebhookSecret, unixSeconds: Int64, body: [UInt8]) -> String {
        "t=\(unixSeconds),v1=\(v1(secret: secret, unixSeconds: unixSeconds, body: body))"
    }

    /// The lowercase hex HMAC-SHA256 of `"\(unixSeconds)." + body`.
    public static func v1(secret: WebhookSecret, unixSeconds: Int64, body: [UInt8]) -> String {
        HMAC.authenticationCode(key: secret.bytes, data: Array("\(unixSeconds).".utf8) + body, digest: .sha256)
            .hexEncoded()
    }
}
