import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine

/// The backend's users (issue 24): which purchases each one owns, what that lets it use, and how purchases come to be
/// linked to it. The account is the path's second segment, percent-decoded; it is never logged.
extension ReceiptRoutes {
    func accountResponse(to request: HTTPRequest, route: Route, accountSegment: Substring) -> HTTPResponse {
        guard let account = AccountPath.account(accountSegment) else {
            return problem(.badRequest(
                .invalidAccount,
                "the account in \(route.pathTemplate) must be 1 to \(Self.maximumAccountBytes) bytes of UTF-8 "
                    + "without control characters, percent-encoded in the path"))
        }
        guard ledger.isConfigured else { return problem(Self.storeProblem(.notConfigured)) }
        switch route {
        case .account: return accountReport(account, request)
        case .accountDeletion: return deleteAccount(account)
        case .appAccountToken: return registerAppAccountToken(request, account: account)
        case .accountPurchases: return postPurchase(request, account: account)
        default: preconditionFailure("\(route) is not an account route")
        }
    }

    // MARK: - GET /v1/accounts/{account}

    private func accountReport(_ account: String, _ request: HTTPRequest) -> HTTPResponse {
        let at: Int64
        do {
            at = try Self.evaluationInstant(request) ?? ReceiptDate(clock()).millisecondsSince1970
        } catch {
            return problem(error)
        }
        let read: (stamp: PurchaseLedger.MemoryStamp?, answer: [ArraySlice<UInt8>]?, snapshot: AccountSnapshot?)
        do {
            read = try ledger.withStore { (store) throws(LedgerError) in
                // Taken before the read: a write that ends during it changes the stamp the answer is kept with.
                let stamp = ledger.memoryStamp(in: store)
                if let stamp, let answer = accountAnswers.pieces(of: account, stamp: stamp, at: at) {
                    return (stamp, answer, nil)
                }
                return (stamp, nil, try ledger.account(account, in: store))
            }
        } catch {
            return problem(Self.storeProblem(error))
        }
        let closing = AccountReport.closing(at: at, validation: nil)[...]
        if let answer = read.answer { return json(status: .ok, pieces: answer + [closing]) }
        guard let snapshot = read.snapshot else { return problem(Self.accountNotFound) }
        let report = AccountReport(snapshot: snapshot, rules: entitlementRules, at: at, texts: transactionTexts)
        let answer = report.memberPieces(texts: transactionTexts)
        if let stamp = read.stamp, let span = report.unchangedSpan(rules: entitlementRules) {
            accountAnswers.keep(answer, of: account, stamp: stamp, span: span)
        }
        return json(status: .ok, pieces: answer + [closing])
    }

    /// `?at=`: the instant the rules are applied at (Unix milliseconds), sent as RFC 3339; nil when not asked.
    static func evaluationInstant(_ request: HTTPRequest) throws(RequestProblem) -> Int64? {
        guard let text = request.queryValue("at") else { return nil }
        guard let date = ReceiptDate(rfc3339: text) else {
            let shown = text.utf8.count <= 64 ? "\"\(text)\"" : "a value of \(text.utf8.count) bytes"
            throw .badRequest(
                .invalidDate, "at must be an RFC 3339 date like 2026-01-31T12:00:00Z, not \(shown)")
        }
        return date.millisecondsSince1970
    }

    static let accountNotFound = RequestProblem(
        status: .notFound, code: .accountNotFound,
        message: "the ledger holds nothing of this account: register an app account token or post a purchase for it "
            + "first")

    // MARK: - DELETE /v1/accounts/{account}

    private func deleteAccount(_ account: String) -> HTTPResponse {
        let deleted: Bool
        do {
            deleted = try ledger.withStore { (store) throws(LedgerError) in try store.deleteAccount(account) }
        } catch {
            return problem(Self.storeProblem(error))
        }
        guard deleted else { return problem(Self.accountNotFound) }
        return json(status: .ok, .object([("account", .string(account)), ("deleted", .bool(true))]))
    }

    // MARK: - PUT /v1/accounts/{account}/app_account_tokens/{uuid}

    private func registerAppAccountToken(_ request: HTTPRequest, account: String) -> HTTPResponse {
        let segment = request.path.split(separator: "/").last ?? ""
        guard let token = AccountPath.appAccountToken(segment) else {
            let shown = segment.utf8.count <= 64 ? "\"\(segment)\"" : "a segment of \(segment.utf8.count) bytes"
            return problem(.badRequest(
                .invalidAppAccountToken,
                "an app account token is a UUID like 6f2b9c1e-3a4d-4c5e-8f90-1a2b3c4d5e6f (the appAccountToken the "
                    + "app passes to StoreKit), not \(shown)"))
        }
        let now = ReceiptDate(clock()).millisecondsSince1970
        let outcome: AppAccountTokenOutcome
        do {
            outcome = try ledger.withStore { (store) throws(LedgerError) in
                try store.registerAppAccountToken(token, account: account, at: now)
            }
        } catch {
            return problem(Self.storeProblem(error))
        }
        switch outcome {
        case .registered(let first, let links):
            let linked = links.filter { $0.value == .linked }.map(\.key).sorted()
            return json(
                status: .ok,
                .object([
                    ("account", .string(account)), ("app_account_token", .string(token)),
                    ("registered", .bool(true)), ("first", .bool(first)),
                    ("linked", .array(linked.map(JSONValue.string))),
                ]))
        case .ownedByAnotherAccount:
            return problem(RequestProblem(
                status: .conflict, code: .tokenOwnedByAnotherAccount,
                message: "app account token \(token) is registered to another account; a token belongs to one "
                    + "account (the app passes each user's own token to StoreKit)"))
        }
    }

