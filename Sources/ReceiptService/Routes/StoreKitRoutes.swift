import HTTP1Server
import JSONText
public import Ledger
import ReceiptEngine
public import StoreKitJWS

/// What became of one signed notification (`ReceiptRoutes.takeNotification`).
public enum NotificationIntake: Sendable {
    /// Verification failed: a forgery, a wrong app or environment, an expired chain. Nothing was stored.
    case refused(JWSValidationResult)
    /// Verified, but without the uuid, type or signed date the ledger keys it by. Nothing was stored.
    case malformed
    /// Verified, but an id it would store is not an id (`PathID`: a NUL or control character, a dot-segment, too
    /// long): its `notificationUUID`, or a `transactionId` or `originalTransactionId` nested in it, as `member` names.
    /// Nothing was stored, and no retry of it ever will be.
    case invalidID(member: String)
    /// Verified, but the ledger could not store it.
    case notStored(NotificationFacts, PurchaseLedger.Unavailability)
    /// In the ledger; `.duplicate` or `.conflict` when its uuid was there already.
    case recorded(NotificationFacts, NotificationWrite)
}

/// StoreKit 2 on `/v1/validate` and Apple's delivery endpoint, `/v1/notifications`.
extension ReceiptRoutes {
    func validateJWS(
        _ text: [UInt8], deviceIdentifier: DeviceIdentifier?, requiredKind: SignedDataKind?, wantsHTML: Bool
    ) -> HTTPResponse {
        let now = clock()
        let result = jwsVerifier.verify(text, deviceIdentifier: deviceIdentifier, requiredKind: requiredKind, at: now)
        metrics.recordVerdict(kind: result.kind, error: result.error)
        let status: HTTPStatus = result.isValid ? .ok : .unprocessableContent
        if wantsHTML { return html(status: status, ResultHTML.page(result)) }
        guard ledger.isConfigured else {
            // Nothing to add to the answer: its text is written straight from the verdict.
            return HTTPResponse(
                status: status, headers: HTTPHeaders([(.contentType, "application/json")]),
                body: JWSResultJSON.encode(result))
        }
        var transactions: [TransactionFacts] = []
        var renewal: RenewalFacts?
        if result.isValid, let payload = result.payload {
            switch result.kind {
            case .transaction?: transactions = LedgerFacts.transaction(payload).map { [$0] } ?? []
            case .renewalInfo?: renewal = LedgerFacts.renewal(payload)
            default: break
            }
        }
        let view = ledgerView(
            recording: transactions, renewal: renewal, source: .jws, subscriptions: result.subscriptions,
            inputAsOf: result.signedDate, now: now)
        let answer = view.applied(to: JWSResultJSON.value(of: result))
        guard result.isValid, view.availability == "available", let missing = Self.missingLedgerMembers(result) else {
            return json(status: status, answer)
        }
        return json(status: status, Self.notStored(answer, missing: missing))
    }

    /// The members the ledger needs that a verified transaction or renewal info lacks (Apple's test data can lack
    /// even `transactionId`); nil when it has them all or is of a kind `/v1/validate` never records.
    static func missingLedgerMembers(_ result: JWSValidationResult) -> [String]? {
        guard let needed = result.kind?.ledgerMembers, let payload = result.payload else { return nil }
        let missing = needed.filter { name in
            switch payload[name] {
            case nil, .null?: true
            default: false
            }
        }
        return missing.isEmpty ? nil : missing
    }

    /// `"ledger": "not_stored"` and why, in place of `"available"`: verified, and answered, but not recorded.
    static func notStored(_ answer: JSONValue, missing: [String]) -> JSONValue {
        guard case .object(var members) = answer else { return answer }
        if let index = members.firstIndex(where: { $0.key == "ledger" }) {
            members[index].value = .string("not_stored")
        }
        members.append((
            "ledger_reason",
            .object([
                ("code", .string("missing_members")),
                ("message", .string(
                    "verified, but not recorded: the ledger needs \(missing.joined(separator: " and ")), which the "
                        + "payload lacks")),
                ("missing", .array(missing.map(JSONValue.string))),
            ])))
        return .object(members)
    }

