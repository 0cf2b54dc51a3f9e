/// One rule signed data must meet beyond a genuine signature, whatever its format: it reads the claims and says
/// `passed`, `failed` with the error, or `skipped` when it has nothing to compare. Like swift-certificates'
/// `VerifierPolicy`, an expected failure is a verdict, never a thrown error, and each rule decides for itself which
/// kinds of signed data it applies to.
public protocol SignedDataCheck: Sendable {
    /// The member of the verdict's `checks` the outcome is reported under; several checks may share one.
    var name: CheckName { get }

    /// - Parameter app: the configured app the claims name, when the caller accepts it (see `SignedDataChecks`).
    func evaluate(_ claims: SignedClaims, app: AppPolicy?) -> CheckVerdict
}

/// The members of a verdict's `checks`.
public enum CheckName: Sendable, Hashable, CaseIterable {
    case signature, bundleID, appAppleID, environment, version, deviceHash
}

/// What the checks compare, read from a receipt or a StoreKit 2 payload once its signature verified.
public struct SignedClaims: Sendable {
    public var kind: SignedDataKind
    public var bundleID: String?
    public var environment: ReceiptEnvironment?
    /// The environment as signed, also when it is none receiptd knows (for the message).
    public var environmentText: String?
    public var appAppleID: Int64?
    public var applicationVersion: String?
    public var deviceBinding: DeviceBinding?
    /// Signed with Xcode's StoreKit testing certificate rather than by the App Store.
    public var signedByXcode: Bool

    public init(
        kind: SignedDataKind, bundleID: String?, environment: ReceiptEnvironment?, environmentText: String?,
        appAppleID: Int64? = nil, applicationVersion: String? = nil, deviceBinding: DeviceBinding? = nil,
        signedByXcode: Bool = false
    ) {
        self.kind = kind
        self.bundleID = bundleID
        self.environment = environment
        self.environmentText = environmentText
        self.appAppleID = appAppleID
        self.applicationVersion = applicationVersion
        self.deviceBinding = deviceBinding
        self.signedByXcode = signedByXcode
    }
}

/// How signed data binds itself to the device it was issued to.
public enum DeviceBinding: Sendable {
    /// A receipt's attribute 5, with the opaque value (attribute 4) and the bundle id's encoding (attribute 2)
    /// exactly as signed.
    case receiptHash([UInt8], opaqueValue: [UInt8], bundleIDEncoding: [UInt8])
    /// StoreKit 2's `deviceVerification` (decoded) and `deviceVerificationNonce`.
    case verification([UInt8], nonce: String)
}

/// The checks every kind of signed data goes through, for one policy and one caller: the one place receipts and
/// StoreKit 2 data are judged beyond their signature.
public struct SignedDataChecks: Sendable {
    private let bundle: BundleIDCheck
    public let checks: [any SignedDataCheck]

    /// - Parameters:
    ///   - device: the device the data must be bound to; without it the device check is `skipped`.
    ///   - expectedBundleID: when given, the bundle id must equal it instead of naming one of the policy's apps.
    public init(policy: ValidationPolicy, device: DeviceIdentifier?, expectedBundleID: String? = nil) {
        bundle = BundleIDCheck(apps: policy.apps, expectedBundleID: expectedBundleID)
        // The Xcode rule comes before the environment check: when both fail, its message says more.
        checks = [
            bundle, AppAppleIDCheck(), XcodeSignerCheck(), EnvironmentCheck(accepted: policy.environments),
            VersionCheck(), DeviceHashCheck(device: device),
        ]
    }

    /// Runs every check, folds each outcome into its member of `outcomes` and notes failures in `findings`.
    public func evaluate(_ claims: SignedClaims, into outcomes: inout ValidationChecks, findings: inout CheckFindings) {
        let app = bundle.app(named: claims.bundleID)
        for check in checks {
            outcomes.fold(check.name, findings.record(check.evaluate(claims, app: app)))
        }
    }
}
