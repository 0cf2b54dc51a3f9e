extension LedgerStoreInRecords {
    public func record(renewalExtension record: RenewalExtensionRecord) throws(LedgerError) {
        try records.record(renewalExtension: record)
    }

    public func renewalExtensions(originalTransactionID: String) throws(LedgerError) -> [RenewalExtensionRecord] {
        try records.renewalExtensions(originalTransactionID: originalTransactionID)
    }

    public func renewalExtension(requestIdentifier: String) throws(LedgerError) -> RenewalExtensionRecord? {
        try records.renewalExtension(requestIdentifier: requestIdentifier)
    }
}
