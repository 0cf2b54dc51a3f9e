#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import JSONText
public import Ledger
import ReceiptEngine
public import StoreKitJWS

/// What became of one signed notification (`LedgerIntake.takeNotification`).
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

/// The one way facts enter the ledger, however they arrived: notifications Apple posted or the sync fetched, the
/// receipts and StoreKit 2 data a caller validated, and what the App Store Server API answered (lookups, backfill).
/// Each source is verified, counted and logged the same way here, so the routes only ask and answer.
public struct LedgerIntake: Sendable {
    public let configuration: ServiceConfiguration
    public let ledger: PurchaseLedger
    let jwsVerifier: JWSVerifier
    public let metrics: ServiceMetrics
    /// App Store Server API clients, kept across requests (their tokens are reused).
    public let serverAPIClients: ServerAPIClients
    let serverAPIBackfill: ServerAPIBackfill
    /// Wakes the consumption sender when a refund question or its answer arrives.
    public let consumptionNudge = WorkerNudge()
    /// Wakes the webhooks' lanes after a write that may have stored events (their next poll is up to
    /// `idlePoll` away).
    public let webhookNudge = WebhookNudge()
    /// Where each fact's fate is written (stored, duplicate, refused, not stored); nil logs none.
    let log: ServiceLog?
    let clock: @Sendable () -> Date

    init(
        configuration: ServiceConfiguration, ledger: PurchaseLedger, jwsVerifier: JWSVerifier, metrics: ServiceMetrics,
        log: ServiceLog?, clock: @escaping @Sendable () -> Date
    ) {
        self.configuration = configuration
        self.ledger = ledger
        self.jwsVerifier = jwsVerifier
        self.metrics = metrics
        self.serverAPIClients = ServerAPIClients(configuration: configuration, metrics: metrics.serverAPI)
        self.serverAPIBackfill = ServerAPIBackfill(configuration: configuration)
        self.log = log
        self.clock = clock
    }

    // MARK: - Notifications

