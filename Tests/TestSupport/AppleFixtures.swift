public import Foundation
public import ReceiptEngine

/// The real receipts in `../shared/fixtures/apple/` (present in CI; read in place, never copied into the project).
public enum AppleFixtures {
    /// `RECEIPTD_APPLE_FIXTURES` overrides it: naming a missing folder shows what a clone without them runs.
    public static let directory: URL =
        ProcessInfo.processInfo.environment["RECEIPTD_APPLE_FIXTURES"].map { URL(fileURLWithPath: $0) }
        ?? URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("shared/fixtures/apple")

    public static var available: Bool {
        FileManager.default.fileExists(atPath: directory.appendingPathComponent("manifest.json").path)
    }

    /// One receipt of the manifest and what it holds.
    public struct Entry: Decodable, Sendable, CustomStringConvertible {
        public let file: String
        public let environment: String?
        public let bundle_id: String
        public let application_version: String
        public let original_application_version: String?
        public let creation_date: String
        public let expiration_date: String?
        public let in_app_count: Int
        public let product_ids: [String]
        public let expected_verdict: String
        public let device_id: String?
        public let device_hash_matches: Bool?
        /// A parameterized test's argument prints as its file.
        public var description: String { file }
    }

    /// The manifest's receipts, or why they cannot be read. Kept as a `Result` so that a manifest which stops
    /// decoding fails `manifest_decodesAndListsReceipts` instead of leaving the parameterized tests zero cases.
    public static let manifest: Result<[Entry], any Error> = Result {
        struct Manifest: Decodable { let receipts: [Entry] }
        let data = try Data(contentsOf: directory.appendingPathComponent("manifest.json"))
        return try JSONDecoder().decode(Manifest.self, from: data).receipts
    }

    public static let entries: [Entry] = (try? manifest.get()) ?? []

    public static func bytes(_ file: String) throws -> [UInt8] {
        Array(try Data(contentsOf: directory.appendingPathComponent(file)))
    }

    public static func path(_ file: String) -> String { directory.appendingPathComponent(file).path }

    public static func storeKitAnchor() throws -> TrustAnchor {
        try TrustAnchor(derEncoded: bytes(storeKitCertificate))
    }

    /// Production, macOS, no purchases; its device hash matches `arvDeviceID`.
    public static let productionReceipt = "receipts/arv_1.der"
    public static let productionBundleID = "com.ideasoncanvas.MindNodeMac"
    public static let productionDeviceID = "6c:40:08:b5:94:5e"
    /// Sandbox, iOS, 7 purchases.
    public static let sandboxReceipt = "receipts/arv_8.der"
    public static let sandboxBundleID = "com.mbaasy.ios.demo"
    /// Signed by a leaf Apple never issued receipts with: certificate_untrusted.
    public static let untrustedReceipt = "receipts/mikestew_1.der"
    public static let xcodeReceipt = "receipts/applelib_2.der"
    public static let storeKitCertificate = "certs/StoreKitTestCertificate_Xcode.cer"
}

/// The real Apple-signed JWS in `../shared/fixtures/apple-jws/`, beside the receipts' folder (so
/// `RECEIPTD_APPLE_FIXTURES` moves both; present in CI; never copied into the project).
public enum AppleJWSFixtures {
    public static let directory: URL = AppleFixtures.directory.deletingLastPathComponent()
        .appendingPathComponent("apple-jws")

    public static var manifestURL: URL { directory.appendingPathComponent("manifest.json") }
    public static var available: Bool { FileManager.default.fileExists(atPath: manifestURL.path) }

    public struct Expected: Decodable, Sendable {
        public let valid: Bool
        public let error: String?
    }

    /// One JWS of the manifest and what it holds.
    public struct Entry: Decodable, Sendable, CustomStringConvertible {
        public let file: String
        public let kind: String
        public let environment: String
        public let bundle_id: String?
        public let signed_date: String
        public let notification_type: String?
        public let subtype: String?
        public let notification_uuid: String?
        public let app_apple_id: Int64?
        public let nested: [String]?
        public let transaction_id: String?
        public let original_transaction_id: String?
        public let product_id: String?
        public let type: String?
        public let expires_date: String?
        public let purchase_date: String?
        public let auto_renew_status: Bool?
        public let application_version: String?
        public let original_application_version: String?
        public let expected: Expected
        /// A parameterized test's argument prints as its file.
        public var description: String { file }
    }

    struct Manifest: Decodable { let cases: [Entry] }

    /// Empty when the fixtures are absent (the suite is then disabled); a manifest that exists but does not decode
    /// is a failure, reported by `manifest_decodes`.
    public static let entries: [Entry] = (try? decodeManifest()) ?? []

    public static func decodeManifest() throws -> [Entry] {
        try JSONDecoder().decode(Manifest.self, from: Data(contentsOf: manifestURL)).cases
    }

    public static func text(_ file: String) throws -> String {
        String(decoding: try Data(contentsOf: directory.appendingPathComponent(file)), as: UTF8.self)
    }
}
