#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AppStoreServerAPI
import HTTP1Server
public import JSONText
public import Ledger
import ReceiptEngine

/// Why a renewal date is extended: Apple's `extendReasonCode`, by the names receiptd's API and CLI take.
public enum RenewalExtensionReason: String, Sendable, Hashable, CaseIterable {
    case undeclared
    case customerSatisfaction = "customer_satisfaction"
    case other
    case serviceIssueOrOutage = "service_issue_or_outage"

    /// Apple's code, 0–3.
    public var code: Int {
        switch self {
        case .undeclared: 0
        case .customerSatisfaction: 1
        case .other: 2
        case .serviceIssueOrOutage: 3
        }
    }

    public init?(code: Int) {
        guard let reason = Self.allCases.first(where: { $0.code == code }) else { return nil }
        self = reason
    }

    public static let spellings = allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
}

/// What asking Apple to extend one subscription came to: the row recorded (nil when Apple was not asked), and the
/// problem when it was not extended.
public struct RenewalExtensionReply: Sendable {
    public var record: RenewalExtensionRecord?
    var problem: RequestProblem?

    /// nil when Apple extended the subscription; else the answer's `error.code` (`extension_refused`,
    /// `server_api_unavailable`…).
    public var errorCode: String? { problem?.code.rawValue }
    public var errorMessage: String? { problem?.message }
    public var appleErrorCode: Int64? { problem?.appleErrorCode }

    /// `POST /v1/subscriptions/{id}/extend`'s 200 body.
    public var json: JSONValue? {
        guard problem == nil, let record else { return nil }
        return ReceiptRoutes.renewalExtensionJSON(record)
    }
}

extension ReceiptRoutes {
    /// The days Apple extends by at most (and at least 1).
    public static let renewalExtensionDays = 1...90

    /// `POST /v1/subscriptions/{original_transaction_id}/extend` `{"days": 1–90, "reason": "…"}`: asks Apple (Extend a
    /// Subscription Renewal Date) in the subscription's app and environment when the ledger knows it, else in each app
    /// with a key until Apple knows it (a backend may extend before any of its purchases reached receiptd), and
    /// records Apple's answer.
    func extendRenewal(_ request: HTTPRequest, originalTransactionID: String, apple: AppleAdmission) -> HTTPResponse {
        guard let body = try? JSONValue(parsing: request.body), case .object = body else {
            return problem(.invalidField("days", "expected a JSON object {\"days\": 1–90, \"reason\": \(RenewalExtensionReason.spellings)}"))
        }
        guard case .integer(let days)? = body["days"], Self.renewalExtensionDays.contains(Int(clamping: days)) else {
            return problem(.invalidField("days", "days must be an integer from 1 to 90: Apple extends a renewal date by 1 to 90 days"))
        }
        guard case .string(let spelling)? = body["reason"], let reason = RenewalExtensionReason(rawValue: spelling) else {
            return problem(.invalidField("reason", "reason must be one of \(RenewalExtensionReason.spellings)"))
        }
        // The support page says it is the one asking, so the ledger tells its button from the backend's calls.
        let requestedBy: String? =
            if request.headers[HTTPHeaderName("X-Receiptd-Source")] == "support-page" {
                "support-page"
            } else if case .allowed(let token?) = authorization.decide(request, access: Route.renewalExtension.declaration.access) {
                token
            } else {
                nil
            }
        let reply = extendRenewal(
            originalTransactionID: originalTransactionID, days: Int(days), reason: reason, requestedBy: requestedBy,
            apple: apple, searchApps: true)
        if let problem = reply.problem { return self.problem(problem) }
        return json(status: .ok, reply.json ?? .null)
    }

