internal import JSONText

// The answers of the endpoints receiptd uses, holding Apple's signed strings untouched: the client verifies nothing,
// the caller verifies every JWS before it believes or stores a word of it.

/// An App Store environment with a server API; Xcode and LocalTesting data have none.
public enum AppStoreEnvironment: String, Sendable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
}

/// One page of Get Transaction History v2: ask again with `revision` while `hasMore`.
public struct TransactionHistoryPage: Sendable, Equatable {
    public var revision: String
    public var hasMore: Bool
    public var bundleID: String?
    public var environment: String?
    public var signedTransactions: [String]
}

/// Get Transaction History's filters, sent as Apple's query parameters.
public struct TransactionHistoryQuery: Sendable, Equatable {
    public var startDate: Int64?
    public var endDate: Int64?
    public var productIDs: [String] = []
    public var productTypes: [String] = []
    /// `ASCENDING` or `DESCENDING`.
    public var sort: String?
    public var subscriptionGroupIdentifiers: [String] = []
    public var inAppOwnershipType: String?
    public var revoked: Bool?

    public init(sort: String? = nil) { self.sort = sort }
}

/// Get All Subscription Statuses: one entry per subscription group.
public struct SubscriptionStatuses: Sendable, Equatable {
    public var environment: String?
    public var bundleID: String?
    public var groups: [SubscriptionGroupStatus]
}

extension SubscriptionStatuses {
    /// Every group's latest signed transactions and renewal infos, in Apple's order.
    public var signedTransactions: [String] { groups.flatMap { $0.lastTransactions.map(\.signedTransactionInfo) } }
    public var signedRenewals: [String] { groups.flatMap { $0.lastTransactions.map(\.signedRenewalInfo) } }
}

public struct SubscriptionGroupStatus: Sendable, Equatable {
    public var subscriptionGroupIdentifier: String
    public var lastTransactions: [LastTransactionStatus]
}

public struct LastTransactionStatus: Sendable, Equatable {
    /// 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked.
    public var status: Int64
    public var originalTransactionID: String
    public var signedTransactionInfo: String
    public var signedRenewalInfo: String
}

/// Look Up Order ID: `status` 0 means a valid order, 1 an invalid one (then there are no transactions).
public struct OrderLookup: Sendable, Equatable {
    public var status: Int64
    public var signedTransactions: [String]
    public var isValid: Bool { status == 0 }
}

/// Get Notification History's request body. Dates are milliseconds since 1970; both are required.
public struct NotificationHistoryQuery: Sendable, Equatable {
    public var startDate: Int64
    public var endDate: Int64
    public var notificationType: String?
    public var notificationSubtype: String?
    public var transactionID: String?
    public var onlyFailures: Bool?

    public init(startDate: Int64, endDate: Int64) {
        self.startDate = startDate
        self.endDate = endDate
    }

    var json: JSONValue {
        var members: [(key: String, value: JSONValue)] = [("startDate", .integer(startDate)), ("endDate", .integer(endDate))]
        if let notificationType { members.append(("notificationType", .string(notificationType))) }
        if let notificationSubtype { members.append(("notificationSubtype", .string(notificationSubtype))) }
        if let transactionID { members.append(("transactionId", .string(transactionID))) }
        if let onlyFailures { members.append(("onlyFailures", .bool(onlyFailures))) }
        return .object(members)
    }
}

/// One page of Get Notification History: ask again with `paginationToken` while `hasMore`.
public struct NotificationHistoryPage: Sendable, Equatable {
    public var notifications: [NotificationHistoryItem]
    public var hasMore: Bool
    public var paginationToken: String?
}

public struct NotificationHistoryItem: Sendable, Equatable {
    public var signedPayload: String
    public var sendAttempts: [SendAttempt]
}

public struct SendAttempt: Sendable, Equatable {
    /// Milliseconds since 1970.
    public var attemptDate: Int64
    /// `SUCCESS`, `TIMED_OUT`, `TLS_ISSUE`, … as Apple spells it.
    public var sendAttemptResult: String
}

/// Get Test Notification Status.
public struct TestNotificationStatus: Sendable, Equatable {
    public var signedPayload: String
    public var sendAttempts: [SendAttempt]
}

/// Reads Apple's JSON; any member missing or of the wrong type is an `invalidResponse`, never a crash.
struct ResponseReader {
    let json: JSONValue
    let endpoint: String
    /// The 2xx Apple answered with; an element of an answer's array carries its answer's.
    let status: Int

    init(body: [UInt8], status: Int, endpoint: String) throws(AppStoreServerAPIError) {
        self.endpoint = endpoint
        self.status = status
        // Apple answers the calls that only do something (Send Consumption Information, Set App Account Token,
        // Finish Transaction) with an empty 200 or 202: an empty answer reads as an object with no members.
        guard !body.isEmpty else {
            json = .object([])
            return
        }
        do {
            json = try JSONValue(parsing: body)
        } catch {
            throw AppStoreServerAPIError(code: .invalidResponse, message: "\(endpoint): the answer is not JSON (\(error))")
        }
    }

    private init(json: JSONValue, status: Int, endpoint: String) {
        self.json = json
        self.status = status
        self.endpoint = endpoint
    }

    func invalid(_ key: String) -> AppStoreServerAPIError {
        AppStoreServerAPIError(code: .invalidResponse, message: "\(endpoint): the answer's \(key) is missing or malformed")
    }

    func string(_ key: String) throws(AppStoreServerAPIError) -> String {
        guard case .string(let value)? = json[key] else { throw invalid(key) }
        return value
    }

    func optionalString(_ key: String) -> String? {
        guard case .string(let value)? = json[key] else { return nil }
        return value
    }

    func integer(_ key: String) throws(AppStoreServerAPIError) -> Int64 {
        guard case .integer(let value)? = json[key] else { throw invalid(key) }
        return value
    }

    func bool(_ key: String) throws(AppStoreServerAPIError) -> Bool {
        guard case .bool(let value)? = json[key] else { throw invalid(key) }
        return value
    }

    /// An absent array reads as empty: Apple leaves out empty lists.
    func strings(_ key: String) throws(AppStoreServerAPIError) -> [String] {
        guard let value = json[key] else { return [] }
        guard case .array(let elements) = value else { throw invalid(key) }
        var strings: [String] = []
        for element in elements {
            guard case .string(let string) = element else { throw invalid(key) }
            strings.append(string)
        }
        return strings
    }

    func objects(_ key: String) throws(AppStoreServerAPIError) -> [ResponseReader] {
        guard let value = json[key] else { return [] }
        guard case .array(let elements) = value else { throw invalid(key) }
        var readers: [ResponseReader] = []
        for element in elements {
            guard case .object = element else { throw invalid(key) }
            readers.append(ResponseReader(json: element, status: status, endpoint: endpoint))
        }
        return readers
    }

    func sendAttempts() throws(AppStoreServerAPIError) -> [SendAttempt] {
        var attempts: [SendAttempt] = []
        for attempt in try objects("sendAttempts") {
            attempts.append(
                SendAttempt(attemptDate: try attempt.integer("attemptDate"), sendAttemptResult: try attempt.string("sendAttemptResult")))
        }
        return attempts
    }
}
