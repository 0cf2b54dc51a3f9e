public import Foundation
public import ReceiptEngine
public import ReceiptForge

/// 2024-05-01T12:00:00Z: the "now" of every test that injects a clock.
public let fixedNow = Date(timeIntervalSince1970: 1_714_564_800)

/// Receipt test PKIs made once per test run (RSA key generation is the slow part).
public enum TestPKI {
    public static let now = Date()
    public static let day: TimeInterval = 86_400

    public static let standard: TestCertificateAuthority = try! .generate()

    /// A chain valid around `fixedNow`, for tests whose clock is fixed there.
    public static let atFixedNow: TestCertificateAuthority = try! .generate(.init(now: fixedNow))

    /// A chain valid from 3 years ago until yesterday: expired today, as every real Apple chain is.
    public static let expired: TestCertificateAuthority = {
        var options = TestCertificateAuthority.Options(now: now)
        options.notBefore = now.addingTimeInterval(-3 * 365 * day)
        options.notAfter = now.addingTimeInterval(-day)
        return try! .generate(options)
    }()

    public static let leafWithoutMarker: TestCertificateAuthority = {
        var options = TestCertificateAuthority.Options(now: now)
        options.leafHasMarker = false
        return try! .generate(options)
    }()

    public static let intermediateWithoutMarker: TestCertificateAuthority = {
        var options = TestCertificateAuthority.Options(now: now)
        options.intermediateHasMarker = false
        return try! .generate(options)
    }()

    public static func policy(
        _ authorities: [TestCertificateAuthority] = [standard], apps: [AppPolicy] = [],
        environments: Set<ReceiptEnvironment> = [.production, .sandbox]
    ) -> ValidationPolicy {
        ValidationPolicy(additionalTrustAnchors: authorities.map(\.rootAnchor), apps: apps, environments: environments)
    }

    public static func validator(
        _ authorities: [TestCertificateAuthority] = [standard], apps: [AppPolicy] = [],
        environments: Set<ReceiptEnvironment> = [.production, .sandbox]
    ) -> ReceiptValidator {
        ReceiptValidator(policy: policy(authorities, apps: apps, environments: environments))
    }

    public static func blueprint(created: Date = now.addingTimeInterval(-3600)) -> ReceiptBlueprint {
        ReceiptBlueprint(bundleID: "com.example.app", applicationVersion: "1.1", creationDate: ReceiptDate(created))
    }

    public static func date(_ text: String) -> ReceiptDate { ReceiptDate(rfc3339: text)! }
}