    /// Asks Apple to extend `originalTransactionID`'s renewal date, in the app and environment the ledger knows it in
    /// (or, with `searchApps` and a subscription the ledger does not know, in each app with a key and environment
    /// allowed until one knows it), within `server_api.request_deadline`; records the answer when a ledger is
    /// configured and, once extended, fetches the subscription's signed status from Apple in the background (inline
    /// with `refreshInline`, for commands that exit when done).
    public func extendRenewal(
        originalTransactionID: String, days: Int, reason: RenewalExtensionReason, requestedBy: String?,
        apple: AppleAdmission = .admitted, searchApps: Bool = false, refreshInline: Bool = false
    ) -> RenewalExtensionReply {
        var facts: SubscriptionFacts?
        if ledger.isConfigured {
            do {
                facts = try ledger.withStore { (store) throws(LedgerError) in
                    try ledger.subscription(originalTransactionID: originalTransactionID, in: store)
                }
            } catch {
                guard searchApps else { return RenewalExtensionReply(problem: Self.storeProblem(error)) }
            }
        }
        var targets: [(bundleID: String, environment: AppStoreEnvironment)]
        if let facts {
            guard facts.isAutoRenewable else {
                return RenewalExtensionReply(problem: RequestProblem(
                    status: .notFound, code: .notASubscription,
                    message: "\(originalTransactionID) is not an auto-renewable subscription: only subscriptions have a renewal date to extend"))
            }
            let bundleID = facts.latestTransaction?.bundleID ?? facts.transactions.lazy.compactMap(\.bundleID).first
            let environment = (facts.latestTransaction?.environment ?? facts.renewal?.environment)
                .flatMap(AppStoreEnvironment.init(rawValue:))
            guard let bundleID, let environment else {
                return RenewalExtensionReply(problem: .notFound(
                    "the ledger does not know which app and environment \(originalTransactionID) belongs to"))
            }
            guard configuration.app(bundleID: bundleID)?.serverAPI != nil else {
                return RenewalExtensionReply(problem: RequestProblem(
                    status: 503, code: .serverAPINotConfigured,
                    message: "app \(bundleID) has no server_api key (key_id, issuer_id, private_key_file): receiptd cannot ask Apple"))
            }
            targets = [(bundleID, environment)]
        } else if searchApps {
            targets = serverAPIClients.targets
            guard !targets.isEmpty else {
                return RenewalExtensionReply(problem: RequestProblem(
                    status: 503, code: .serverAPINotConfigured,
                    message: "no app has a server_api key (key_id, issuer_id, private_key_file)"))
            }
        } else {
            return RenewalExtensionReply(problem: .notFound(
                "the ledger has never seen original transaction \(originalTransactionID): validate it (or look it up) first"))
        }
        guard apple == .admitted else {
            return RenewalExtensionReply(problem: Self.renewalExtensionProblem(
                AppStoreServerAPIError(
                    code: .busy, message: "server_api.max_concurrent_requests requests already wait on Apple"),
                originalTransactionID: originalTransactionID))
        }

        let requestIdentifier = UUID().uuidString.lowercased()
        let deadline = wallClockSeconds() + configuration.serverAPI.requestDeadline
        let now = ReceiptDate(clock()).millisecondsSince1970
        var record = RenewalExtensionRecord(
            requestIdentifier: requestIdentifier, originalTransactionID: originalTransactionID,
            bundleID: targets[0].bundleID, environment: targets[0].environment.rawValue, days: days,
            reasonCode: reason.code, requestedBy: requestedBy, requestedAt: now, outcome: .failed)
        var problem: RequestProblem?
        for (index, target) in targets.enumerated() {
            record.bundleID = target.bundleID
            record.environment = target.environment.rawValue
            do {
                let client = try serverAPIClients.client(bundleID: target.bundleID, environment: target.environment)
                    .bounded(until: deadline)
                let answer = try client.extendRenewalDate(
                    originalTransactionID: originalTransactionID,
                    RenewalExtension(extendByDays: days, extendReasonCode: reason.code, requestIdentifier: requestIdentifier))
                record.appleStatus = 200
                guard answer.success != false, let effectiveDate = answer.effectiveDate else {
                    let refusal = RequestProblem(
                        status: .unprocessableContent, code: .extensionRefused,
                        message: "Apple answered without extending \(originalTransactionID)'s renewal date")
                    record.outcome = .refused
                    record.message = refusal.message
                    problem = refusal
                    break
                }
                record.outcome = .extended
                record.effectiveDate = effectiveDate
                record.webOrderLineItemID = answer.webOrderLineItemID
                problem = nil
                break
            } catch {
                var fields = [("app", target.bundleID), ("environment", target.environment.rawValue), ("code", error.code.rawValue)]
                if let appleCode = error.appleErrorCode { fields.append(("apple_error_code", String(appleCode))) }
                log?.event("server api renewal extension failed", fields)
                record.appleStatus = error.httpStatus
                record.appleErrorCode = error.appleErrorCode
                // Another app or environment may hold a subscription the ledger does not know.
                if error.code == .notFound, index < targets.count - 1 { continue }
                problem = Self.renewalExtensionProblem(error, originalTransactionID: originalTransactionID)
                record.outcome = error.code == .rejected || error.code == .notFound ? .refused : .failed
                record.message = problem?.message
            }
        }
        if ledger.isConfigured {
            do {
                try ledger.withStore { (store) throws(LedgerError) in try store.record(renewalExtension: record) }
            } catch {
                log?.event("renewal extension not stored", [("code", Self.storeProblem(error).code.rawValue)])
            }
        }
        if record.outcome == .extended, let environment = AppStoreEnvironment(rawValue: record.environment) {
            let refresh: @Sendable () -> Void = { [intake, bundleID = record.bundleID] in
                intake.refreshSubscriptionStatus(originalTransactionID, bundleID: bundleID, environment: environment)
            }
            if refreshInline { refresh() } else { intake.serverAPIBackfill.enqueue("extension \(requestIdentifier)", refresh) }
        }
        return RenewalExtensionReply(record: record, problem: problem)
    }

