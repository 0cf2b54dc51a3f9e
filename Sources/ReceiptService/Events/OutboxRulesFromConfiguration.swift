public import Ledger

// PLACEHOLDER for the events-mapping branch: the rules that turn ledger changes into events replace this.
extension ServiceConfiguration {
    /// What events each ledger write implies and which webhooks want them; `.none` without webhooks.
    public var outboxRules: OutboxRules { .none }
}
