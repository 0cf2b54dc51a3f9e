import ReceiptEngine
import Testing

/// The one evaluator receipts and StoreKit 2 data share: each rule decides which kinds it applies to, and the
/// verdict's error ranks as the format's answer always has.
struct SignedDataChecksTests {
    static let policy = ValidationPolicy(
        apps: [AppPolicy(bundleID: "com.example.app", acceptedVersions: ["2"], appAppleID: 42)],
        environments: [.production])

    static func claims(
        _ kind: SignedDataKind, bundleID: String? = "com.example.app", environment: String? = "Production",
        appAppleID: Int64? = 42, version: String? = "2", signedByXcode: Bool = false
    ) -> SignedClaims {
        SignedClaims(
            kind: kind, bundleID: bundleID, environment: environment.flatMap(ReceiptEnvironment.init(rawValue:)),
            environmentText: environment, appAppleID: appAppleID, applicationVersion: version,
            signedByXcode: signedByXcode)
    }

    static func evaluate(
        _ claims: SignedClaims, expectedBundleID: String? = nil
    ) -> (checks: ValidationChecks, error: ValidationError?) {
        var checks = ValidationChecks()
        var findings = CheckFindings(kind: claims.kind)
        SignedDataChecks(policy: policy, device: nil, expectedBundleID: expectedBundleID)
            .evaluate(claims, into: &checks, findings: &findings)
        return (checks, findings.firstError)
    }

    @Test func kindNames_areTheContract() {
        #expect(SignedDataKind.allCases.map(\.rawValue) == [
            "receipt", "transaction", "renewal_info", "app_transaction", "notification",
        ])
        // The order a payload's kind is told by.
        #expect(SignedDataKind.jwsKinds == [.transaction, .renewalInfo, .appTransaction, .notification])
        #expect(SignedDataKind.allCases.filter { $0.envelope == .pkcs7 } == [.receipt])
        #expect(ValidationError.kindMismatch(required: .receipt, found: .transaction).code == .kindMismatch)
    }

    @Test(arguments: SignedDataKind.allCases)
    func claimsMatchingThePolicy_pass(_ kind: SignedDataKind) {
        let (checks, error) = Self.evaluate(Self.claims(kind))
        #expect(error == nil)
        #expect(checks.bundleID == (kind == .renewalInfo ? .skipped : .passed))
        #expect(checks.environment == .passed)
        #expect(checks.appAppleID == (kind == .notification || kind == .appTransaction ? .passed : .skipped))
        #expect(checks.version == (kind == .receipt || kind == .appTransaction ? .passed : .skipped))
        #expect(checks.deviceHash == .skipped)
    }

    @Test func receiptWithoutEnvironment_isSkipped_butStoreKitDataIsRefused() {
        #expect(Self.evaluate(Self.claims(.receipt, environment: nil)).checks.environment == .skipped)
        let transaction = Self.evaluate(Self.claims(.transaction, environment: nil))
        #expect(transaction.error?.code == .environmentNotAccepted)
        #expect(transaction.error?.reason == .missing)
    }

    @Test func xcodeCertificate_vouchesForXcodeDataOnly() {
        let production = Self.evaluate(Self.claims(.transaction, signedByXcode: true))
        #expect(production.error?.code == .environmentNotAccepted)
        #expect(production.error?.reason == nil)
        #expect(production.checks.environment == .failed)
        let xcode = Self.evaluate(Self.claims(.transaction, environment: "Xcode", signedByXcode: true))
        #expect(xcode.error?.code == .environmentNotAccepted)
        #expect(xcode.checks.environment == .failed)
    }

    @Test func appAppleIDOfAnotherApp_isMismatch() {
        let result = Self.evaluate(Self.claims(.appTransaction, appAppleID: 7))
        #expect(result.error?.code == .appAppleIDMismatch)
        #expect(result.checks.appAppleID == .failed)
    }

    @Test func bundleAndEnvironmentBothWrong_rankAsEachFormatAlwaysHas() {
        // Receipts: the environment first; StoreKit 2: the app first, as Apple's libraries judge it.
        #expect(Self.evaluate(Self.claims(.receipt, bundleID: "com.other", environment: "Sandbox")).error?.code
            == .environmentNotAccepted)
        #expect(Self.evaluate(Self.claims(.transaction, bundleID: "com.other", environment: "Sandbox")).error?.code
            == .bundleIDMismatch)
    }

    @Test func expectedBundleID_replacesTheConfiguredApps() {
        let result = Self.evaluate(Self.claims(.receipt), expectedBundleID: "com.example.other")
        #expect(result.error?.code == .bundleIDMismatch)
        #expect(result.checks.version == .skipped)
    }
}
