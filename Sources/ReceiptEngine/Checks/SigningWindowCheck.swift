/// The signing time must lie within the validity of every certificate on the signer's path. Apple's guidance: a
/// chain must have been valid when the data was signed, not now (every receipt's chain expires in time).
public struct SigningWindowCheck: Sendable {
    public let validFrom: ReceiptDate
    public let validUntil: ReceiptDate

    public init(validFrom: ReceiptDate, validUntil: ReceiptDate) {
        self.validFrom = validFrom
        self.validUntil = validUntil
    }

    /// - Parameter subject: what was signed, for the message ("receipt", "transaction").
    public func evaluate(signedAt signed: ReceiptDate, subject: String = "receipt") -> CheckVerdict {
        CheckVerdict(
            signed >= validFrom && signed <= validUntil,
            else: ValidationError(
                .certificateUntrusted,
                "the \(subject) was signed (\(signed.rfc3339)) outside its signing chain's validity "
                    + "(\(validFrom.rfc3339) to \(validUntil.rfc3339))",
                reason: .outsideValidity))
    }
}
