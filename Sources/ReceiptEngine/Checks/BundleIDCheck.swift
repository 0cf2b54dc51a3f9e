/// The bundle id must be the one the caller expects or, when the caller names none, one of the configured apps.
/// With neither, any bundle id passes unchecked (`skipped`). Signed data that names no app is refused whatever the
/// configuration, as Apple's libraries refuse it (INVALID_APP_IDENTIFIER): signed data for no app is no app's to
/// grant. Renewal info names no app and is `skipped`.
public struct BundleIDCheck: SignedDataCheck {
    public let apps: [AppPolicy]
    public let expectedBundleID: String?

    public init(apps: [AppPolicy], expectedBundleID: String? = nil) {
        self.apps = apps
        self.expectedBundleID = expectedBundleID
    }

    public var name: CheckName { .bundleID }

    public func evaluate(_ claims: SignedClaims, app: AppPolicy?) -> CheckVerdict {
        guard claims.kind.namesApp else { return .skipped }
        guard let bundleID = claims.bundleID else {
            return .failed(ValidationError(
                .bundleIDMismatch, "the \(claims.kind.subject) names no app (no bundleId)", reason: .missing))
        }
        if let expectedBundleID {
            return CheckVerdict(
                bundleID == expectedBundleID,
                else: ValidationError(
                    .bundleIDMismatch, "the \(claims.kind.subject) is for \(bundleID), not \(expectedBundleID)"))
        }
        guard !apps.isEmpty else { return .skipped }
        return CheckVerdict(
            app != nil,
            else: ValidationError(
                .bundleIDMismatch, "the \(claims.kind.subject) is for \(bundleID), which is not a configured app"))
    }

    /// The configured app `bundleID` names, when the caller accepts that bundle id: what the checks that depend on
    /// the app compare with.
    func app(named bundleID: String?) -> AppPolicy? {
        guard let bundleID, expectedBundleID == nil || bundleID == expectedBundleID else { return nil }
        return apps.first { $0.bundleID == bundleID }
    }
}
