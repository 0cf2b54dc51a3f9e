#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import JSONText
public import ReceiptEngine
internal import CryptoFloor

/// Members a forged payload adds, replaces or leaves out, on top of a blueprint's fields.
public struct PayloadEdits: Sendable {
    /// Set after the blueprint's members: an existing member is replaced in place, a new one appended.
    public var set: [(key: String, value: JSONValue)] = []
    public var omitted: Set<String> = []

    public init() {}

    func apply(to members: [(key: String, value: JSONValue?)]) -> JSONValue {
        var result = members.compactMap { member in member.value.map { (key: member.key, value: $0) } }
        for edit in set {
            if let index = result.firstIndex(where: { $0.key == edit.key }) {
                result[index].value = edit.value
            } else {
                result.append(edit)
            }
        }
        return .object(result.filter { !omitted.contains($0.key) })
    }
}

/// Unix milliseconds, as StoreKit 2 writes dates.
private func milliseconds(_ date: Date?) -> JSONValue? {
    date.map { .integer(ReceiptDate($0).millisecondsSince1970) }
}

/// `deviceVerification` for a device: SHA-384 of the lowercase nonce then the lowercase device id, base64.
public func deviceVerification(device: DeviceIdentifier, nonce: UUID) -> String {
    let input = nonce.uuidString.lowercased() + device.formatted.lowercased()
    return Data(Digest.sha384.hash(Array(input.utf8))).base64EncodedString()
}

/// A signed transaction's payload (`JWSTransactionDecodedPayload`).
public struct TransactionBlueprint: Sendable {
    public var transactionID = "2000000000000001"
    public var originalTransactionID = "2000000000000001"
    /// Set only by an assignment (`nil` leaves the member out); otherwise derived from `transactionID` for an
    /// auto-renewable subscription, the only type Apple gives one, so every forged renewal has its own.
    private var assignedWebOrderLineItemID: String??
    public var webOrderLineItemID: String? {
        get {
            assignedWebOrderLineItemID
                ?? (type == "Auto-Renewable Subscription" ? String(forgedWebOrderLineItemID(transactionID)) : nil)
        }
        set { assignedWebOrderLineItemID = .some(newValue) }
    }
    public var bundleID: String
    public var productID = "pro.monthly"
    public var type = "Auto-Renewable Subscription"
    public var purchaseDate: Date
    public var expiresDate: Date?
    public var revocationDate: Date?
    public var revocationReason: Int64?
    public var quantity: Int64 = 1
    public var environment = "Production"
    public var signedDate: Date
    public var deviceVerification: (value: String, nonce: UUID)?
    public var edits = PayloadEdits()

    public init(bundleID: String, signedDate: Date, environment: String = "Production") {
        self.bundleID = bundleID
        self.signedDate = signedDate
        self.environment = environment
        purchaseDate = signedDate.addingTimeInterval(-60)
        expiresDate = signedDate.addingTimeInterval(30 * 86_400)
    }

    public var payload: JSONValue {
        edits.apply(to: [
            ("transactionId", .string(transactionID)), ("originalTransactionId", .string(originalTransactionID)),
            ("webOrderLineItemId", webOrderLineItemID.map(JSONValue.string)), ("bundleId", .string(bundleID)),
            ("productId", .string(productID)), ("subscriptionGroupIdentifier", .string("21000001")),
            ("purchaseDate", milliseconds(purchaseDate)), ("originalPurchaseDate", milliseconds(purchaseDate)),
            ("expiresDate", milliseconds(expiresDate)), ("quantity", .integer(quantity)), ("type", .string(type)),
            ("inAppOwnershipType", .string("PURCHASED")), ("signedDate", milliseconds(signedDate)),
            ("revocationDate", milliseconds(revocationDate)), ("revocationReason", revocationReason.map(JSONValue.integer)),
            ("environment", .string(environment)), ("transactionReason", .string("PURCHASE")),
            ("storefront", .string("USA")), ("storefrontId", .string("143441")), ("price", .integer(4990)),
            ("currency", .string("USD")),
            ("deviceVerification", deviceVerification.map { .string($0.value) }),
            ("deviceVerificationNonce", deviceVerification.map { .string($0.nonce.uuidString.lowercased()) }),
        ])
    }
}

/// Signed renewal info (`JWSRenewalInfoDecodedPayload`); it names no bundle id.
public struct RenewalInfoBlueprint: Sendable {
    public var originalTransactionID = "2000000000000001"
    public var productID = "pro.monthly"
    public var autoRenewStatus: Int64 = 1
    public var environment = "Production"
    public var signedDate: Date
    public var edits = PayloadEdits()

    public init(signedDate: Date, environment: String = "Production") {
        self.signedDate = signedDate
        self.environment = environment
    }

    public var payload: JSONValue {
        edits.apply(to: [
            ("originalTransactionId", .string(originalTransactionID)), ("autoRenewProductId", .string(productID)),
            ("productId", .string(productID)), ("autoRenewStatus", .integer(autoRenewStatus)),
            ("signedDate", milliseconds(signedDate)), ("environment", .string(environment)),
            ("recentSubscriptionStartDate", milliseconds(signedDate.addingTimeInterval(-86_400))),
            ("renewalDate", milliseconds(signedDate.addingTimeInterval(30 * 86_400))),
        ])
    }
}

