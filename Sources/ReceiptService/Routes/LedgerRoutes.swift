#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import StoreKitJWS

/// What the ledger knows: subscriptions, transactions, and claims that grant a purchase exactly once.
extension ReceiptRoutes {
    /// `?at=` (RFC 3339): the facts as they stood at that instant (docs/accounts.md), the status evaluated then.
    func subscription(originalTransactionID: String, request: HTTPRequest) -> HTTPResponse {
        let at: Int64?
        do {
            at = try Self.evaluationInstant(request)
        } catch {
            return problem(error)
        }
        var facts: SubscriptionFacts?
        var extensions: [RenewalExtensionRecord] = []
        do {
            (facts, extensions) = try ledger.withStore { (store) throws(LedgerError) in
                (
                    try ledger.subscription(originalTransactionID: originalTransactionID, in: store),
                    try store.renewalExtensions(originalTransactionID: originalTransactionID)
                )
            }
        } catch {
            return problem(Self.storeProblem(error))
        }
        if let at, let stored = facts {
            facts = stored.asOf(at)
            guard facts?.transactions.isEmpty == false || stored.transactions.isEmpty else {
                return problem(.notFound(
                    "original transaction \(originalTransactionID) was not purchased yet at "
                        + ReceiptDate(millisecondsSince1970: at).rfc3339))
            }
        }
        guard let facts else {
            return problem(.notFound("the ledger has never seen original transaction \(originalTransactionID)"))
        }
        guard facts.isAutoRenewable else {
            let type = facts.latestTransaction?.type.map { " (\($0))" } ?? ""
            return problem(RequestProblem(
                status: .notFound, code: .notASubscription,
                message: "\(originalTransactionID) is a one-time purchase\(type), not an auto-renewable subscription: "
                    + "see /v1/transactions/\(originalTransactionID)"))
        }
        // Written straight as text, its transactions taken whole as `transactionTexts` keeps them written: the object
        // `subscriptionJSON(_:at:)` builds, with `extensions` after its members as `withExtensions` puts it.
        let written = transactionTexts.texts(of: facts)
        let latestBytes = written.latest.map { written.texts[$0].count } ?? 0
        var writer = JSONWriter(capacity: 4096 + latestBytes)
        writer.beginObject()
        let instant = at ?? ReceiptDate(clock()).millisecondsSince1970
        Self.writeSubscriptionMembers(
            facts, latest: written.latest, at: instant, to: &writer,
            transaction: { index, writer in writer.compactText(written.texts[index]) },
            transactions: { writer in writer.keptText(written.array) })
        writer.key("extensions")
        writer.beginArray()
        for record in extensions where record.requestedAt <= at ?? .max { writer.value(Self.extensionEntryJSON(record)) }
        writer.endArray()
        writer.endObject()
        return json(status: .ok, pieces: writer.takePieces())
    }

    func transaction(id: String) -> HTTPResponse {
        let record: TransactionRecord?
        let consumptionRequest: ConsumptionRequest?
        let appleCalls: [AppleCall]
        do {
            (record, consumptionRequest, appleCalls) = try ledger.withStore { (store) throws(LedgerError) in
                (
                    try store.transaction(id: id), try store.consumptionRequest(transactionID: id),
                    try store.appleCalls(transactionID: id)
                )
            }
        } catch {
            return problem(Self.storeProblem(error))
        }
        guard let record else {
            return problem(.notFound("the ledger has never seen transaction \(id) verified"))
        }
        let sources = record.sources.sorted { ($0.value, $0.key.rawValue) < ($1.value, $1.key.rawValue) }
        return json(
            status: .ok,
            .object([
                ("transaction", Self.transactionJSON(record.facts)),
                ("first_seen", Self.date(record.firstSeen)),
                ("sources", .array(sources.map { .string($0.key.rawValue) })),
                ("claim", record.claim.map(Self.claimJSON) ?? .null),
            ] + Self.appleCallMembers(appleCalls, transactionID: id) + [
                ("consumption_request", consumptionRequest.map {
                    Self.consumptionRequestJSON($0, now: ReceiptDate(clock()).millisecondsSince1970)
                } ?? .null)
            ]))
    }

