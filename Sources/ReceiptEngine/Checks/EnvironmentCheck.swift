/// The environment the App Store signed for (Production, Sandbox, Xcode) must be one the policy accepts.
public struct EnvironmentCheck: SignedDataCheck {
    public let accepted: Set<ReceiptEnvironment>

    public init(accepted: Set<ReceiptEnvironment>) { self.accepted = accepted }

    public var name: CheckName { .environment }

    public func evaluate(_ claims: SignedClaims, app: AppPolicy?) -> CheckVerdict {
        guard let text = claims.environmentText else {
            if claims.kind.mayOmitEnvironment { return .skipped }
            return .failed(ValidationError(
                .environmentNotAccepted, "the \(claims.kind.subject) names no environment", reason: .missing))
        }
        guard let environment = claims.environment else {
            return .failed(ValidationError(.environmentNotAccepted, "the environment \(text) is not known"))
        }
        return CheckVerdict(
            accepted.contains(environment),
            else: ValidationError(
                .environmentNotAccepted, "\(environment.rawValue) \(claims.kind.subject)s are not accepted"))
    }
}

/// Xcode's StoreKit testing certificate is anyone's to make: it vouches for Xcode data only. Reported as the
/// environment check, which still decides whether Xcode data is accepted.
public struct XcodeSignerCheck: SignedDataCheck {
    public init() {}

    public var name: CheckName { .environment }

    public func evaluate(_ claims: SignedClaims, app: AppPolicy?) -> CheckVerdict {
        guard claims.signedByXcode else { return .skipped }
        return CheckVerdict(
            claims.environment == .xcode,
            else: ValidationError(
                .environmentNotAccepted,
                "Xcode's StoreKit testing certificate signed \(claims.environmentText ?? "unnamed") data"))
    }
}
