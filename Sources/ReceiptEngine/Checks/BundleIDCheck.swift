/// The bundle id must be the one the caller expects or, when the caller names none, one of the configured apps.
/// With neither, any bundle id passes unchecked (`skipped`).
public struct BundleIDCheck: Sendable {
    public let apps: [AppPolicy]
    public let expectedBundleID: String?

    public init(apps: [AppPolicy], expectedBundleID: String? = nil) {
        self.apps = apps
        self.expectedBundleID = expectedBundleID
    }

    /// The verdict, and the configured app the bundle id names (for the checks that depend on the app).
    /// - Parameter subject: what was signed, for the message ("receipt", "transaction").
    public func evaluate(_ bundleID: String, subject: String = "receipt") -> (verdict: CheckVerdict, app: AppPolicy?) {
        if let expectedBundleID {
            let matches = bundleID == expectedBundleID
            return (
                CheckVerdict(
                    matches,
                    else: ValidationError(.bundleIDMismatch, "the \(subject) is for \(bundleID), not \(expectedBundleID)")),
                matches ? apps.first { $0.bundleID == expectedBundleID } : nil
            )
        }
        guard !apps.isEmpty else { return (.skipped, nil) }
        let app = apps.first { $0.bundleID == bundleID }
        return (
            CheckVerdict(
                app != nil,
                else: ValidationError(.bundleIDMismatch, "the \(subject) is for \(bundleID), which is not a configured app")),
            app
        )
    }
}
