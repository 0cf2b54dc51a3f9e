import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine

extension ReceiptRoutes {
    /// `PUT /v1/transactions/{transaction_id}/consumption`: the backend's answer to Apple's refund question, stored
    /// (replacing an earlier one) and sent to Apple by the consumption sender, never while this request waits.
    ///
    /// A transaction the ledger never verified is 404: whether Apple would take a percentage depends on its type.
    func putConsumption(_ request: HTTPRequest, transactionID: String) -> HTTPResponse {
        guard let body = try? JSONValue(parsing: request.body) else {
            return problem(
                .badRequest(.bodyNotJSON, "expected a JSON object: Apple's ConsumptionRequest in snake_case"))
        }
        let record: TransactionRecord?
        do {
            record = try ledger.withStore { (store) throws(LedgerError) in try store.transaction(id: transactionID) }
        } catch {
            return problem(Self.storeProblem(error))
        }
        guard let record else {
            return problem(
                .notFound(
                    "the ledger has never seen transaction \(transactionID) verified: validate it (or let its "
                        + "CONSUMPTION_REQUEST notification arrive) before answering"))
        }
        let app = configuration.apps.first { $0.bundleID == record.facts.bundleID }
        let answer: ConsumptionAnswerBody
        do throws(RequestProblem) {
            answer = try ConsumptionAnswerBody(
                body, deliveryStatusMayBeMissing: app?.consumptionDeliveryStatusFromClaims == true)
            try answer.checkPercentage(isOneTimePurchase: !record.facts.isAutoRenewable)
        } catch {
            return problem(error)
        }
        let text = String(decoding: answer.json.serialized(), as: UTF8.self)
        let now = ReceiptDate(clock()).millisecondsSince1970
        let consumptionRequest: ConsumptionRequest?
        do {
            consumptionRequest = try ledger.withStore { (store) throws(LedgerError) in
                try store.storeConsumptionAnswer(transactionID: transactionID, body: text, at: now)
            }
        } catch {
            return problem(Self.storeProblem(error))
        }
        if consumptionRequest?.state(at: now) == .open { intake.consumptionNudge.nudge() }
        return json(
            status: .ok,
            .object([
                ("transaction_id", .string(transactionID)), ("answer", answer.json), ("updated_at", Self.date(now)),
                ("consumption_request", consumptionRequest.map { Self.consumptionRequestJSON($0, now: now) } ?? .null),
            ]))
    }

    /// `"consumption_request"` of `GET /v1/transactions/{id}` and of the PUT's answer.
    static func consumptionRequestJSON(_ request: ConsumptionRequest, now: Int64) -> JSONValue {
        .object([
            ("state", .string(request.state(at: now).rawValue)),
            ("notification_uuid", .string(request.notificationUUID)),
            ("requested_at", date(request.requestedAt)), ("expires_at", date(request.expiresAt)),
            ("reason", .string(request.reason)),
            ("answer", request.answer.flatMap { try? JSONValue(parsing: Array($0.body.utf8)) } ?? .null),
            ("sent_at", date(request.sentAt)), ("apple_status", .integer(request.appleStatus.map { Int64($0) })),
            ("apple_error_code", .integer(request.appleErrorCode)), ("attempts", .integer(Int64(request.attempts))),
            ("last_error", .string(request.lastError)),
        ])
    }
}