/// A signed app transaction (`AppTransaction`); its signing time is `receiptCreationDate`.
public struct AppTransactionBlueprint: Sendable {
    public var bundleID: String
    public var appAppleID: Int64?
    public var applicationVersion = "1.0"
    public var originalApplicationVersion = "1.0"
    /// `Production`, `Sandbox`, `Xcode` or `LocalTesting`.
    public var receiptType = "Production"
    public var receiptCreationDate: Date
    public var deviceVerification: (value: String, nonce: UUID)?
    public var edits = PayloadEdits()

    public init(bundleID: String, receiptCreationDate: Date, receiptType: String = "Production") {
        self.bundleID = bundleID
        self.receiptCreationDate = receiptCreationDate
        self.receiptType = receiptType
    }

    /// Binds the app transaction to a device as StoreKit does, with this nonce.
    public mutating func bind(to device: DeviceIdentifier, nonce: UUID = UUID()) {
        deviceVerification = (ReceiptForge.deviceVerification(device: device, nonce: nonce), nonce)
    }

    public var payload: JSONValue {
        edits.apply(to: [
            ("receiptType", .string(receiptType)), ("appAppleId", appAppleID.map(JSONValue.integer)),
            ("bundleId", .string(bundleID)), ("applicationVersion", .string(applicationVersion)),
            ("receiptCreationDate", milliseconds(receiptCreationDate)),
            ("requestDate", milliseconds(receiptCreationDate)),
            ("originalPurchaseDate", milliseconds(receiptCreationDate.addingTimeInterval(-365 * 86_400))),
            ("originalApplicationVersion", .string(originalApplicationVersion)),
            ("deviceVerification", deviceVerification.map { .string($0.value) }),
            ("deviceVerificationNonce", deviceVerification.map { .string($0.nonce.uuidString.lowercased()) }),
            ("appTransactionId", .string("704000000000000001")), ("originalPlatform", .string("iOS")),
        ])
    }
}

/// An App Store Server Notification V2 payload of any type and subtype, carrying whatever nested JWS it is given.
public struct NotificationBlueprint: Sendable {
    /// Which member names the app: Apple sends exactly one.
    public enum Section: String, Sendable, CaseIterable {
        case data, summary, appData, externalPurchaseToken
    }

    public var notificationType: String
    public var subtype: String?
    public var notificationUUID = UUID().uuidString.lowercased()
    public var signedDate: Date
    public var section = Section.data
    public var bundleID: String
    public var appAppleID: Int64?
    public var environment = "Production"
    /// `externalPurchaseToken.externalPurchaseId`; Apple marks Sandbox ids with a `SANDBOX` prefix.
    public var externalPurchaseID = "SANDBOX_0000-0000"
    public var status: Int64?
    public var signedTransactionInfo: String?
    public var signedRenewalInfo: String?
    public var signedAppTransactionInfo: String?
    public var edits = PayloadEdits()

    public init(type: String, subtype: String? = nil, bundleID: String, signedDate: Date, environment: String = "Production") {
        notificationType = type
        self.subtype = subtype
        self.bundleID = bundleID
        self.signedDate = signedDate
        self.environment = environment
    }

    public var payload: JSONValue {
        let sectionValue: JSONValue
        switch section {
        case .data:
            sectionValue = PayloadEdits().apply(to: [
                ("appAppleId", appAppleID.map(JSONValue.integer)), ("bundleId", .string(bundleID)),
                ("bundleVersion", .string("1")), ("environment", .string(environment)),
                ("signedTransactionInfo", signedTransactionInfo.map(JSONValue.string)),
                ("signedRenewalInfo", signedRenewalInfo.map(JSONValue.string)),
                ("status", status.map(JSONValue.integer)),
            ])
        case .summary:
            sectionValue = PayloadEdits().apply(to: [
                ("requestIdentifier", .string(UUID().uuidString.lowercased())), ("environment", .string(environment)),
                ("appAppleId", appAppleID.map(JSONValue.integer)), ("bundleId", .string(bundleID)),
                ("productId", .string("pro.monthly")), ("succeededCount", .integer(1)), ("failedCount", .integer(0)),
            ])
        case .appData:
            sectionValue = PayloadEdits().apply(to: [
                ("appAppleId", appAppleID.map(JSONValue.integer)), ("bundleId", .string(bundleID)),
                ("environment", .string(environment)),
                ("signedAppTransactionInfo", signedAppTransactionInfo.map(JSONValue.string)),
            ])
        case .externalPurchaseToken:
            sectionValue = PayloadEdits().apply(to: [
                ("externalPurchaseId", .string(externalPurchaseID)),
                ("tokenCreationDate", milliseconds(signedDate)), ("appAppleId", appAppleID.map(JSONValue.integer)),
                ("bundleId", .string(bundleID)),
            ])
        }
        return edits.apply(to: [
            ("notificationType", .string(notificationType)), ("subtype", subtype.map(JSONValue.string)),
            ("notificationUUID", .string(notificationUUID)), (section.rawValue, sectionValue),
            ("version", .string("2.0")), ("signedDate", milliseconds(signedDate)),
        ])
    }
}