    /// Apple's delivery: 200 only once the notification is durably in the ledger (Apple retries anything else, for
    /// days in Production), so nothing Apple said is lost; the same uuid again is 200 with `"duplicate": true`.
    ///
    /// Each verified delivery is logged with its uuid, the key of Apple's notification history, so an operator can
    /// tell a refund that never arrived from one that arrived and was not stored. A refused one logs only its code:
    /// until verified, its fields are anyone's words.
    func receiveNotification(_ request: HTTPRequest) -> HTTPResponse {
        let signedPayload: String
        do {
            signedPayload = try Self.signedPayload(request.body)
        } catch {
            return problem(error)
        }
        guard ledger.isConfigured else { return problem(Self.storeProblem(.notConfigured)) }
        switch takeNotification(signedPayload) {
        case .refused(let result):
            return json(status: .unprocessableContent, JWSResultJSON.value(of: result))
        case .malformed:
            return problem(RequestProblem(
                status: .unprocessableContent, code: .malformedJWS,
                message: "the notification carries no notificationUUID, notificationType or signedDate"))
        case .invalidID(let member):
            return problem(.badRequest(
                member == "notificationUUID" ? .invalidNotificationUUID : .invalidID,
                "the notification's \(member) must be \(PathID.rule)"))
        case .notStored(_, let error):
            return problem(Self.storeProblem(error))
        case .recorded(let facts, let write):
            return json(
                status: .ok,
                .object([
                    ("received", .bool(true)), ("notification_uuid", .string(facts.uuid)),
                    ("notification_type", .string(facts.type)), ("subtype", .string(facts.subtype)),
                    ("duplicate", .bool(write != .stored)),
                ]))
        }
    }

    /// Verifies one signed notification, records it in the ledger and logs its fate: the one path of Apple's
    /// deliveries (`POST /v1/notifications`) and of what `receiptd store sync` fetches from Apple's notification
    /// history, so a notification counts the same however it arrived. The ledger must be configured.
    public func takeNotification(_ signedPayload: String) -> NotificationIntake {
        let result = jwsVerifier.verify(signedPayload, requiredKind: .notification, at: clock())
        metrics.recordVerdict(kind: result.kind, error: result.error)
        guard result.isValid else {
            var fields = [("code", result.error?.code.rawValue ?? "invalid")]
            if let reason = result.error?.reason { fields.append(("reason", reason.rawValue)) }
            log?.event("notification refused", fields)
            return .refused(result)
        }
        guard let facts = LedgerFacts.notification(result, signedPayload: signedPayload) else {
            // A verified notification always has both; refusing keeps it in Apple's retry queue rather than lost.
            log?.event("notification refused", [("code", "malformed_jws")])
            return .malformed
        }
        // These key the ledger, and the transaction ids go on to Apple (backfill); a NUL in one failed every write
        // (PostgreSQL refuses NUL in text) and so was answered 503, for Apple to retry forever.
        if let member = Self.memberWithInvalidID(facts) {
            // The uuid, clipped, so an operator can match the refusal against Apple's notification history.
            log?.event(
                "notification refused",
                [("code", "invalid_id"), ("member", member), ("uuid", ServiceLog.clipped(facts.uuid))])
            return .invalidID(member: member)
        }
        let write: NotificationWrite
        do {
            write = try ledger.withStore { (store) throws(LedgerError) in try ledger.record(facts, in: store) }
        } catch {
            let answer = Self.storeProblem(error)
            var fields = [
                ("uuid", ServiceLog.clipped(facts.uuid)), ("type", ServiceLog.clipped(facts.type)),
                ("code", answer.code.rawValue),
            ]
            if case .unavailable(let cause) = error { fields.append(("ledger_error", cause.code.rawValue)) }
            log?.event("notification not stored", fields)
            return .notStored(facts, error)
        }
        // A uuid Apple already delivered with other content is answered like a retry (Apple must stop resending;
        // the first payload stays the record) but never silently: someone replayed a uuid, or Apple changed a
        // notification, and either needs a person to look.
        // The uuid and type are the signer's to choose: a 1 MB uuid must not make a 1 MB line.
        var fields = [("uuid", ServiceLog.clipped(facts.uuid)), ("type", ServiceLog.clipped(facts.type))]
        if let subtype = facts.subtype { fields.append(("subtype", ServiceLog.clipped(subtype))) }
        fields.append(("duplicate", write != .stored ? "true" : "false"))
        fields.append(("conflict", write == .conflict ? "true" : "false"))
        log?.event("notification", fields)
        if write == .conflict { metrics.recordNotificationConflict() }
        if let transaction = facts.transaction { backfill([transaction]) }
        return .recorded(facts, write)
    }

    private static func memberWithInvalidID(_ facts: NotificationFacts) -> String? {
        let ids: [(String, String?)] = [
            ("notificationUUID", facts.uuid), ("transactionId", facts.transaction?.transactionID),
            ("originalTransactionId", facts.transaction?.originalTransactionID),
            ("originalTransactionId", facts.renewal?.originalTransactionID),
        ]
        return ids.first { _, id in id.map { !PathID.isValid($0) } ?? false }?.0
    }

    /// `{"signedPayload": "<JWS>"}`, as Apple posts it.
    static func signedPayload(_ body: [UInt8]) throws(RequestProblem) -> String {
        guard let json = try? JSONValue(parsing: body), case .object = json else {
            throw .badRequest(.notAJSONObject, "expected Apple's notification body: a JSON object {\"signedPayload\": \"<JWS>\"}")
        }
        guard case .string(let text)? = json["signedPayload"], !text.isEmpty else {
            throw .badRequest(.missingSignedPayload, "missing signedPayload: expected {\"signedPayload\": \"<JWS>\"}")
        }
        return text
    }
}
