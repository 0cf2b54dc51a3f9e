internal import CryptoFloor
internal import JSONText

/// The signatures StoreKit asks an app's server for, made with the app's in-app purchase key exactly as Apple's
/// server library makes them (`PromotionalOfferV2SignatureCreator`, `IntroductoryOfferEligibilitySignatureCreator`,
/// `PromotionalOfferSignatureCreator`). Pure functions of the key, the claims, the nonce and the time, so that tests
/// compare them exactly; they never call Apple.
public struct OfferSignatureCreator: Sendable {
    public let key: AppStoreConnectKey

    public init(key: AppStoreConnectKey) { self.key = key }

    /// A promotional offer signature, version 2: the compact JWS StoreKit 2 takes as
    /// `Product.PurchaseOption.promotionalOffer(_:compactJWS:)`.
    /// - Parameters:
    ///   - transactionID: any transaction of the customer (an `appTransactionId` too); left out of the claims when nil.
    ///   - nonce: a fresh UUID, lowercase as Apple's Python library makes it (`str(uuid.uuid4())`; its Swift library's
    ///     `uuidString` is uppercase: StoreKit takes either).
    ///   - issuedAt: `iat`, seconds since 1970.
    public func promotionalOffer(
        productID: String, offerIdentifier: String, transactionID: String?, nonce: String, issuedAt: Int64
    ) throws(AppStoreServerAPIError) -> String {
        var claims = baseClaims(audience: "promotional-offer", nonce: nonce, issuedAt: issuedAt)
        claims += [("productId", .string(productID)), ("offerIdentifier", .string(offerIdentifier))]
        if let transactionID { claims.append(("transactionId", .string(transactionID))) }
        return try key.compactJWS(claims: claims, purpose: "the promotional offer")
    }

    /// An introductory offer eligibility signature: the compact JWS StoreKit 2 takes as
    /// `Product.PurchaseOption.introductoryOfferEligibility(compactJWS:)`, which overrides the App Store's own verdict.
    public func introductoryOfferEligibility(
        productID: String, allowIntroductoryOffer: Bool, transactionID: String, nonce: String, issuedAt: Int64
    ) throws(AppStoreServerAPIError) -> String {
        var claims = baseClaims(audience: "introductory-offer-eligibility", nonce: nonce, issuedAt: issuedAt)
        claims += [
            ("productId", .string(productID)), ("allowIntroductoryOffer", .bool(allowIntroductoryOffer)),
            ("transactionId", .string(transactionID)),
        ]
        return try key.compactJWS(claims: claims, purpose: "the introductory offer eligibility")
    }

    /// A promotional offer signature, version 1 (StoreKit 1's `SKPaymentDiscount`, StoreKit 2's
    /// `promotionalOffer(offerID:keyID:nonce:signature:timestamp:)`): ECDSA P-256 with SHA-256 over the U+2063-joined
    /// bundle id, key id, product id, offer id, app account token (lowercase, or empty), nonce and timestamp, as
    /// base64 DER.
    /// - Parameters:
    ///   - nonce: a fresh UUID, lowercase (Apple's library lowercases it; StoreKit signs it lowercase).
    ///   - timestamp: milliseconds since 1970; StoreKit accepts the signature for 24 hours from it.
    public func promotionalOfferV1(
        productID: String, offerIdentifier: String, appAccountToken: String?, nonce: String, timestamp: Int64
    ) throws(AppStoreServerAPIError) -> String {
        let payload = [
            key.bundleID, key.keyID, productID, offerIdentifier, (appAccountToken ?? "").lowercased(), nonce.lowercased(),
            String(timestamp),
        ].joined(separator: "\u{2063}")
        do {
            return Base64.encode(try key.signingKey.sign(Array(payload.utf8), digest: .sha256), alphabet: .standard)
        } catch {
            throw AppStoreServerAPIError(code: .keyInvalid, message: "signing the promotional offer failed: \(error)")
        }
    }

    private func baseClaims(audience: String, nonce: String, issuedAt: Int64) -> [(key: String, value: JSONValue)] {
        [
            ("nonce", .string(nonce)), ("iss", .string(key.issuerID)), ("bid", .string(key.bundleID)),
            ("aud", .string(audience)), ("iat", .integer(issuedAt)),
        ]
    }
}