    /// Apple's refusals (4xx with its `errorCode`) as `extension_refused`, with what Apple's limits are; Apple out of
    /// reach as the lookups answer it.
    static func renewalExtensionProblem(_ error: AppStoreServerAPIError, originalTransactionID: String) -> RequestProblem {
        switch error.code {
        case .rejected, .notFound:
            return RequestProblem(
                status: .unprocessableContent, code: .extensionRefused,
                message: "Apple refused to extend \(originalTransactionID): "
                    + renewalExtensionLimit(error.appleErrorCode, fallback: error.detail),
                appleErrorCode: error.appleErrorCode)
        case .busy:
            let lookup = ServerAPILookup.busy(retryAfterSeconds: error.retryAfterSeconds, [error])
            return lookup.problem("Apple was not asked to extend \(originalTransactionID): ")
                ?? RequestProblem(status: 503, code: .serverAPIBusy, message: error.detail)
        default:
            return ServerAPILookup.unavailable([error]).problem("Apple could not be asked to extend \(originalTransactionID): ")
                ?? RequestProblem(status: 503, code: .serverAPIUnavailable, message: error.detail)
        }
    }

    /// What each of Apple's refusals of an extension means, and what can be done.
    public static func renewalExtensionLimit(_ appleErrorCode: Int64?, fallback: String) -> String {
        switch appleErrorCode {
        case 4_030_004:
            "Apple: 4030004, the subscription is not eligible: only an active subscription (not expired, not in a "
                + "billing retry or grace period) can have its renewal date extended"
        case 4_030_005:
            "Apple: 4030005, Apple extends one subscription's renewal date at most twice in 365 days and this one "
                + "has had both: its next extension must wait until a year after the first"
        case 4_030_007:
            "Apple: 4030007, a subscription shared through Family Sharing cannot be extended for a family member: "
                + "extend the family organizer's original transaction"
        case 4_000_009:
            "Apple: 4000009, Apple extends a renewal date by 1 to 90 days"
        case 4_040_005:
            "Apple: 4040005, Apple knows no such original transaction in this app and environment"
        default:
            fallback
        }
    }

    static func renewalExtensionJSON(_ record: RenewalExtensionRecord) -> JSONValue {
        .object([
            ("original_transaction_id", .string(record.originalTransactionID)),
            ("request_identifier", .string(record.requestIdentifier)),
            ("effective_date", date(record.effectiveDate)),
            ("web_order_line_item_id", .string(record.webOrderLineItemID)),
            ("days", .integer(Int64(record.days))),
            ("reason", .string(RenewalExtensionReason(code: record.reasonCode)?.rawValue)),
        ])
    }

    /// One entry of a subscription's `extensions`: every extension asked of Apple, whatever it answered.
    static func extensionEntryJSON(_ record: RenewalExtensionRecord) -> JSONValue {
        .object([
            ("request_identifier", .string(record.requestIdentifier)),
            ("outcome", .string(record.outcome.rawValue)),
            ("days", .integer(Int64(record.days))),
            ("reason", .string(RenewalExtensionReason(code: record.reasonCode)?.rawValue)),
            ("effective_date", date(record.effectiveDate)),
            ("web_order_line_item_id", .string(record.webOrderLineItemID)),
            ("apple_error_code", .integer(record.appleErrorCode)),
            ("requested_by", .string(record.requestedBy)),
            ("requested_at", date(record.requestedAt)),
        ])
    }
}

extension ReceiptRoutes {
    /// A subscription's answer with its `extensions`, oldest first. They do not move `expires_date` nor the status:
    /// only Apple's signed transactions do (the extension's own answer is unsigned), and receiptd fetches them from
    /// Apple as soon as an extension succeeds.
    static func withExtensions(_ subscription: JSONValue, _ extensions: [RenewalExtensionRecord]) -> JSONValue {
        guard case .object(let members) = subscription else { return subscription }
        return .object(members + [("extensions", .array(extensions.map(extensionEntryJSON)))])
    }
}
