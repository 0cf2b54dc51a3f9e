internal import CryptoFloor

/// An app whose receipts this validator accepts.
public struct AppPolicy: Sendable, Hashable {
    public var bundleID: String
    /// Accepted application versions (attribute 3); empty accepts any.
    public var acceptedVersions: [String]
    /// The app's Apple ID (App Store Connect's numeric id), compared with the `appAppleId` StoreKit 2 signs into
    /// Production notifications and app transactions; nil leaves that check `skipped`.
    public var appAppleID: Int64?

    public init(bundleID: String, acceptedVersions: [String] = [], appAppleID: Int64? = nil) {
        self.bundleID = bundleID
        self.acceptedVersions = acceptedVersions
        self.appAppleID = appAppleID
    }
}

/// What a receipt must satisfy to be valid, beyond a genuine signature.
public struct ValidationPolicy: Sendable {
    /// Roots trusted besides Apple Inc. Root CA (which is pinned by fingerprint and needs no file).
    public var additionalTrustAnchors: [TrustAnchor]
    /// Apps accepted; empty accepts any bundle id and the bundle-id check reads `skipped`.
    public var apps: [AppPolicy]
    /// Environments accepted. A receipt with no receipt type (pre-2013 receipts) is not refused for it.
    public var environments: Set<ReceiptEnvironment>
    /// Receipts larger than this are malformed without being parsed.
    public var maximumReceiptBytes: Int

    public static let defaultMaximumReceiptBytes = 4 * 1024 * 1024

    public init(
        additionalTrustAnchors: [TrustAnchor] = [], apps: [AppPolicy] = [],
        environments: Set<ReceiptEnvironment> = [.production, .sandbox],
        maximumReceiptBytes: Int = ValidationPolicy.defaultMaximumReceiptBytes
    ) {
        self.additionalTrustAnchors = additionalTrustAnchors
        self.apps = apps
        self.environments = environments
        self.maximumReceiptBytes = maximumReceiptBytes
    }
}
