import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import StoreKitJWS

/// StoreKit 2 on `/v1/validate` and Apple's delivery endpoint, `/v1/notifications`.
extension ReceiptRoutes {
    /// `/v1/validate`'s answer to StoreKit 2 signed data, and, when `collectingOriginals`, the original transaction
    /// it recorded, if any.
    func validateJWS(
        _ text: [UInt8], deviceIdentifier: DeviceIdentifier?, requiredKind: SignedDataKind?, wantsHTML: Bool,
        collectingOriginals: Bool
    ) -> (response: HTTPResponse, originals: [String]) {
        let now = clock()
        let result = jwsVerifier.verify(text, deviceIdentifier: deviceIdentifier, requiredKind: requiredKind, at: now)
        metrics.recordVerdict(kind: result.kind, error: result.error)
        let status: HTTPStatus = result.isValid ? .ok : .unprocessableContent
        if wantsHTML { return (html(status: status, ResultHTML.page(result)), []) }
        // Nothing to add to the answer: its text is written straight from the verdict.
        guard ledger.isConfigured else { return (json(status: status, text: JWSResultJSON.encode(result)), []) }
        let view = intake.take(result, now: now)
        if let member = view.refusedIDMember { return (problem(Self.invalidSignedID(member)), []) }
        let answer = view.applied(to: JWSResultJSON.value(of: result))
        guard result.isValid, view.availability == "available", let missing = Self.missingLedgerMembers(result) else {
            let originals = collectingOriginals && result.isValid ? Self.originals(of: result) : []
            return (json(status: status, answer), originals)
        }
        return (json(status: status, Self.notStored(answer, missing: missing)), [])
    }

    /// The original transaction a verified transaction or renewal info belongs to; other kinds record none.
    private static func originals(of result: JWSValidationResult) -> [String] {
        guard let payload = result.payload else { return [] }
        switch result.kind {
        case .transaction?: return LedgerFacts.transaction(payload).map { [$0.originalTransactionID] } ?? []
        case .renewalInfo?: return LedgerFacts.renewal(payload).map { [$0.originalTransactionID] } ?? []
        default: return []
        }
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
    func receiveNotification(_ request: HTTPRequest) -> HTTPResponse {
        let signedPayload: String
        do {
            signedPayload = try Self.signedPayload(request.body)
        } catch {
            return problem(error)
        }
        guard ledger.isConfigured else { return problem(Self.storeProblem(.notConfigured)) }
        switch intake.takeNotification(signedPayload) {
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
