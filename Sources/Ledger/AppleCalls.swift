/// Calls Apple must get even if receiptd restarts before they are made (issue 26): finishing a claimed transaction
/// and setting its app account token, kept in `apple_calls` of schema 7 until done.
///
/// A granted claim writes the calls its app's ``ClaimDuties`` imply in the claim's own database transaction, so a
/// crash between the claim and the call loses none; a worker claims the due ones under a lease, makes them, and
/// records Apple's outcome. Each call has one row (`finish:<transaction id>`, `token:<original transaction id>`):
/// claiming again, or a redelivered write, adds nothing.
public protocol LedgerAppleCalls: Sendable {
    /// Up to `limit` pending calls due at `now` that no live lease holds, the longest due first, leased to `holder`
    /// until `leaseUntil`.
    func claimAppleCalls(holder: String, now: Int64, leaseUntil: Int64, limit: Int) throws(LedgerError) -> [AppleCall]

    /// Records how a claimed call ended; false (and nothing written) when `holder` no longer holds it.
    func finishAppleCall(callID: String, holder: String, result: AppleCallResult, at time: Int64) throws(LedgerError)
        -> Bool

    /// The calls about one transaction: its Finish Transaction and its original's Set App Account Token.
    func appleCalls(transactionID: String) throws(LedgerError) -> [AppleCall]

    /// Calls in any of `states`, oldest first, at most `limit`.
    func appleCalls(in states: [AppleCallState], limit: Int) throws(LedgerError) -> [AppleCall]
}

/// What a granted claim owes Apple for one app (its `finish_on_claim` and `write_app_account_tokens`).
public struct ClaimDuties: Sendable, Hashable {
    public var finishTransaction: Bool
    public var setAppAccountToken: Bool

    public init(finishTransaction: Bool = false, setAppAccountToken: Bool = false) {
        self.finishTransaction = finishTransaction
        self.setAppAccountToken = setAppAccountToken
    }
}

/// What the ledger asks the service when a claim is granted, so that the apps' settings stay in the service.
public struct AppleCallRules: Sendable {
    /// The duties of the app with this bundle id.
    public var claimDuties: @Sendable (_ bundleID: String) -> ClaimDuties

    public init(claimDuties: @escaping @Sendable (_ bundleID: String) -> ClaimDuties) {
        self.claimDuties = claimDuties
    }

    /// No app owes Apple anything: for tools that do not serve.
    public static let none = AppleCallRules { _ in ClaimDuties() }
}

public enum AppleCallKind: String, Sendable, Hashable, CaseIterable {
    /// Finish Transaction; the target is the claimed transaction.
    case finishTransaction = "finish_transaction"
    /// Set App Account Token; the target is the original transaction, the argument the token.
    case setAppAccountToken = "set_app_account_token"
}

public enum AppleCallState: String, Sendable, Hashable, CaseIterable {
    /// Not made yet, or to be tried again at `nextAttemptAt`.
    case pending
    /// Apple accepted it at `doneAt`.
    case done
    /// Apple refused it for good, or every try failed: `lastError` and `appleErrorCode` say why.
    case failed
}

/// One call Apple must get.
public struct AppleCall: Sendable, Hashable {
    /// `finish:<transaction id>` or `token:<original transaction id>`.
    public var callID: String
    public var kind: AppleCallKind
    public var bundleID: String
    /// The App Store environment of the transaction (`Production`, `Sandbox`): which of Apple's hosts to call.
    public var environment: String
    public var targetID: String
    /// The app account token for `setAppAccountToken`; never logged.
    public var argument: String?
    public var state: AppleCallState
    public var attempts: Int
    public var nextAttemptAt: Int64
    /// The HTTP status of Apple's last answer, when one came.
    public var lastStatus: Int?
    public var appleErrorCode: Int64?
    public var lastError: String?
    public var createdAt: Int64
    public var doneAt: Int64?
}

/// How one try of a call ended.
public enum AppleCallResult: Sendable, Hashable {
    case done
    /// Try again at `at` (Unix ms).
    case retry(at: Int64, status: Int?, appleErrorCode: Int64?, error: String)
    /// Stop trying: Apple refused it for good, or the tries ran out.
    case failed(status: Int?, appleErrorCode: Int64?, error: String)
}