    /// `{"account": "…"}`: the first account to claim a verified transaction owns it; the same account again is told
    /// it already did; any other account gets 409 with the existing claim. What Apple revoked (refunded, or no
    /// longer shared by a family) is granted to nobody: 409 `revoked`, with the claim made before, if any.
    func claim(_ request: HTTPRequest, transactionID: String) -> HTTPResponse {
        guard let body = try? JSONValue(parsing: request.body), case .object = body,
            case .string(let account)? = body["account"], !account.isEmpty
        else {
            return problem(.badRequest(.invalidAccount, "expected a JSON object {\"account\": \"…\"} naming who the purchase is granted to"))
        }
        guard Self.isStorableAccount(account) else {
            return problem(.badRequest(
                .invalidAccount, "account must be 1 to \(Self.maximumAccountBytes) bytes of UTF-8 without control characters"))
        }
        let now = ReceiptDate(clock()).millisecondsSince1970
        let outcome: ClaimOutcome
        let record: TransactionRecord?
        let appleCalls: [AppleCall]
        do {
            (outcome, record, appleCalls) = try ledger.withStore { (store) throws(LedgerError) in
                let outcome = try store.claim(transactionID: transactionID, account: account, at: now)
                if case .unknownTransaction = outcome { return (outcome, nil, []) }
                return (outcome, try store.transaction(id: transactionID), try store.appleCalls(transactionID: transactionID))
            }
        } catch {
            return problem(Self.storeProblem(error))
        }
        if appleCalls.contains(where: { $0.state == .pending }) { appleCallNudge.nudge() }
        // Which purchase was claimed, so that a backend grants the right product in the right environment.
        let purchase: [(key: String, value: JSONValue)] = [
            ("product_id", .string(record?.facts.productID)), ("environment", .string(record?.facts.environment)),
        ]
        switch outcome {
        case .granted(let first, let claimedAt):
            return json(
                status: .ok,
                .object([
                    ("transaction_id", .string(transactionID)), ("account", .string(account)),
                    ("claimed_at", Self.date(claimedAt)), ("first_claim", .bool(first)),
                ] + purchase + Self.appleCallMembers(appleCalls, transactionID: transactionID)))
        case .alreadyClaimed(let existing):
            return json(
                status: .conflict,
                .object([
                    ("error", ResultJSON.errorObject(
                        code: RequestProblem.Code.alreadyClaimed.rawValue,
                        message: "transaction \(transactionID) is claimed by another account")),
                    ("claim", Self.claimJSON(existing)), ("transaction_id", .string(transactionID)),
                ] + purchase))
        case .revoked(let date, let reason, let existing):
            return json(
                status: .conflict,
                .object([
                    ("error", ResultJSON.errorObject(
                        code: RequestProblem.Code.revoked.rawValue,
                        message: "transaction \(transactionID) was revoked by Apple: it grants nothing")),
                    ("transaction_id", .string(transactionID)),
                ] + purchase + [
                    ("revocation_date", Self.date(date)), ("revocation_reason", .integer(reason.map { Int64($0) })),
                    ("claim", existing.map(Self.claimJSON) ?? .null),
                ]))
        case .unknownTransaction:
            return problem(
                .notFound("the ledger has never seen transaction \(transactionID) verified: validate it first"))
        }
    }

    public static let maximumAccountBytes = 256

    /// What an account can be: 1 to 256 bytes of UTF-8 without control characters (NUL included), so that it can
    /// always be stored and always be shown.
    public static func isStorableAccount(_ account: String) -> Bool {
        guard (1...maximumAccountBytes).contains(account.utf8.count) else { return false }
        // Most accounts are ASCII, whose control characters are C0 and DEL; looking up each scalar's category costs
        // more than the rest of reading the path.
        if account.utf8.allSatisfy({ $0 < 0x80 }) { return account.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F } }
        return !account.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    // MARK: - JSON

    /// The `/v1/subscriptions/{id}` object with its status at `milliseconds` exactly (for `?at=` and accounts: pass
    /// facts ``SubscriptionFacts/asOf(_:)`` the same instant).
    static func subscriptionJSON(_ facts: SubscriptionFacts, at milliseconds: Int64) -> JSONValue {
        .building { sink in
            sink.beginObject()
            writeSubscriptionMembers(
                facts, latest: facts.latestTransactionIndex, at: milliseconds, to: &sink,
                transaction: { index, sink in sink.value(transactionJSON(facts.transactions[index])) },
                transactions: nil)
            sink.endObject()
        }
    }

