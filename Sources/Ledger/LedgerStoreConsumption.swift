extension LedgerStoreInRecords {
    public func storeConsumptionAnswer(transactionID: String, body: String, at time: Int64) throws(LedgerError)
        -> ConsumptionRequest?
    {
        try records.storeConsumptionAnswer(transactionID: transactionID, body: body, at: time)
    }

    public func consumptionAnswer(transactionID: String) throws(LedgerError) -> ConsumptionAnswer? {
        try records.consumptionAnswer(transactionID: transactionID)
    }

    public func consumptionRequest(transactionID: String) throws(LedgerError) -> ConsumptionRequest? {
        try records.consumptionRequest(transactionID: transactionID)
    }

    public func consumptionRequests(openOnly: Bool, now: Int64, limit: Int) throws(LedgerError)
        -> [ConsumptionRequest]
    {
        try records.consumptionRequests(openOnly: openOnly, now: now, limit: limit)
    }

    public func expireConsumptionRequests(now: Int64) throws(LedgerError) -> Int {
        try records.expireConsumptionRequests(now: now)
    }

    public func claimConsumptionRequests(holder: String, now: Int64, leaseUntil: Int64, limit: Int)
        throws(LedgerError) -> [ClaimedConsumptionRequest]
    {
        try records.claimConsumptionRequests(holder: holder, now: now, leaseUntil: leaseUntil, limit: limit)
    }

    public func finishConsumptionRequest(
        notificationUUID: String, holder: String, result: ConsumptionSendResult, at time: Int64
    ) throws(LedgerError) -> Bool {
        try records.finishConsumptionRequest(
            notificationUUID: notificationUUID, holder: holder, result: result, at: time)
    }

    public func consumptionRequestCounts(now: Int64) throws(LedgerError) -> [ConsumptionRequestState: Int] {
        try records.consumptionRequestCounts(now: now)
    }
}
