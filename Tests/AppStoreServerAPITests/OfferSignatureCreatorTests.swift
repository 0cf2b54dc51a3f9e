import AppStoreServerAPI
import CryptoFloor
import Foundation
import JSONText
import Testing

/// The creators against Apple's library (`JWSSignatureCreatorTests`, `PromotionalOfferSignatureCreatorTests`): the
/// same header and claims, and signatures that the key's public half verifies over exactly what Apple signs.
@Suite struct OfferSignatureCreatorTests {
    /// A test key and its public half (from a certificate the key signs for itself).
    struct TestKey {
        let creator: OfferSignatureCreator
        let publicKey: PublicKey

        init() throws {
            let privateKey = try PrivateKey.generateEC(.p256)
            creator = OfferSignatureCreator(
                key: try AppStoreConnectKey(
                    keyID: "keyId", issuerID: "issuerId", bundleID: "bundleId", privateKeyPEM: try privateKey.pem()))
            let certificate = try CertificateIssuer.issue(
                CertificateTemplate(
                    commonName: "offer key", serial: 1, notBefore: 0, notAfter: 4_000_000_000, isCA: false, markers: []),
                subjectKey: privateKey, issuer: nil, issuerKey: privateKey)
            publicKey = try #require(certificate.publicKey)
        }

        /// The header and claims of a compact JWS whose ES256 signature this key's public half verifies.
        func verified(_ jws: String) throws -> (header: [String: JSONValue], claims: [String: JSONValue]) {
            let parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            try #require(parts.count == 3)
            let signature = try #require(Base64.decode(Array(parts[2].utf8), alphabet: .url))
            #expect(publicKey.verifyES256(signature: signature, over: Array((parts[0] + "." + parts[1]).utf8)))
            func members(_ part: String) throws -> [String: JSONValue] {
                let json = try JSONValue(parsing: try #require(Base64.decode(Array(part.utf8), alphabet: .url)))
                guard case .object(let members) = json else { throw FixtureFailure("not an object") }
                return Dictionary(members.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
            }
            return (try members(parts[0]), try members(parts[1]))
        }
    }

    struct FixtureFailure: Error {
        var description: String
        init(_ description: String) { self.description = description }
    }

    static let header: [String: JSONValue] = ["typ": .string("JWT"), "kid": .string("keyId"), "alg": .string("ES256")]

    @Test func promotionalOfferV2_isApplesJWS() throws {
        let key = try TestKey()
        let jws = try key.creator.promotionalOffer(
            productID: "productId", offerIdentifier: "offerIdentifier", transactionID: "transactionId",
            nonce: "20FBA8A0-2B80-4A7D-A17F-85C1854727F8", issuedAt: 1_698_148_900)
        let (header, claims) = try key.verified(jws)
        #expect(header == Self.header)
        #expect(
            claims == [
                "nonce": .string("20FBA8A0-2B80-4A7D-A17F-85C1854727F8"), "iss": .string("issuerId"),
                "bid": .string("bundleId"), "aud": .string("promotional-offer"), "iat": .integer(1_698_148_900),
                "productId": .string("productId"), "offerIdentifier": .string("offerIdentifier"),
                "transactionId": .string("transactionId"),
            ])
    }

    @Test func promotionalOfferV2_withoutTransaction_leavesTheClaimOut() throws {
        let key = try TestKey()
        let jws = try key.creator.promotionalOffer(
            productID: "productId", offerIdentifier: "offerIdentifier", transactionID: nil, nonce: "N", issuedAt: 1)
        let claims = try key.verified(jws).claims
        #expect(claims["transactionId"] == nil)
        #expect(claims.count == 7)
    }

    @Test(arguments: [true, false])
    func introductoryOfferEligibility_isApplesJWS(allowed: Bool) throws {
        let key = try TestKey()
        let jws = try key.creator.introductoryOfferEligibility(
            productID: "productId", allowIntroductoryOffer: allowed, transactionID: "transactionId", nonce: "N",
            issuedAt: 1_698_148_900)
        let (header, claims) = try key.verified(jws)
        #expect(header == Self.header)
        #expect(
            claims == [
                "nonce": .string("N"), "iss": .string("issuerId"), "bid": .string("bundleId"),
                "aud": .string("introductory-offer-eligibility"), "iat": .integer(1_698_148_900),
                "productId": .string("productId"), "allowIntroductoryOffer": .bool(allowed),
                "transactionId": .string("transactionId"),
            ])
    }

    /// Apple's test vector's inputs; ECDSA is randomized, so the signature is checked by verifying it.
    @Test func promotionalOfferV1_signsApplesPayload_lowercasingTokenAndNonce() throws {
        let key = try TestKey()
        let signature = try key.creator.promotionalOfferV1(
            productID: "productId", offerIdentifier: "offerId", appAccountToken: "7E3FB20B-4CDB-47CC-936D-99D65F608138",
            nonce: "20FBA8A0-2B80-4A7D-A17F-85C1854727F8", timestamp: 1_698_148_900_000)
        let der = try #require(Base64.decode(Array(signature.utf8), alphabet: .standard, padded: true))
        let signed =
            "bundleId\u{2063}keyId\u{2063}productId\u{2063}offerId\u{2063}7e3fb20b-4cdb-47cc-936d-99d65f608138"
            + "\u{2063}20fba8a0-2b80-4a7d-a17f-85c1854727f8\u{2063}1698148900000"
        #expect(key.publicKey.verify(signature: der, over: Array(signed.utf8), digest: .sha256))
        #expect(!key.publicKey.verify(signature: der, over: Array(signed.uppercased().utf8), digest: .sha256))
    }

    @Test func promotionalOfferV1_withoutToken_signsAnEmptyField() throws {
        let key = try TestKey()
        let signature = try key.creator.promotionalOfferV1(
            productID: "p", offerIdentifier: "o", appAccountToken: nil, nonce: "n", timestamp: 5)
        let der = try #require(Base64.decode(Array(signature.utf8), alphabet: .standard, padded: true))
        let signed = "bundleId\u{2063}keyId\u{2063}p\u{2063}o\u{2063}\u{2063}n\u{2063}5"
        #expect(key.publicKey.verify(signature: der, over: Array(signed.utf8), digest: .sha256))
    }
}