    /// Verifies one signed notification, records it in the ledger and logs its fate: the one path of Apple's
    /// deliveries (`POST /v1/notifications`) and of what `receiptd store sync` fetches from Apple's notification
    /// history, so a notification counts the same however it arrived. The ledger must be configured.
    ///
    /// Each verified one is logged with its uuid, the key of Apple's notification history, so an operator can tell a
    /// refund that never arrived from one that arrived and was not stored. A refused one logs only its code: until
    /// verified, its fields are anyone's words.
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
            let answer = ReceiptRoutes.storeProblem(error)
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
        if write == .stored { webhookNudge.nudge() }
        if write == .stored, facts.type == "CONSUMPTION_REQUEST" { consumptionNudge.nudge() }
        if let transaction = facts.transaction { backfill([transaction]) }
        return .recorded(facts, write)
    }

    private static func memberWithInvalidID(_ facts: NotificationFacts) -> String? {
        PathID.isValid(facts.uuid)
            ? memberWithInvalidID(facts.transaction.map { [$0] } ?? [], renewal: facts.renewal) : "notificationUUID"
    }

    /// The member of the first id that is not an id (`PathID`) among verified facts, or nil. These ids key the ledger
    /// and go on to Apple (backfill), where a NUL fails every write and a dot-segment changes Apple's path.
    static func memberWithInvalidID(_ transactions: [TransactionFacts], renewal: RenewalFacts?) -> String? {
        for transaction in transactions {
            if !PathID.isValid(transaction.transactionID) { return "transactionId" }
            if !PathID.isValid(transaction.originalTransactionID) { return "originalTransactionId" }
        }
        if let renewal, !PathID.isValid(renewal.originalTransactionID) { return "originalTransactionId" }
        return nil
    }

    /// `memberWithInvalidID` for every purchase of a receipt, recorded or not: Apple's `verifyReceipt` reads the
    /// ledger by all of them.
    static func memberWithInvalidID(of receipt: Receipt) -> String? {
        for purchase in receipt.inAppPurchases {
            if let id = purchase.transactionID, !PathID.isValid(id) { return "transactionId" }
            if let id = purchase.originalTransactionID, !PathID.isValid(id) { return "originalTransactionId" }
        }
        return nil
    }

    // MARK: - Validated data

    /// Records the entries of a valid receipt, then reads back its subscriptions as the ledger knows them.
    func take(_ result: ValidationResult, now: Date) -> LedgerView {
        var facts: [TransactionFacts] = []
        if result.isValid, let decoded = result.receipt {
            facts = LedgerFacts.transactions(of: decoded, where: ledger.needsRecording(source: .receipt))
        }
        if let member = Self.memberWithInvalidID(facts, renewal: nil) { return LedgerView(refusing: member) }
        return view(
            recording: facts, source: .receipt, subscriptions: result.subscriptions,
            inputAsOf: result.receipt?.creationDate, now: now)
    }

    /// Records a valid StoreKit 2 transaction or renewal info, then reads back its subscription as the ledger knows it.
    func take(_ result: JWSValidationResult, now: Date) -> LedgerView {
        var transactions: [TransactionFacts] = []
        var renewal: RenewalFacts?
        if result.isValid, let payload = result.payload, let kind = result.kind {
            switch kind {
            case .transaction:
                transactions = LedgerFacts.transaction(payload, text: result.payloadText).map { [$0] } ?? []
            case .renewalInfo: renewal = LedgerFacts.renewal(payload, text: result.payloadText)
            // A notification is taken only from Apple's delivery (`takeNotification`), where its uuid makes it one;
            // an app transaction and a receipt's JWS have nothing of a purchase to record.
            case .notification, .appTransaction, .receipt: break
            }
        }
        if let member = Self.memberWithInvalidID(transactions, renewal: renewal) { return LedgerView(refusing: member) }
        return view(
            recording: transactions, renewal: renewal, source: .jws, subscriptions: result.subscriptions,
            inputAsOf: result.signedDate, now: now)
    }

    /// Records a receipt's entries for Apple's `verifyReceipt`, then reads back everything known of its original
    /// transactions. A receipt with an id that is not an id never gets here: `AppleVerifyReceipt.status` answers it
    /// 21002 first.
    func takeForApple(_ receipt: Receipt) throws(PurchaseLedger.Unavailability) -> AppleLedgerState {
        let facts = LedgerFacts.transactions(of: receipt, where: ledger.needsRecording(source: .receipt))
        var seen = Set<String>()
        let originals = receipt.inAppPurchases.compactMap { $0.originalTransactionID ?? $0.transactionID }
            .filter { seen.insert($0).inserted }
        let state = try ledger.withStore { (store) throws(LedgerError) in
            try ledger.record(facts, source: .receipt, in: store)
            return AppleLedgerState(
                transactions: try store.transactions(originalTransactionIDs: originals),
                renewals: try store.renewalInfos(originalTransactionIDs: originals))
        }
        if !facts.isEmpty { webhookNudge.nudge() }
        return state
    }

    /// Records what a verdict verified, then reads each of its subscriptions back: what the ledger knows that is
    /// newer than the input (a renewal, a refund) wins, and says so. A ledger that cannot be reached changes nothing
    /// in the verdict; the answer says `"ledger": "unavailable"`.
    func view(
        recording transactions: [TransactionFacts], renewal: RenewalFacts? = nil, source: TransactionSource,
        subscriptions: [SubscriptionStatus], inputAsOf: ReceiptDate?, now: Date
    ) -> LedgerView {
        let inputSource = source == .receipt ? "receipt" : "jws"
        let fromInput = { (status: SubscriptionStatus) in
            LedgerView.subscriptionEntry(status, source: inputSource, asOf: inputAsOf)
        }
        let known: [(SubscriptionStatus, SubscriptionFacts?)]
        do {
            known = try ledger.withStore { (store) throws(LedgerError) in
                try ledger.record(transactions, source: source, in: store)
                if let renewal { try ledger.record(renewal: renewal, source: source, in: store) }
                var known: [(SubscriptionStatus, SubscriptionFacts?)] = []
                for status in subscriptions {
                    known.append(
                        (status, try ledger.subscription(originalTransactionID: status.originalTransactionID, in: store)))
                }
                return known
            }
        } catch {
            return LedgerView(availability: "unavailable", subscriptions: subscriptions.map(fromInput))
        }
        if !transactions.isEmpty || renewal != nil { webhookNudge.nudge() }
        backfill(transactions)
        let nowMilliseconds = ReceiptDate(now).millisecondsSince1970
        let entries = known.map { status, facts -> JSONValue in
            guard let facts, let latest = facts.latestTransaction, let expires = latest.expiresDate else {
                return fromInput(status)
            }
            let ledgerAsOf = max(
                facts.transactions.map(\.signedDate).max() ?? .min, facts.renewal?.signedDate ?? .min)
            // Newer facts, or a later renewal the input does not show (a receipt made before its delivery arrived).
            guard ledgerAsOf > inputAsOf?.millisecondsSince1970 ?? .min
                || expires > status.expiresDate.millisecondsSince1970
            else { return fromInput(status) }
            let state = facts.status(at: nowMilliseconds)
            return LedgerView.subscriptionEntry(
                SubscriptionStatus(
                    productID: latest.productID, originalTransactionID: facts.originalTransactionID,
                    latestTransactionID: latest.transactionID, expiresDate: ReceiptDate(millisecondsSince1970: expires),
                    isActive: state == .active || state == .inGracePeriod, isCancelled: state == .revoked),
                source: "ledger", asOf: ReceiptDate(millisecondsSince1970: ledgerAsOf))
        }
        return LedgerView(availability: "available", subscriptions: entries)
    }

    // MARK: - The App Store Server API's answers

    /// The signed transactions that pass verification, as ledger facts; each refused one is counted and logged.
    func verifiedTransactionFacts(_ signed: [String]) -> [TransactionFacts] {
        var facts: [TransactionFacts] = []
        for text in signed {
            let result = jwsVerifier.verify(text, requiredKind: .transaction, at: clock())
            metrics.recordVerdict(kind: result.kind, error: result.error)
            guard result.isValid, let payload = result.payload,
                let transaction = LedgerFacts.transaction(payload, text: result.payloadText)
            else {
                var fields = [("code", result.error?.code.rawValue ?? "malformed_jws")]
                if let reason = result.error?.reason { fields.append(("reason", reason.rawValue)) }
                log?.event("server api transaction refused", fields)
                continue
            }
            facts.append(transaction)
        }
        return facts
    }

    /// The transactions a lookup found that pass verification, recorded in the ledger when there is one.
    func takeLookedUp(_ signed: [String]) -> [TransactionFacts] {
        let facts = verifiedTransactionFacts(signed)
        if ledger.isConfigured, !facts.isEmpty {
            do {
                try ledger.withStore { (store) throws(LedgerError) in try ledger.record(facts, source: .serverAPI, in: store) }
                webhookNudge.nudge()
            } catch {
                log?.event("server api transactions not stored", [("code", ReceiptRoutes.storeProblem(error).code.rawValue)])
            }
        }
        return facts
    }
}

