import Ledger

/// Notifications shaped like the ones Apple sends for one monthly subscription, original id "1000", bought at `t0`.
enum AppleEvents {
    static let day: Int64 = 86_400_000
    static let t0: Int64 = 1_700_000_000_000
    static let original = "1000"
    static let product = "com.example.monthly"

    static func transaction(
        _ id: String, purchase: Int64, expires: Int64?, signed: Int64, revoked: Int64? = nil,
        ownership: String = "PURCHASED", original: String = original
    ) -> TransactionFacts {
        TransactionFacts(
            transactionID: id, originalTransactionID: original, productID: product, bundleID: "com.example.app",
            type: "Auto-Renewable Subscription", purchaseDate: purchase, originalPurchaseDate: t0,
            expiresDate: expires, revocationDate: revoked, revocationReason: revoked.map { _ in 0 },
            inAppOwnershipType: ownership, webOrderLineItemID: "w\(id)", environment: "Sandbox", signedDate: signed,
            payloadJSON: #"{"transactionId":"\#(id)","signedDate":\#(signed)}"#
        )
    }

    static func renewal(
        signed: Int64, autoRenew: Bool = true, retry: Bool = false, grace: Int64? = nil, intent: Int? = nil,
        original: String = original
    ) -> RenewalFacts {
        RenewalFacts(
            originalTransactionID: original, productID: product, autoRenewProductID: product,
            autoRenewStatus: autoRenew, expirationIntent: intent, isInBillingRetryPeriod: retry,
            gracePeriodExpiresDate: grace, priceIncreaseStatus: nil, environment: "Sandbox", signedDate: signed,
            payloadJSON: #"{"originalTransactionId":"\#(original)","signedDate":\#(signed)}"#
        )
    }

    static func notification(
        _ type: String, _ subtype: String? = nil, signed: Int64, uuid: String? = nil,
        transaction: TransactionFacts? = nil, renewal: RenewalFacts? = nil
    ) -> NotificationFacts {
        NotificationFacts(
            uuid: uuid ?? "\(type)-\(subtype ?? "none")-\(signed)", type: type, subtype: subtype, signedDate: signed,
            environment: "Sandbox", bundleID: "com.example.app", signedPayload: "header.\(type).signature",
            transaction: transaction, renewal: renewal
        )
    }

    // The first month: bought at t0, expires at t0 + 30 days.
    static let firstMonth = transaction("1000", purchase: t0, expires: t0 + 30 * day, signed: t0)

    static let subscribed = notification(
        "SUBSCRIBED", "INITIAL_BUY", signed: t0, transaction: firstMonth, renewal: renewal(signed: t0)
    )

    static func didRenew(at time: Int64 = t0 + 30 * day) -> NotificationFacts {
        notification(
            "DID_RENEW", signed: time,
            transaction: transaction("1001", purchase: time, expires: time + 30 * day, signed: time),
            renewal: renewal(signed: time)
        )
    }

    static func didFailToRenew(grace: Bool, at time: Int64 = t0 + 30 * day) -> NotificationFacts {
        notification(
            "DID_FAIL_TO_RENEW", grace ? "GRACE_PERIOD" : nil, signed: time,
            transaction: with(firstMonth, signed: time),
            renewal: renewal(signed: time, retry: true, grace: grace ? t0 + 36 * day : nil, intent: 2)
        )
    }

    static let gracePeriodExpired = notification(
        "GRACE_PERIOD_EXPIRED", signed: t0 + 36 * day, transaction: with(firstMonth, signed: t0 + 36 * day),
        renewal: renewal(signed: t0 + 36 * day, retry: true, grace: t0 + 36 * day, intent: 2)
    )

    static let expiredVoluntary = notification(
        "EXPIRED", "VOLUNTARY", signed: t0 + 30 * day, transaction: with(firstMonth, signed: t0 + 30 * day),
        renewal: renewal(signed: t0 + 30 * day, autoRenew: false, intent: 1)
    )

    static let autoRenewDisabled = notification(
        "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", signed: t0 + 5 * day,
        transaction: with(firstMonth, signed: t0 + 5 * day), renewal: renewal(signed: t0 + 5 * day, autoRenew: false)
    )

    static let refund = notification(
        "REFUND", signed: t0 + 10 * day,
        transaction: transaction(
            "1000", purchase: t0, expires: t0 + 30 * day, signed: t0 + 10 * day, revoked: t0 + 10 * day
        )
    )

    static let revoke = notification(
        "REVOKE", signed: t0 + 10 * day,
        transaction: transaction(
            "1000", purchase: t0, expires: t0 + 30 * day, signed: t0 + 10 * day, revoked: t0 + 10 * day,
            ownership: "FAMILY_SHARED"
        )
    )

    /// Apple sends the transaction again, newer and without a revocation date.
    static let refundReversed = notification(
        "REFUND_REVERSED", signed: t0 + 12 * day, transaction: with(firstMonth, signed: t0 + 12 * day)
    )

    static let test = NotificationFacts(
        uuid: "test-1", type: "TEST", signedDate: t0 + 2 * day, environment: "Sandbox", bundleID: "com.example.app",
        signedPayload: "header.TEST.signature"
    )

    static let unknownType = NotificationFacts(
        uuid: "unknown-1", type: "SOMETHING_APPLE_ADDS_LATER", signedDate: t0 + 3 * day, environment: "Sandbox",
        bundleID: "com.example.app", signedPayload: "header.unknown.signature"
    )

    static func with(_ facts: TransactionFacts, signed: Int64) -> TransactionFacts {
        var copy = facts
        copy.signedDate = signed
        copy.payloadJSON = #"{"transactionId":"\#(facts.transactionID)","signedDate":\#(signed)}"#
        return copy
    }

    /// A life of one subscription touching every kind of state change, in Apple's order.
    static let lifetime: [NotificationFacts] = [
        subscribed, autoRenewDisabled, refund, refundReversed, didFailToRenew(grace: true),
        gracePeriodExpired, didRenew(at: t0 + 40 * day), test, unknownType,
    ]
}
