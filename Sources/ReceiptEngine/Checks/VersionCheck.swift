/// The application version must be one the app's policy lists; an app that lists none accepts any (`skipped`).
public struct VersionCheck: Sendable {
    public let app: AppPolicy?

    public init(app: AppPolicy?) { self.app = app }

    public func evaluate(_ version: String) -> CheckVerdict {
        guard let app, !app.acceptedVersions.isEmpty else { return .skipped }
        return CheckVerdict(
            app.acceptedVersions.contains(version),
            else: ValidationError(.versionNotAccepted, "version \(version) of \(app.bundleID) is not accepted"))
    }
}
