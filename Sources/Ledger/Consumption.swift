/// Apple's refund questions (`CONSUMPTION_REQUEST`) and the backend's answers (issue 26): tables
/// `consumption_requests` and `consumption_answers` of schema 7.
public protocol LedgerConsumption: Sendable {
}
