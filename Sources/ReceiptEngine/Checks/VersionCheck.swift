/// The application version (a receipt's attribute 3, an app transaction's `applicationVersion`) must be one the
/// app's policy lists; an app that lists none accepts any (`skipped`). Other kinds carry no version.
public struct VersionCheck: SignedDataCheck {
    public init() {}

    public var name: CheckName { .version }

    public func evaluate(_ claims: SignedClaims, app: AppPolicy?) -> CheckVerdict {
        guard claims.kind.carriesApplicationVersion, let app, !app.acceptedVersions.isEmpty else {
            return .skipped
        }
        let version = claims.applicationVersion ?? ""
        return CheckVerdict(
            app.acceptedVersions.contains(version),
            else: ValidationError(.versionNotAccepted, "version \(version) of \(app.bundleID) is not accepted"))
    }
}
