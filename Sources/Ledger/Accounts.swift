/// Accounts (issue 24): which of the backend's users owns which original transactions.
///
/// An original transaction has at most one owner. It gets one when a transaction carrying an `appAccountToken` an
/// account registered reaches the ledger (from any source, or when the token is registered after it), when an
/// account posts a purchase, or when an account claims a transaction. When another account already owns it, the app's
/// ``RestoreBehavior`` decides, inside the same database transaction as the write that caused it.
///
/// The rules the ledger keeps:
/// - **Links by token never take from another account.** When a transaction carrying a registered token is stored
///   (a notification, verified transactions from any source), or a token is registered while the ledger already holds
///   transactions carrying it, the original is linked (source `app_account_token`) only if nobody owns it; if another
///   account does, the outcome is ``AccountLinkOutcome/ownedByAnotherAccount`` and nothing changes. After user B
///   restored on A's Apple ID, every renewal still carries A's token: it must not move the purchase back. Tokens are
///   compared lowercase.
/// - **Explicit links** (a posted purchase, source `purchase`; a granted claim, source `claim`) apply the restore
///   behavior of the original's app (``AccountLinkRules/restoreBehavior``, by the bundle id of its transactions):
///   `transfer` moves the link; `transfer_if_no_active` moves it only when ``AccountLinkRules/grantsEntitlement``
///   says the purchase, as the moving transaction sees it, grants nothing at the link's time; `keep_with_original`
///   refuses. Every move is recorded as an ``AccountTransfer``. A claim is granted whatever its link's outcome.
/// - A token belongs to one account: registering it for another is ``AppAccountTokenOutcome/ownedByAnotherAccount``
///   and changes nothing; registering it again for the same account is `.registered(first: false, …)`.
/// - An account exists from its first token, link or transfer in; its `updatedAt` moves with every change to its
///   links, tokens or transfers (both accounts of a transfer). Deleting it forgets its links, tokens and transfers
///   (either side); Apple's facts and claims stay.
/// - Concurrent writers, in one process or several sharing a PostgreSQL database, end with exactly one owner per
///   original transaction and each move recorded once.

/// What happens when an account links an original transaction that another account owns (RevenueCat's "restore
/// behavior").
public enum RestoreBehavior: String, Sendable, Hashable, CaseIterable {
    /// The link moves; the previous account loses it.
    case transfer
    /// The link moves only when the previous account has no active entitlement from that original transaction.
    case transferIfNoActive = "transfer_if_no_active"
    /// Nothing moves; the new account is refused.
    case keepWithOriginal = "keep_with_original"
}

/// How an original transaction came to be linked to an account.
public enum AccountLinkSource: String, Sendable, Hashable, CaseIterable {
    /// A transaction carried an `appAccountToken` the account registered.
    case appAccountToken = "app_account_token"
    /// The account posted the purchase (`POST /v1/accounts/{account}/purchases`).
    case purchase
    /// The account claimed one of its transactions.
    case claim
}

/// What the ledger asks the service when linking, so that the rules about products and entitlements stay in the
/// service. Both are called inside the write transaction, with what that transaction sees.
public struct AccountLinkRules: Sendable {
    /// The restore behavior of the app a transaction belongs to (nil: the ledger does not know the bundle id).
    public var restoreBehavior: @Sendable (_ bundleID: String?) -> RestoreBehavior
    /// Whether this original transaction, as the ledger holds it now, grants any entitlement at `now` (Unix ms).
    public var grantsEntitlement: @Sendable (_ facts: SubscriptionFacts, _ now: Int64) -> Bool

    public init(
        restoreBehavior: @escaping @Sendable (_ bundleID: String?) -> RestoreBehavior,
        grantsEntitlement: @escaping @Sendable (_ facts: SubscriptionFacts, _ now: Int64) -> Bool
    ) {
        self.restoreBehavior = restoreBehavior
        self.grantsEntitlement = grantsEntitlement
    }

    /// `transfer` for every app, and nothing grants: for tools that do not serve (the ledger still links by token).
    public static let transferAlways = AccountLinkRules(restoreBehavior: { _ in .transfer }, grantsEntitlement: { _, _ in false })
}

/// What linking one original transaction to an account did.
public enum AccountLinkOutcome: Sendable, Hashable {
    /// Newly linked; nobody owned it.
    case linked
    /// This account already owned it: nothing changed.
    case alreadyLinked
    /// Moved from `previousAccount` (recorded as an ``AccountTransfer``).
    case transferred(previousAccount: String)
    /// Another account owns it and the restore behavior kept it there: nothing changed.
    case ownedByAnotherAccount
    /// The ledger holds no transaction of this original id.
    case unknownTransaction
}

/// What registering an `appAccountToken` did.
public enum AppAccountTokenOutcome: Sendable, Hashable {
    /// Registered now (`first`) or before by the same account; `links` says what happened to each original
    /// transaction already in the ledger that carries the token, by original transaction id.
    case registered(first: Bool, links: [String: AccountLinkOutcome])
    /// Another account registered this token: nothing changed.
    case ownedByAnotherAccount
}

/// One original transaction's move from one account to another.
public struct AccountTransfer: Sendable, Hashable {
    public var originalTransactionID: String
    public var fromAccount: String
    public var toAccount: String
    public var transferredAt: Int64
    public var source: AccountLinkSource
}

/// One original transaction an account owns.
public struct AccountLink: Sendable, Hashable {
    public var originalTransactionID: String
    public var linkedAt: Int64
    public var source: AccountLinkSource
}

/// Everything the ledger holds about one account; the service reads the facts of `links` (and of the originals it
/// transferred away, for "ended: transferred") with ``LedgerStore/subscription(originalTransactionID:)`` or
/// ``LedgerStore/transactions(originalTransactionIDs:)``.
public struct AccountRecord: Sendable, Hashable {
    public var account: String
    /// Original transactions it owns now, oldest link first (then by original transaction id).
    public var links: [AccountLink]
    /// Its registered `appAccountToken`s, lowercase.
    public var appAccountTokens: [String]
    /// Transfers to or from it, oldest first.
    public var transfers: [AccountTransfer]
    /// When the ledger first linked anything or registered a token for it.
    public var firstSeen: Int64
    /// When anything about its links or tokens last changed.
    public var updatedAt: Int64

    /// The originals an ``AccountSnapshot`` holds the facts of: those it owns, then those it transferred away.
    public var originalTransactionIDsWithFacts: [String] {
        links.map(\.originalTransactionID)
            + transfers.filter { $0.fromAccount == account }.map(\.originalTransactionID)
    }

    /// An account the ledger holds nothing for yet, as of `time`.
    public static func empty(_ account: String, at time: Int64) -> AccountRecord {
        AccountRecord(account: account, links: [], appAccountTokens: [], transfers: [], firstSeen: time, updatedAt: time)
    }
}

/// An account with the facts of its original transactions, read in one snapshot.
public struct AccountSnapshot: Sendable, Hashable {
    public var record: AccountRecord
    /// The facts of every original transaction in `record.links` and of every one it transferred away, by original
    /// transaction id.
    public var subscriptions: [String: SubscriptionFacts]

    public init(record: AccountRecord, subscriptions: [String: SubscriptionFacts]) {
        self.record = record
        self.subscriptions = subscriptions
    }
}
