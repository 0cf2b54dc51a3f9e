import Foundation

@testable import ReceiptEngine
import ReceiptForge

/// Test PKIs made once per test run (RSA key generation is the slow part).
enum TestPKI {
    static let now = Date()
    static let day: TimeInterval = 86_400

    static let standard: TestCertificateAuthority = try! .generate()

    /// A chain valid from 3 years ago until yesterday: expired today, as every real Apple chain is.
    static let expired: TestCertificateAuthority = {
        var options = TestCertificateAuthority.Options(now: now)
        options.notBefore = now.addingTimeInterval(-3 * 365 * day)
        options.notAfter = now.addingTimeInterval(-day)
        return try! .generate(options)
    }()

    static let leafWithoutMarker: TestCertificateAuthority = {
        var options = TestCertificateAuthority.Options(now: now)
        options.leafHasMarker = false
        return try! .generate(options)
    }()

    static let intermediateWithoutMarker: TestCertificateAuthority = {
        var options = TestCertificateAuthority.Options(now: now)
        options.intermediateHasMarker = false
        return try! .generate(options)
    }()

    static func policy(
        _ authorities: [TestCertificateAuthority] = [standard], apps: [AppPolicy] = [],
        environments: Set<ReceiptEnvironment> = [.production, .sandbox]
    ) -> ValidationPolicy {
        ValidationPolicy(additionalTrustAnchors: authorities.map(\.rootAnchor), apps: apps, environments: environments)
    }

    static func validator(
        _ authorities: [TestCertificateAuthority] = [standard], apps: [AppPolicy] = [],
        environments: Set<ReceiptEnvironment> = [.production, .sandbox]
    ) -> ReceiptValidator {
        ReceiptValidator(policy: policy(authorities, apps: apps, environments: environments))
    }

    static func blueprint(created: Date = now.addingTimeInterval(-3600)) -> ReceiptBlueprint {
        ReceiptBlueprint(bundleID: "com.example.app", applicationVersion: "1.1", creationDate: ReceiptDate(created))
    }

    static func date(_ text: String) -> ReceiptDate { ReceiptDate(rfc3339: text)! }
}
