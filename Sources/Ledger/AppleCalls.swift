/// Calls Apple must get even if receiptd restarts before they are made (issue 26): finishing a claimed transaction
/// and setting its app account token, kept in `apple_calls` of schema 7 until done.
public protocol LedgerAppleCalls: Sendable {
}
