internal import CryptoFloor

/// Binds signed data to the device it was issued to; without a device id from the caller, or when the data carries
/// no binding, it is `skipped`.
public struct DeviceHashCheck: SignedDataCheck {
    public let device: DeviceIdentifier?

    public init(device: DeviceIdentifier?) { self.device = device }

    public var name: CheckName { .deviceHash }

    public func evaluate(_ claims: SignedClaims, app: AppPolicy?) -> CheckVerdict {
        guard let device, let binding = claims.deviceBinding else { return .skipped }
        let matches: Bool
        switch binding {
        case .receiptHash(let hash, let opaqueValue, let bundleIDEncoding):
            // SHA-1 of the device id's bytes, the opaque value and the bundle id's encoding.
            matches = Digest.sha1.hash(device.bytes + opaqueValue + bundleIDEncoding) == hash
        case .verification(let verification, let nonce):
            // SHA-384 of the lowercase nonce UUID followed by the lowercase device id UUID, as ASCII.
            let input = nonce.lowercased() + device.formatted.lowercased()
            matches = Digest.sha384.hash(Array(input.utf8)) == verification
        }
        return CheckVerdict(
            matches,
            else: ValidationError(.deviceHashMismatch, "the \(claims.kind.subject) was not issued to this device"))
    }
}
