extension LedgerStoreInRecords {
    public func claimAppleCalls(holder: String, now: Int64, leaseUntil: Int64, limit: Int) throws(LedgerError)
        -> [AppleCall]
    {
        try records.claimAppleCalls(holder: holder, now: now, leaseUntil: leaseUntil, limit: limit)
    }

    public func finishAppleCall(callID: String, holder: String, result: AppleCallResult, at time: Int64)
        throws(LedgerError) -> Bool
    {
        try records.finishAppleCall(callID: callID, holder: holder, result: result, at: time)
    }

    public func appleCalls(transactionID: String) throws(LedgerError) -> [AppleCall] {
        try records.appleCalls(transactionID: transactionID)
    }

    public func appleCalls(in states: [AppleCallState], limit: Int) throws(LedgerError) -> [AppleCall] {
        try records.appleCalls(in: states, limit: limit)
    }
}
