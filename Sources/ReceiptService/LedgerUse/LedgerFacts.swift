import JSONText
import Ledger
import ReceiptEngine
import StoreKitJWS

/// Verified data in the ledger's vocabulary: facts with the instant they were signed, which orders them.
///
/// Only what verified is ever mapped: callers hand over results whose signature and chain held.
enum LedgerFacts {
    /// A transaction's facts, from its verified payload; nil when the payload lacks an id the ledger keys on.
    /// - Parameter text: the payload's text when it is exactly what `payload.serialized()` writes (the verifier's
    ///   `payloadText`): stored as it is, rather than the payload written again.
    static func transaction(_ payload: JSONValue, text payloadText: [UInt8]? = nil) -> TransactionFacts? {
        let transaction = SignedTransaction(payload: payload)
        guard let transactionID = transaction.transactionID, let signedDate = transaction.signedDate else { return nil }
        let isUpgraded: Bool? = if case .bool(let upgraded)? = payload["isUpgraded"] { upgraded } else { nil }
        return TransactionFacts(
            transactionID: transactionID, originalTransactionID: transaction.originalTransactionID ?? transactionID,
            productID: transaction.productID ?? "", bundleID: transaction.bundleID, type: transaction.type,
            purchaseDate: transaction.purchaseDate?.millisecondsSince1970,
            originalPurchaseDate: transaction.originalPurchaseDate?.millisecondsSince1970,
            expiresDate: transaction.expiresDate?.millisecondsSince1970,
            revocationDate: transaction.revocationDate?.millisecondsSince1970,
            revocationReason: transaction.revocationReason.map { Int($0) },
            inAppOwnershipType: transaction.inAppOwnershipType, webOrderLineItemID: transaction.webOrderLineItemID,
            environment: transaction.environment, isUpgraded: isUpgraded,
            appAccountToken: transaction.appAccountToken?.lowercased(),
            signedDate: signedDate.millisecondsSince1970,
            payloadJSON: text(payload, payloadText))
    }

    /// Renewal info's facts, from its verified payload (`text` as for ``transaction(_:text:)``).
    static func renewal(_ payload: JSONValue, text payloadText: [UInt8]? = nil) -> RenewalFacts? {
        let info = SignedRenewalInfo(payload: payload)
        guard let originalTransactionID = info.originalTransactionID, let signedDate = info.signedDate else { return nil }
        let priceIncreaseStatus: Int? =
            if case .integer(let status)? = payload["priceIncreaseStatus"] { Int(status) } else { nil }
        return RenewalFacts(
            originalTransactionID: originalTransactionID, productID: info.productID,
            autoRenewProductID: info.autoRenewProductID, autoRenewStatus: info.autoRenewStatus,
            expirationIntent: info.expirationIntent.map { Int($0) }, isInBillingRetryPeriod: info.isInBillingRetryPeriod,
            gracePeriodExpiresDate: info.gracePeriodExpiresDate?.millisecondsSince1970,
            priceIncreaseStatus: priceIncreaseStatus, environment: info.environment,
            signedDate: signedDate.millisecondsSince1970, payloadJSON: text(payload, payloadText))
    }

    /// A verified notification with its verified nested payloads; nil when it lacks a uuid or a signing date.
    static func notification(_ result: JWSValidationResult, signedPayload: String) -> NotificationFacts? {
        guard result.isValid, let notification = result.notification, let uuid = notification.notificationUUID,
            let type = notification.notificationType, let signedDate = notification.signedDate
        else { return nil }
        func nested(_ member: String) -> NestedPayload? { result.nestedPayloads.first { $0.member == member } }
        return NotificationFacts(
            uuid: uuid, type: type, subtype: notification.subtype, signedDate: signedDate.millisecondsSince1970,
            environment: notification.environment, bundleID: notification.bundleID, signedPayload: signedPayload,
            transaction: nested("signedTransactionInfo").flatMap { transaction($0.payload, text: $0.payloadText) },
            renewal: nested("signedRenewalInfo").flatMap { renewal($0.payload, text: $0.payloadText) },
            appTransactionJSON: nested("signedAppTransactionInfo").map { text($0.payload, $0.payloadText) },
            consumptionRequestReason: notification.consumptionRequestReason)
    }

