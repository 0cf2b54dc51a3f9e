internal import CryptoFloor

/// Binds signed data to the device it was issued to; without a device id from the caller it is `skipped`.
public struct DeviceHashCheck: Sendable {
    public let device: DeviceIdentifier?

    public init(device: DeviceIdentifier?) { self.device = device }

    /// A receipt's attribute 5: SHA-1 of the device id's bytes, the opaque value (attribute 4) and the bundle id's
    /// encoding (attribute 2) exactly as signed.
    public func evaluate(receiptHash: [UInt8], opaqueValue: [UInt8], bundleIDEncoding: [UInt8]) -> CheckVerdict {
        guard let device else { return .skipped }
        return Self.verdict(Digest.sha1.hash(device.bytes + opaqueValue + bundleIDEncoding) == receiptHash, "receipt")
    }

    /// StoreKit 2's `deviceVerification`: SHA-384 of the lowercase nonce UUID followed by the lowercase device id
    /// UUID, as ASCII. Skipped when the signed data carries no device verification.
    public func evaluate(deviceVerification: [UInt8]?, nonce: String?, subject: String) -> CheckVerdict {
        guard let device, let deviceVerification, let nonce else { return .skipped }
        let input = nonce.lowercased() + device.formatted.lowercased()
        return Self.verdict(Digest.sha384.hash(Array(input.utf8)) == deviceVerification, subject)
    }

    private static func verdict(_ matches: Bool, _ subject: String) -> CheckVerdict {
        CheckVerdict(matches, else: ValidationError(.deviceHashMismatch, "the \(subject) was not issued to this device"))
    }
}
