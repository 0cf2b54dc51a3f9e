internal import JSONText

// The calls of a server's duties to Apple (issue 26): refund answers, refund history, renewal extensions, the app
// account token, finishing a transaction and app transaction info. Bodies and paths as Apple's server library sends
// them (app-store-server-library 3.x: ConsumptionRequest, ExtendRenewalDateRequest, MassExtendRenewalDateRequest,
// UpdateAppAccountTokenRequest).

/// Send Consumption Information v2's body (Apple's `ConsumptionRequest`). Values are Apple's spellings.
public struct ConsumptionInformation: Sendable, Equatable {
    public var customerConsented: Bool
    /// Milliunits, 0–100000; one-time purchases only.
    public var consumptionPercentage: Int?
    /// `DELIVERED`, `UNDELIVERED_QUALITY_ISSUE`, `UNDELIVERED_WRONG_ITEM`, `UNDELIVERED_SERVER_OUTAGE`,
    /// `UNDELIVERED_OTHER`.
    public var deliveryStatus: String
    /// `DECLINE`, `GRANT_FULL`, `GRANT_PRORATED`.
    public var refundPreference: String?
    public var sampleContentProvided: Bool

    public init(
        customerConsented: Bool, consumptionPercentage: Int? = nil, deliveryStatus: String,
        refundPreference: String? = nil, sampleContentProvided: Bool
    ) {
        self.customerConsented = customerConsented
        self.consumptionPercentage = consumptionPercentage
        self.deliveryStatus = deliveryStatus
        self.refundPreference = refundPreference
        self.sampleContentProvided = sampleContentProvided
    }

    var json: JSONValue {
        var members: [(key: String, value: JSONValue)] = [("customerConsented", .bool(customerConsented))]
        if let consumptionPercentage { members.append(("consumptionPercentage", .integer(Int64(consumptionPercentage)))) }
        members.append(("deliveryStatus", .string(deliveryStatus)))
        if let refundPreference { members.append(("refundPreference", .string(refundPreference))) }
        members.append(("sampleContentProvided", .bool(sampleContentProvided)))
        return .object(members)
    }
}

/// One page of Get Refund History v2: ask again with `revision` while `hasMore`.
public struct RefundHistoryPage: Sendable, Equatable {
    public var revision: String
    public var hasMore: Bool
    public var signedTransactions: [String]
}

/// Extend a Subscription Renewal Date's body. `extendReasonCode`: 0 undeclared, 1 customer satisfaction, 2 other,
/// 3 service issue or outage.
public struct RenewalExtension: Sendable, Equatable {
    public var extendByDays: Int
    public var extendReasonCode: Int
    /// A UUID naming this request, so a retried request is not applied twice.
    public var requestIdentifier: String

    public init(extendByDays: Int, extendReasonCode: Int, requestIdentifier: String) {
        self.extendByDays = extendByDays
        self.extendReasonCode = extendReasonCode
        self.requestIdentifier = requestIdentifier
    }

    var json: JSONValue {
        .object([
            ("extendByDays", .integer(Int64(extendByDays))), ("extendReasonCode", .integer(Int64(extendReasonCode))),
            ("requestIdentifier", .string(requestIdentifier)),
        ])
    }
}

/// Apple's answer to an extension (`ExtendRenewalDateResponse`); `effectiveDate` is the new expiry, in milliseconds.
public struct RenewalExtensionAnswer: Sendable, Equatable {
    public var originalTransactionID: String?
    public var webOrderLineItemID: String?
    public var success: Bool?
    public var effectiveDate: Int64?
}

/// Extend for all active subscribers of a product (`MassExtendRenewalDateRequest`).
public struct MassRenewalExtension: Sendable, Equatable {
    public var renewalExtension: RenewalExtension
    public var productID: String
    /// ISO 3166-1 alpha-3 storefront codes; empty for every storefront.
    public var storefrontCountryCodes: [String]

    public init(_ renewalExtension: RenewalExtension, productID: String, storefrontCountryCodes: [String] = []) {
        self.renewalExtension = renewalExtension
        self.productID = productID
        self.storefrontCountryCodes = storefrontCountryCodes
    }

    var json: JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("extendByDays", .integer(Int64(renewalExtension.extendByDays))),
            ("extendReasonCode", .integer(Int64(renewalExtension.extendReasonCode))),
            ("requestIdentifier", .string(renewalExtension.requestIdentifier)), ("productId", .string(productID)),
        ]
        if !storefrontCountryCodes.isEmpty {
            members.append(("storefrontCountryCodes", .array(storefrontCountryCodes.map { .string($0) })))
        }
        return .object(members)
    }
}

/// Get Status of Subscription Renewal Date Extensions.
public struct MassRenewalExtensionStatus: Sendable, Equatable {
    public var requestIdentifier: String?
    public var complete: Bool
    public var completeDate: Int64?
    public var succeededCount: Int64?
    public var failedCount: Int64?
}

