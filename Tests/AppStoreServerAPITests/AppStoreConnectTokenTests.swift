import AppStoreServerAPI
import CryptoFloor
import Foundation
import JSONText
import Testing

@Suite struct AppStoreConnectTokenTests {
    static func testKey(bundleID: String = "com.example.app") throws -> AppStoreConnectKey {
        try AppStoreConnectKey(
            keyID: "TESTKEY123", issuerID: "57246542-96fe-1a63-e053-0824d011072a", bundleID: bundleID,
            privateKeyPEM: try PrivateKey.generateEC(.p256).pem())
    }

    static func part(_ token: String, _ index: Int) throws -> JSONValue {
        var text = String(token.split(separator: ".", omittingEmptySubsequences: false)[index])
        text = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return try JSONValue(parsing: Array(try #require(Data(base64Encoded: text))))
    }

    @Test func token_carriesAppleHeaderAndClaims() throws {
        let signer = AppStoreConnectTokenSigner(key: try Self.testKey())
        let token = try signer.token(now: 1_700_000_000)
        let header = try Self.part(token, 0)
        let claims = try Self.part(token, 1)
        #expect(header["alg"] == .string("ES256"))
        #expect(header["kid"] == .string("TESTKEY123"))
        #expect(header["typ"] == .string("JWT"))
        #expect(claims["iss"] == .string("57246542-96fe-1a63-e053-0824d011072a"))
        #expect(claims["aud"] == .string("appstoreconnect-v1"))
        #expect(claims["bid"] == .string("com.example.app"))
        #expect(claims["iat"] == .integer(1_700_000_000))
        guard case .integer(let expiry)? = claims["exp"] else { Issue.record("no exp"); return }
        // Five minutes, as Apple's own libraries sign it.
        #expect(expiry == 1_700_000_000 + 300)
        let signature = String(token.split(separator: ".")[2])
        #expect(signature.count == 86)  // 64 bytes, base64url without padding
    }

    @Test func token_isReusedUntilShortlyBeforeExpiry() throws {
        let signer = AppStoreConnectTokenSigner(key: try Self.testKey())
        let first = try signer.token(now: 1_000_000)
        #expect(try signer.token(now: 1_000_000 + 60) == first)
        let renewed = try signer.token(now: 1_000_000 + AppStoreConnectTokenSigner.lifetimeSeconds - 60)
        #expect(renewed != first)
        #expect(try Self.part(renewed, 1)["iat"] == .integer(1_000_000 + AppStoreConnectTokenSigner.lifetimeSeconds - 60))
    }

    @Test(arguments: [
        Array("not a key".utf8),
        Array("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".utf8),
    ])
    func key_thatIsNotAP256PKCS8Key_isRefused(pem: [UInt8]) {
        #expect(throws: AppStoreServerAPIError.self) {
            try AppStoreConnectKey(keyID: "K", issuerID: "I", bundleID: "B", privateKeyPEM: pem)
        }
    }

    @Test func key_onP384_isRefusedWithItsCode() throws {
        let pem = try PrivateKey.generateEC(.p384).pem()
        do {
            _ = try AppStoreConnectKey(keyID: "K", issuerID: "I", bundleID: "B", privateKeyPEM: pem)
            Issue.record("a P-384 key was accepted")
        } catch {
            #expect(error.code == .keyInvalid)
            #expect(!error.message.contains("PRIVATE KEY"))
        }
    }
}
