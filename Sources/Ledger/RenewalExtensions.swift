/// Every renewal extension asked of Apple, with Apple's answer (issue 26): `renewal_extensions` of schema 7.
public protocol LedgerRenewalExtensions: Sendable {
}