    /// The members of ``subscriptionJSON(_:at:)``, each transaction written by `writeTransaction` from its index in
    /// `facts.transactions` (its normalized object, or that object's text kept from an earlier answer), and the
    /// `transactions` array by `writeTransactions` when given (its text kept whole), else one by one. `latest` is
    /// `facts.latestTransactionIndex`, which a caller that needs it too finds once.
    static func writeSubscriptionMembers<Sink: JSONSink>(
        _ facts: SubscriptionFacts, latest latestIndex: Int?, at milliseconds: Int64, to sink: inout Sink,
        transaction writeTransaction: (_ index: Int, inout Sink) -> Void,
        transactions writeTransactions: ((inout Sink) -> Void)?
    ) {
        let latest = latestIndex.map { facts.transactions[$0] }
        let renewal = facts.renewal
        // Known only through renewal info: nothing is owned, so nothing is active.
        let status = SubscriptionState(latest: latest, renewal: renewal, now: milliseconds) ?? .expired
        sink.key("original_transaction_id")
        sink.string(facts.originalTransactionID)
        sink.key("product_id")
        sink.string(latest?.productID ?? renewal?.productID)
        sink.key("status")
        sink.string(status.rawValue)
        sink.key("expires_date")
        sink.value(date(latest?.expiresDate))
        sink.key("auto_renew_status")
        sink.bool(renewal?.autoRenewStatus)
        sink.key("auto_renew_product_id")
        sink.string(renewal?.autoRenewProductID)
        sink.key("is_in_billing_retry_period")
        sink.bool(renewal?.isInBillingRetryPeriod)
        sink.key("grace_period_expires_date")
        sink.value(date(renewal?.gracePeriodExpiresDate))
        sink.key("expiration_intent")
        sink.integer(renewal?.expirationIntent.map { Int64($0) })
        sink.key("revocation_date")
        sink.value(date(latest?.revocationDate))
        sink.key("environment")
        sink.string(latest?.environment ?? renewal?.environment)
        sink.key("latest_transaction")
        if let latestIndex {
            writeTransaction(latestIndex, &sink)
        } else {
            sink.null()
        }
        sink.key("transactions")
        if let writeTransactions {
            writeTransactions(&sink)
        } else {
            sink.beginArray()
            for index in facts.transactions.indices { writeTransaction(index, &sink) }
            sink.endArray()
        }
        sink.key("last_notification")
        if let notification = facts.lastNotification {
            sink.value(
                .object([
                    ("notification_type", .string(notification.type)), ("subtype", .string(notification.subtype)),
                    ("notification_uuid", .string(notification.uuid)), ("signed_date", date(notification.signedDate)),
                ]))
        } else {
            sink.null()
        }
        sink.key("updated_at")
        sink.value(date(facts.updatedAt))
    }

    /// The StoreKit 2 issue's normalized keys, read from the payload the ledger stored, and `upgraded`: whether the
    /// ledger counts it as replaced by a higher product of its group.
    static func transactionJSON(_ facts: TransactionFacts) -> JSONValue {
        transactionJSON(facts, payload: LedgerFacts.payload(facts.payloadJSON))
    }

    /// ``transactionJSON(_:)`` with `facts.payloadJSON` already parsed, for a caller that reads it for more.
    static func transactionJSON(_ facts: TransactionFacts, payload: JSONValue) -> JSONValue {
        let normalized = JWSResultJSON.transaction(SignedTransaction(payload: payload))
        guard case .object(let members) = normalized else { return normalized }
        return .object(members + [("upgraded", .bool(facts.isUpgraded == true))])
    }

    /// `finished_at`: when Apple accepted Finish Transaction for this transaction (null until then); `apple_calls`:
    /// what claims queued for Apple about it (its finish, its original's app account token), without the token.
    static func appleCallMembers(_ calls: [AppleCall], transactionID: String) -> [(key: String, value: JSONValue)] {
        let finish = calls.first { $0.kind == .finishTransaction && $0.targetID == transactionID }
        return [
            ("finished_at", date(finish?.state == .done ? finish?.doneAt : nil)),
            ("apple_calls", .array(calls.map { call in
                .object([
                    ("kind", .string(call.kind.rawValue)), ("target_id", .string(call.targetID)),
                    ("state", .string(call.state.rawValue)), ("attempts", .integer(Int64(call.attempts))),
                    ("next_attempt_at", date(call.state == .pending ? call.nextAttemptAt : nil)),
                    ("done_at", date(call.doneAt)), ("last_status", .integer(call.lastStatus.map { Int64($0) })),
                    ("apple_error_code", .integer(call.appleErrorCode)), ("last_error", .string(call.lastError)),
                    ("created_at", date(call.createdAt)),
                ])
            })),
        ]
    }

    static func claimJSON(_ claim: Claim) -> JSONValue {
        .object([("account", .string(claim.account)), ("claimed_at", date(claim.claimedAt))])
    }

    static func date(_ milliseconds: Int64?) -> JSONValue {
        .string(milliseconds.map { ReceiptDate(millisecondsSince1970: $0).rfc3339 })
    }

    /// 503 either way, so that Apple (and any client) retries: nothing is lost while the store is missing or down.
    static func storeProblem(_ unavailability: PurchaseLedger.Unavailability) -> RequestProblem {
        switch unavailability {
        case .notConfigured:
            RequestProblem(
                status: .serviceUnavailable, code: .storeNotConfigured,
                message: "this receiptd keeps no ledger: add \"store\" to its config ({\"sqlite\": \"PATH\"} or "
                    + "{\"postgres\": \"CONNINFO\"})")
        case .unavailable(let error) where error.code == .busy:
            RequestProblem(
                status: .serviceUnavailable, code: .storeBusy,
                message: "the ledger is busy with other requests; try again in a second", retryAfterSeconds: 1)
        case .unavailable(let error):
            RequestProblem(
                status: .serviceUnavailable, code: .storeUnavailable,
                message: "the ledger cannot be reached (\(error.code.rawValue)); try again shortly")
        }
    }
}
