public import AppStoreServerAPI
import Foundation
public import JSONText

/// Tests/e2e/fake-app-store-server.py run for one test: its own test CA, API key and port.
public final class FakeAppStoreServer: @unchecked Sendable {
    public static let keyID = "FAKEKEY001"
    public static let issuerID = "57246542-96fe-1a63-e053-0824d011072a"
    public static let bundleID = "com.example.app"

    public let directory: String
    private let process: Process
    public let port: Int

    public init(fixture: [(key: String, value: JSONValue)]) throws {
        directory = Scratch.newPath("fake-apple")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let base: [(key: String, value: JSONValue)] = [
            ("keyId", .string(Self.keyID)), ("issuerId", .string(Self.issuerID)), ("bundleId", .string(Self.bundleID)),
        ]
        try Self.write(.object(base + fixture), into: directory)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../e2e/fake-app-store-server.py").standardized.path
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, directory]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        var port: Int?
        for _ in 0..<300 {
            if let text = try? String(contentsOfFile: "\(directory)/port", encoding: .utf8) { port = Int(text) }
            if port != nil || !process.isRunning { break }
            usleep(50_000)
        }
        guard let port else {
            process.terminate()
            throw FixtureError(description: "the fake App Store Server API did not start")
        }
        self.port = port
    }

    /// Replaces what the fake knows (the identity keys are kept).
    public func update(_ fixture: [(key: String, value: JSONValue)]) throws {
        let base: [(key: String, value: JSONValue)] = [
            ("keyId", .string(Self.keyID)), ("issuerId", .string(Self.issuerID)), ("bundleId", .string(Self.bundleID)),
        ]
        try Self.write(.object(base + fixture), into: directory)
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
    }

    public var url: String { "https://localhost:\(port)" }
    public var caFile: String { "\(directory)/ca.pem" }
    public var keyFile: String { "\(directory)/key.p8" }

    public static func write(_ fixture: JSONValue, into directory: String) throws {
        try Data(fixture.serialized()).write(to: URL(fileURLWithPath: "\(directory)/fixture.json"))
    }

    public func key(bundleID: String = FakeAppStoreServer.bundleID, keyID: String = FakeAppStoreServer.keyID) throws -> AppStoreConnectKey {
        try AppStoreConnectKey(
            keyID: keyID, issuerID: Self.issuerID, bundleID: bundleID,
            privateKeyPEM: Array(try Data(contentsOf: URL(fileURLWithPath: keyFile))))
    }

    public func client(
        key: AppStoreConnectKey? = nil, caFile: String? = nil, timeoutSeconds: Int = 5, retryPolicy: RetryPolicy = .fast
    ) throws -> AppStoreServerAPIClient {
        AppStoreServerAPIClient(
            baseURL: url, environment: .production, key: try key ?? self.key(), caFile: caFile ?? self.caFile,
            timeoutSeconds: timeoutSeconds, maximumRequestsPerSecond: 0, retryPolicy: retryPolicy)
    }

    /// How many connections the fake has accepted.
    public var connectionsAccepted: Int {
        (try? String(contentsOfFile: "\(directory)/connections", encoding: .utf8)).flatMap { Int($0) } ?? 0
    }

    /// Every request the fake received, in order, as it logged them.
    public func requests() throws -> [JSONValue] {
        let text = (try? String(contentsOfFile: "\(directory)/requests.jsonl", encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").map { try JSONValue(parsing: Array($0.utf8)) }
    }
}

extension RetryPolicy {
    /// Retries without real waits worth the name.
    public static var fast: RetryPolicy {
        var policy = RetryPolicy()
        policy.maximumAttempts = 3
        policy.baseDelaySeconds = 0.01
        policy.maximumDelaySeconds = 0.02
        policy.maximumRetryAfterSeconds = 1
        return policy
    }
}
