public import Foundation
import JSONText
public import ReceiptEngine
public import ReceiptForge
public import StoreKitJWS

/// EC test PKIs made once per test run, and forged payloads of every kind.
public enum JWSPKI {
    public static let now = Date()
    public static let day: TimeInterval = 86_400
    public static let bundleID = "com.example.app"
    public static let appAppleID: Int64 = 1_234_567_890

    public static let standard: JWSTestAuthority = try! .generate()
    public static let xcode: JWSTestAuthority = try! .generateXcode()

    /// A chain valid around `fixedNow`, for tests whose clock is fixed there.
    public static let atFixedNow: JWSTestAuthority = try! .generate(.init(now: fixedNow))

    /// Never trusted; its root carries both of Apple's markers.
    public static let rogue: JWSTestAuthority = {
        var options = JWSTestAuthority.Options(now: now)
        options.rootHasMarkers = true
        return try! .generate(options)
    }()

    /// Valid from three years ago until yesterday: expired today, as Apple's older leaves are.
    public static let expired: JWSTestAuthority = {
        var options = JWSTestAuthority.Options(now: now)
        options.notBefore = now.addingTimeInterval(-3 * 365 * day)
        options.notAfter = now.addingTimeInterval(-day)
        return try! .generate(options)
    }()

    public static let leafWithoutMarker: JWSTestAuthority = {
        var options = JWSTestAuthority.Options(now: now)
        options.leafHasMarker = false
        return try! .generate(options)
    }()

    public static let intermediateWithoutMarker: JWSTestAuthority = {
        var options = JWSTestAuthority.Options(now: now)
        options.intermediateHasMarker = false
        return try! .generate(options)
    }()

    public static let app = AppPolicy(bundleID: bundleID, acceptedVersions: ["1.0", "1.1"], appAppleID: appAppleID)

    public static func verifier(
        _ authorities: [JWSTestAuthority] = [standard, expired, leafWithoutMarker, intermediateWithoutMarker],
        apps: [AppPolicy] = [app], environments: Set<ReceiptEnvironment> = [.production, .sandbox]
    ) -> JWSVerifier {
        JWSVerifier(
            policy: ValidationPolicy(
                additionalTrustAnchors: authorities.map(\.rootAnchor), apps: apps, environments: environments))
    }

    public static var signedDate: Date { now.addingTimeInterval(-3600) }

    public static func transaction(environment: String = "Sandbox", signed: Date = signedDate) -> TransactionBlueprint {
        TransactionBlueprint(bundleID: bundleID, signedDate: signed, environment: environment)
    }

    public static func renewalInfo(environment: String = "Sandbox") -> RenewalInfoBlueprint {
        RenewalInfoBlueprint(signedDate: signedDate, environment: environment)
    }

    public static func appTransaction(receiptType: String = "Production") -> AppTransactionBlueprint {
        var blueprint = AppTransactionBlueprint(bundleID: bundleID, receiptCreationDate: signedDate, receiptType: receiptType)
        blueprint.appAppleID = appAppleID
        return blueprint
    }

    public static func notification(
        type: String = "DID_RENEW", subtype: String? = nil, environment: String = "Production",
        by authority: JWSTestAuthority = standard
    ) throws -> NotificationBlueprint {
        var blueprint = NotificationBlueprint(
            type: type, subtype: subtype, bundleID: bundleID, signedDate: signedDate, environment: environment)
        blueprint.appAppleID = appAppleID
        blueprint.status = 1
        blueprint.signedTransactionInfo = try authority.sign(transaction(environment: environment).payload)
        blueprint.signedRenewalInfo = try authority.sign(renewalInfo(environment: environment).payload)
        return blueprint
    }

    /// A valid JWS of each kind signed by the standard chain.
    public static func forged(_ kind: SignedDataKind) throws -> String {
        switch kind {
        case .transaction: try standard.sign(transaction().payload)
        case .renewalInfo: try standard.sign(renewalInfo().payload)
        case .appTransaction: try standard.sign(appTransaction().payload)
        case .notification: try standard.sign(notification().payload)
        case .receipt: preconditionFailure("a receipt is not a JWS")
        }
    }
}