/// A verdict's subscriptions as the ledger sees them, and whether it could be asked.
struct LedgerView {
    /// `available` or `unavailable`.
    var availability: String
    var subscriptions: [JSONValue]
    /// The member of an id in the input that is not an id (`PathID`): nothing was recorded, and the request is 400
    /// `invalid_id`, as for a notification carrying one.
    var refusedIDMember: String? = nil

    init(availability: String, subscriptions: [JSONValue]) {
        self.availability = availability
        self.subscriptions = subscriptions
    }

    init(refusing member: String) {
        self.init(availability: "unavailable", subscriptions: [])
        refusedIDMember = member
    }

    /// The verdict with its `subscriptions` replaced and `ledger` added.
    func applied(to verdict: JSONValue) -> JSONValue {
        guard case .object(var members) = verdict else { return verdict }
        if let index = members.firstIndex(where: { $0.key == "subscriptions" }) {
            members[index].value = .array(subscriptions)
        }
        members.append(("ledger", .string(availability)))
        return .object(members)
    }

    /// A `subscriptions` entry with where it came from and as of when.
    static func subscriptionEntry(_ status: SubscriptionStatus, source: String, asOf: ReceiptDate?) -> JSONValue {
        guard case .object(let members) = JWSResultJSON.subscription(status) else { return .null }
        return .object(members + [("source", .string(source)), ("as_of", .string(asOf?.rfc3339))])
    }
}