    // MARK: - POST /v1/accounts/{account}/purchases

    /// Validated and recorded exactly as `/v1/validate` does, then every original transaction in it linked to the
    /// account. An invalid body links nothing and answers as `/v1/validate` would; an original that the app's
    /// restore behavior keeps with another account refuses the whole post, linking nothing.
    private func postPurchase(_ request: HTTPRequest, account: String) -> HTTPResponse {
        // Validation's recording and the linking share one `store_timeout`, as one request's ledger work.
        LedgerDeadline.within(seconds: configuration.storeTimeout + PurchaseLedger.reasonGrace) { () -> HTTPResponse in
            validateAndLink(request, account: account)
        }
    }

    private func validateAndLink(_ request: HTTPRequest, account: String) -> HTTPResponse {
        let (validation, originals) = self.validation(of: request, wantsHTML: false, collectingOriginals: true)
        guard validation.status == .ok else { return validation }
        let now = ReceiptDate(clock()).millisecondsSince1970
        let rules = entitlementRules
        let outcome: Result<AccountSnapshot, KeptElsewhere>
        do {
            outcome = try ledger.withStore { (store) throws(LedgerError) -> Result<AccountSnapshot, KeptElsewhere> in
                // Checked before anything is linked, so that a refused post changes nothing at all.
                for original in originals {
                    if try Self.isKept(original, from: account, rules, now, in: store) {
                        return .failure(KeptElsewhere(originalTransactionID: original))
                    }
                }
                let outcomes = try store.link(
                    originalTransactionIDs: originals, to: account, source: .purchase, at: now)
                // Another request took one meanwhile: refused all the same.
                if let kept = outcomes.first(where: { $0.value == .ownedByAnotherAccount }) {
                    return .failure(KeptElsewhere(originalTransactionID: kept.key))
                }
                return .success(
                    try store.account(account)
                        ?? AccountSnapshot(record: .empty(account, at: now), subscriptions: [:]))
            }
        } catch {
            return problem(Self.storeProblem(error))
        }
        let linked: AccountSnapshot
        switch outcome {
        case .success(let snapshot): linked = snapshot
        case .failure(let kept):
            return problem(RequestProblem(
                status: .conflict, code: .ownedByAnotherAccount,
                message: "original transaction \(kept.originalTransactionID) belongs to another account, and its "
                    + "app's restore_behavior keeps it there: nothing was linked"))
        }
        let report = AccountReport(snapshot: linked, rules: entitlementRules, at: now, texts: transactionTexts)
        return json(status: .ok, pieces: report.jsonPieces(validation: validation.body, texts: transactionTexts))
    }

    private struct KeptElsewhere: Error {
        var originalTransactionID: String
    }

    /// Whether linking `original` to `account` would be refused: another account owns it and the app's restore
    /// behavior keeps it there.
    private static func isKept(
        _ original: String, from account: String, _ rules: EntitlementRules, _ now: Int64, in store: any LedgerStore
    ) throws(LedgerError) -> Bool {
        guard let owner = try store.owner(originalTransactionID: original), owner != account else { return false }
        let facts = try store.subscription(originalTransactionID: original)
        switch rules.restoreBehavior(of: facts?.transactions.lazy.compactMap(\.bundleID).first) {
        case .transfer: return false
        case .keepWithOriginal: return true
        case .transferIfNoActive: return facts.map { rules.grantsEntitlement($0, at: now) } ?? false
        }
    }
}

/// An account and an app account token as they appear in a path.
enum AccountPath {
    /// The percent-decoded segment, if it is an account receiptd can store: malformed escapes, bytes that are not
    /// UTF-8 and anything `isStorableAccount` refuses are not. `+` is itself in a path, not a space.
    static func account(_ segment: Substring) -> String? {
        guard let account = percentDecode(strict: segment), ReceiptRoutes.isStorableAccount(account) else { return nil }
        return account
    }

    /// The segment as a lowercase UUID (8-4-4-4-12 hex digits, any case), or nil.
    static func appAccountToken(_ segment: Substring) -> String? {
        let groups = segment.split(separator: "-", omittingEmptySubsequences: false)
        guard groups.map(\.utf8.count) == [8, 4, 4, 4, 12],
            groups.allSatisfy({ $0.utf8.allSatisfy { $0 < 0x80 && Character(Unicode.Scalar($0)).isHexDigit } })
        else { return nil }
        return segment.lowercased()
    }
}
