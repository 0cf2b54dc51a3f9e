import Ledger

extension ObservedStore {
    func claimAppleCalls(holder: String, now: Int64, leaseUntil: Int64, limit: Int) throws(LedgerError) -> [AppleCall] {
        try base.claimAppleCalls(holder: holder, now: now, leaseUntil: leaseUntil, limit: limit)
    }
    func finishAppleCall(callID: String, holder: String, result: AppleCallResult, at time: Int64) throws(LedgerError)
        -> Bool
    {
        try base.finishAppleCall(callID: callID, holder: holder, result: result, at: time)
    }
    func appleCalls(transactionID: String) throws(LedgerError) -> [AppleCall] {
        try base.appleCalls(transactionID: transactionID)
    }
    func appleCalls(in states: [AppleCallState], limit: Int) throws(LedgerError) -> [AppleCall] {
        try base.appleCalls(in: states, limit: limit)
    }
}
