import Ledger

/// The refund questions pass through uncounted: requests' ledger use is what ObservedStore watches.
extension ObservedStore {
    func storeConsumptionAnswer(transactionID: String, body: String, at time: Int64) throws(LedgerError)
        -> ConsumptionRequest?
    {
        try base.storeConsumptionAnswer(transactionID: transactionID, body: body, at: time)
    }
    func consumptionAnswer(transactionID: String) throws(LedgerError) -> ConsumptionAnswer? {
        try base.consumptionAnswer(transactionID: transactionID)
    }
    func consumptionRequest(transactionID: String) throws(LedgerError) -> ConsumptionRequest? {
        try base.consumptionRequest(transactionID: transactionID)
    }
    func consumptionRequests(openOnly: Bool, now: Int64, limit: Int) throws(LedgerError) -> [ConsumptionRequest] {
        try base.consumptionRequests(openOnly: openOnly, now: now, limit: limit)
    }
    func expireConsumptionRequests(now: Int64) throws(LedgerError) -> Int {
        try base.expireConsumptionRequests(now: now)
    }
    func claimConsumptionRequests(holder: String, now: Int64, leaseUntil: Int64, limit: Int)
        throws(LedgerError) -> [ClaimedConsumptionRequest]
    {
        try base.claimConsumptionRequests(holder: holder, now: now, leaseUntil: leaseUntil, limit: limit)
    }
    func finishConsumptionRequest(
        notificationUUID: String, holder: String, result: ConsumptionSendResult, at time: Int64
    ) throws(LedgerError) -> Bool {
        try base.finishConsumptionRequest(notificationUUID: notificationUUID, holder: holder, result: result, at: time)
    }
    func consumptionRequestCounts(now: Int64) throws(LedgerError) -> [ConsumptionRequestState: Int] {
        try base.consumptionRequestCounts(now: now)
    }
}