extension AppStoreServerAPIClient {
    /// Send Consumption Information (v2): the answer to a `CONSUMPTION_REQUEST`. Apple documents 202 with no body;
    /// returns the 2xx it actually answered.
    @discardableResult
    public func sendConsumptionInformation(
        transactionID: String, _ information: ConsumptionInformation
    ) throws(AppStoreServerAPIError) -> Int {
        try call(
            "Send Consumption Information", method: "PUT",
            path: "/inApps/v2/transactions/consumption/\(Self.pathSegment(transactionID))", body: information.json
        ).status
    }

    /// Get Refund History v2, one page: pass the previous page's `revision` to get the next.
    public func refundHistory(transactionID: String, revision: String? = nil) throws(AppStoreServerAPIError) -> RefundHistoryPage {
        let reader = try call(
            "Get Refund History", method: "GET", path: "/inApps/v2/refund/lookup/\(Self.pathSegment(transactionID))",
            query: revision.map { [("revision", $0)] } ?? [])
        return RefundHistoryPage(
            revision: try reader.string("revision"), hasMore: try reader.bool("hasMore"),
            signedTransactions: try reader.strings("signedTransactions"))
    }

    /// Extend a Subscription Renewal Date.
    public func extendRenewalDate(
        originalTransactionID: String, _ request: RenewalExtension
    ) throws(AppStoreServerAPIError) -> RenewalExtensionAnswer {
        let reader = try call(
            "Extend a Subscription Renewal Date", method: "PUT",
            path: "/inApps/v1/subscriptions/extend/\(Self.pathSegment(originalTransactionID))", body: request.json)
        return RenewalExtensionAnswer(
            originalTransactionID: reader.optionalString("originalTransactionId"),
            webOrderLineItemID: reader.optionalString("webOrderLineItemId"), success: reader.optionalBool("success"),
            effectiveDate: reader.optionalInteger("effectiveDate"))
    }

    /// Extend Subscription Renewal Dates for All Active Subscribers: Apple's request identifier (the one sent).
    public func extendRenewalDatesForAllActiveSubscribers(
        _ request: MassRenewalExtension
    ) throws(AppStoreServerAPIError) -> String {
        try call(
            "Extend Subscription Renewal Dates for All Active Subscribers", method: "POST",
            path: "/inApps/v1/subscriptions/extend/mass", body: request.json
        ).string("requestIdentifier")
    }

    /// Get Status of Subscription Renewal Date Extensions.
    public func massRenewalExtensionStatus(
        productID: String, requestIdentifier: String
    ) throws(AppStoreServerAPIError) -> MassRenewalExtensionStatus {
        let reader = try call(
            "Get Status of Subscription Renewal Date Extensions", method: "GET",
            path: "/inApps/v1/subscriptions/extend/mass/\(Self.pathSegment(productID))/\(Self.pathSegment(requestIdentifier))")
        return MassRenewalExtensionStatus(
            requestIdentifier: reader.optionalString("requestIdentifier"), complete: reader.optionalBool("complete") ?? false,
            completeDate: reader.optionalInteger("completeDate"), succeededCount: reader.optionalInteger("succeededCount"),
            failedCount: reader.optionalInteger("failedCount"))
    }

    /// Set App Account Token: Apple's later notifications of this purchase carry `token` (a UUID).
    public func setAppAccountToken(originalTransactionID: String, token: String) throws(AppStoreServerAPIError) {
        _ = try call(
            "Set App Account Token", method: "PUT",
            path: "/inApps/v1/transactions/\(Self.pathSegment(originalTransactionID))/appAccountToken",
            // Apple's libraries disagree on case (Swift's JSONEncoder writes a Foundation UUID upper case, Python's
            // converter writes it lower case); lower case is how Apple documents appAccountToken and signs it back in
            // every transaction, and Python's 3.1.2 is what parity is checked against.
            body: .object([("appAccountToken", .string(token.lowercased()))]))
    }

    /// Finish Transaction (App Store Server API 1.20): the server delivered the content.
    public func finishTransaction(transactionID: String) throws(AppStoreServerAPIError) {
        _ = try call(
            "Finish Transaction", method: "POST", path: "/inApps/v1/transactions/\(Self.pathSegment(transactionID))/finish",
            body: nil, emptyPost: true)
    }

    /// Get App Transaction Info: the signed app transaction, unverified.
    public func appTransactionInfo(transactionID: String) throws(AppStoreServerAPIError) -> String {
        try call(
            "Get App Transaction Info", method: "GET",
            path: "/inApps/v1/transactions/appTransactions/\(Self.pathSegment(transactionID))"
        ).string("signedAppTransactionInfo")
    }
}

extension ResponseReader {
    func optionalBool(_ key: String) -> Bool? {
        guard case .bool(let value)? = json[key] else { return nil }
        return value
    }

    func optionalInteger(_ key: String) -> Int64? {
        guard case .integer(let value)? = json[key] else { return nil }
        return value
    }
}