    /// A receipt's in-app entries, as of the receipt's creation date, in the camelCase shape Apple signs for StoreKit
    /// 2 so that every transaction in the ledger reads the same way.
    /// - Parameter isWanted: which of them to build, by transaction id and signing time (building one writes its
    ///   payload's JSON, the most expensive part of recording a receipt).
    static func transactions(
        of receipt: Receipt, where isWanted: (String, Int64) -> Bool = { _, _ in true }
    ) -> [TransactionFacts] {
        receipt.inAppPurchases.compactMap { purchase in
            guard let transactionID = purchase.transactionID,
                isWanted(transactionID, receipt.creationDate.millisecondsSince1970)
            else { return nil }
            let originalTransactionID = purchase.originalTransactionID ?? transactionID
            // Receipts do not name the product type; an expiry date is what marks an auto-renewable subscription.
            let type: String? = purchase.expiresDate == nil ? nil : TransactionFacts.autoRenewableType
            var members: [(key: String, value: JSONValue)] = [
                ("transactionId", .string(transactionID)), ("originalTransactionId", .string(originalTransactionID)),
                ("bundleId", .string(receipt.bundleID)), ("productId", .string(purchase.productID)),
            ]
            func date(_ key: String, _ value: ReceiptDate?) {
                if let value { members.append((key, .integer(value.millisecondsSince1970))) }
            }
            date("purchaseDate", purchase.purchaseDate)
            date("originalPurchaseDate", purchase.originalPurchaseDate)
            date("expiresDate", purchase.expiresDate)
            date("revocationDate", purchase.cancellationDate)
            if let quantity = purchase.quantity { members.append(("quantity", .integer(quantity))) }
            if let type { members.append(("type", .string(type))) }
            if let webOrder = purchase.webOrderLineItemID {
                members.append(("webOrderLineItemId", .string(String(webOrder))))
            }
            if let environment = receipt.environment { members.append(("environment", .string(environment.rawValue))) }
            // StoreKit 2 has no such members; an entitlement's `period_type` reads them (written only when set, so
            // that an entry without an offer is stored as before).
            if purchase.isTrialPeriod { members.append((ReceiptOffer.trial, .bool(true))) }
            if purchase.isInIntroOfferPeriod { members.append((ReceiptOffer.introductory, .bool(true))) }
            if let offer = purchase.promotionalOfferID { members.append((ReceiptOffer.promotionalOfferID, .string(offer))) }
            members.append(("signedDate", .integer(receipt.creationDate.millisecondsSince1970)))
            return TransactionFacts(
                transactionID: transactionID, originalTransactionID: originalTransactionID,
                productID: purchase.productID ?? "", bundleID: receipt.bundleID, type: type,
                purchaseDate: purchase.purchaseDate?.millisecondsSince1970,
                originalPurchaseDate: purchase.originalPurchaseDate?.millisecondsSince1970,
                expiresDate: purchase.expiresDate?.millisecondsSince1970,
                revocationDate: purchase.cancellationDate?.millisecondsSince1970,
                webOrderLineItemID: purchase.webOrderLineItemID.map { String($0) },
                environment: receipt.environment?.rawValue, signedDate: receipt.creationDate.millisecondsSince1970,
                payloadJSON: text(.object(members)))
        }
    }

    /// The members a receipt entry's payload has for its offer: `is_trial_period`, `is_in_intro_offer_period` and
    /// `promotional_offer_id`, in the payload's camelCase.
    enum ReceiptOffer {
        static let trial = "isTrialPeriod"
        static let introductory = "isInIntroOfferPeriod"
        static let promotionalOfferID = "promotionalOfferId"
    }

    /// The stored payload back as JSON; the ledger holds only text this service wrote from verified JSON.
    static func payload(_ text: String) -> JSONValue {
        (try? JSONValue(parsing: Array(text.utf8))) ?? .object([])
    }

    private static func text(_ value: JSONValue) -> String { String(decoding: value.serialized(), as: UTF8.self) }

    /// `serialized` is what `text` would write again byte for byte, when given (the verifier checked it).
    private static func text(_ value: JSONValue, _ serialized: [UInt8]?) -> String {
        serialized.map { String(decoding: $0, as: UTF8.self) } ?? text(value)
    }
}
