// PLACEHOLDER for the ledger-outbox branch: the outbox's SQL (schema 6) replaces these.
extension LedgerRecords {
    func claimDeliveries(webhook: String, holder: String, now: Int64, leaseUntil: Int64, limit: Int)
        throws(LedgerError) -> [ClaimedDelivery]
    { [] }

    func finishDelivery(
        eventID: String, webhook: String, holder: String, result: DeliveryResult, at time: Int64
    ) throws(LedgerError) -> Bool { false }

    func retryNow(webhook: String, at time: Int64) throws(LedgerError) -> Int { 0 }

    func events(_ query: OutboxQuery) throws(LedgerError) -> [OutboxEvent] { [] }

    func replay(_ replay: OutboxReplay, at time: Int64) throws(LedgerError) -> Int { 0 }

    func webhookBacklogs() throws(LedgerError) -> [WebhookBacklog] { [] }

    func pruneDeliveredEvents(deliveredBefore time: Int64) throws(LedgerError) -> Int { 0 }
}
