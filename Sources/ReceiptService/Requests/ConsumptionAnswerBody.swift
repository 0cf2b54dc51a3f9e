public import AppStoreServerAPI
public import JSONText

/// The backend's answer to Apple's refund question (`PUT /v1/transactions/{id}/consumption`): Apple's
/// `ConsumptionRequest` (Send Consumption Information v2) in snake_case, checked as Apple checks it so that a body
/// Apple would refuse is refused now, naming the member, rather than hours later by Apple.
public struct ConsumptionAnswerBody: Sendable, Hashable {
    public static let deliveryStatuses = [
        "DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE",
        "UNDELIVERED_OTHER",
    ]
    public static let refundPreferences = ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"]
    /// Milliunits: 100000 is all of it.
    public static let percentageRange: ClosedRange<Int64> = 0...100_000
    static let members = [
        "customer_consented", "consumption_percentage", "delivery_status", "refund_preference",
        "sample_content_provided",
    ]

    public var customerConsented: Bool
    public var consumptionPercentage: Int?
    /// Nil only where the app's `consumption.delivery_status_from_claims` lets receiptd fill it.
    public var deliveryStatus: String?
    public var refundPreference: String?
    public var sampleContentProvided: Bool

    /// What a stored answer was; nil for text that is not one (it was checked when stored).
    public init?(stored text: String) {
        guard let json = try? JSONValue(parsing: Array(text.utf8)),
            let body = try? Self(json, deliveryStatusMayBeMissing: true)
        else { return nil }
        self = body
    }

    /// Checks every member that does not depend on the purchase; ``checkPercentage(isOneTimePurchase:)`` does the
    /// rest once the transaction is known.
    init(_ json: JSONValue, deliveryStatusMayBeMissing: Bool) throws(RequestProblem) {
        guard case .object(let members) = json else {
            throw .badRequest(.notAJSONObject, "expected a JSON object: Apple's ConsumptionRequest in snake_case")
        }
        // camelCase from Apple's documentation would otherwise be dropped without a word.
        if let unknown = members.first(where: { !Self.members.contains($0.key) }) {
            throw .invalidField(
                unknown.key,
                "unknown member; expected " + Self.members.joined(separator: ", ") + " (snake_case)")
        }
        guard case .bool(let consented)? = json["customer_consented"], consented else {
            throw .invalidField(
                "customer_consented",
                "must be true: Apple takes consumption information only with the customer's consent")
        }
        customerConsented = consented

        switch json["delivery_status"] {
        case .string(let status)? where Self.deliveryStatuses.contains(status): deliveryStatus = status
        case nil where deliveryStatusMayBeMissing, .null? where deliveryStatusMayBeMissing: deliveryStatus = nil
        default:
            throw .invalidField(
                "delivery_status", "expected one of " + Self.deliveryStatuses.joined(separator: ", "))
        }

        switch json["refund_preference"] {
        case nil, .null?: refundPreference = nil
        case .string(let preference)? where Self.refundPreferences.contains(preference): refundPreference = preference
        default:
            throw .invalidField(
                "refund_preference", "expected one of " + Self.refundPreferences.joined(separator: ", ") + ", or none")
        }

        guard case .bool(let sample)? = json["sample_content_provided"] else {
            throw .invalidField("sample_content_provided", "expected true or false")
        }
        sampleContentProvided = sample

        switch json["consumption_percentage"] {
        case nil, .null?: consumptionPercentage = nil
        case .integer(let percentage)? where Self.percentageRange.contains(percentage):
            consumptionPercentage = Int(percentage)
        default:
            throw .invalidField(
                "consumption_percentage", "expected an integer from 0 to 100000 (milliunits: 100000 is all of it)")
        }
        if refundPreference == "GRANT_PRORATED", (consumptionPercentage ?? 0) == 0 {
            throw .invalidField(
                "consumption_percentage", "GRANT_PRORATED needs the share consumed: a percentage above 0")
        }
    }

    /// Apple takes a percentage only for one-time purchases (consumables, non-consumables, non-renewing
    /// subscriptions).
    func checkPercentage(isOneTimePurchase: Bool) throws(RequestProblem) {
        if consumptionPercentage != nil, !isOneTimePurchase {
            throw .invalidField(
                "consumption_percentage",
                "only for one-time purchases: this transaction is an auto-renewable subscription")
        }
    }

    /// As the backend sent it, snake_case: what the ledger keeps and the API shows.
    public var json: JSONValue {
        var members: [(key: String, value: JSONValue)] = [("customer_consented", .bool(customerConsented))]
        if let consumptionPercentage {
            members.append(("consumption_percentage", .integer(Int64(consumptionPercentage))))
        }
        if let deliveryStatus { members.append(("delivery_status", .string(deliveryStatus))) }
        if let refundPreference { members.append(("refund_preference", .string(refundPreference))) }
        members.append(("sample_content_provided", .bool(sampleContentProvided)))
        return .object(members)
    }

    /// Apple's body, with `deliveryStatus` when the answer gave none; nil when there is none to send.
    public func information(fallbackDeliveryStatus: String?) -> ConsumptionInformation? {
        guard let status = deliveryStatus ?? fallbackDeliveryStatus else { return nil }
        return ConsumptionInformation(
            customerConsented: customerConsented, consumptionPercentage: consumptionPercentage,
            deliveryStatus: status, refundPreference: refundPreference, sampleContentProvided: sampleContentProvided)
    }
}
