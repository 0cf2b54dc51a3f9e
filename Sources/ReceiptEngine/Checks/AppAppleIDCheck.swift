/// Production notifications and app transactions sign the app's Apple ID (`appAppleId`): it must be the configured
/// app's. Sandbox and Xcode data carry none worth comparing, and an app configured without one is `skipped`.
public struct AppAppleIDCheck: SignedDataCheck {
    public init() {}

    public var name: CheckName { .appAppleID }

    public func evaluate(_ claims: SignedClaims, app: AppPolicy?) -> CheckVerdict {
        guard claims.kind.signsAppAppleID, claims.environment == .production,
            let expected = app?.appAppleID
        else { return .skipped }
        return CheckVerdict(
            claims.appAppleID == expected,
            else: ValidationError(
                .appAppleIDMismatch,
                "the \(claims.kind.subject) is for app \(claims.appAppleID.map(String.init) ?? "(none)"), "
                    + "not \(expected)"))
    }
}
