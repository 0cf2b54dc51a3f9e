import CryptoFloor
import Foundation
import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine
import ReceiptForge
import StoreKitJWS
import TestSupport
import Testing

@testable import ReceiptService

/// An app's in-app purchase key for the offer routes, written where the configuration names it, and its public half.
struct OfferKey {
    static let keyID = "OFFERKEY01"
    static let issuerID = "57246542-96fe-1a63-e053-0824d011072a"

    let file: String
    let publicKey: PublicKey

    init() throws {
        let privateKey = try PrivateKey.generateEC(.p256)
        file = Scratch.newPath("offer-key.p8")
        try Data(try privateKey.pem()).write(to: URL(fileURLWithPath: file))
        let certificate = try CertificateIssuer.issue(
            CertificateTemplate(commonName: "offer key", serial: 1, notBefore: 0, notAfter: 4_000_000_000, isCA: false, markers: []),
            subjectKey: privateKey, issuer: nil, issuerKey: privateKey)
        publicKey = try #require(certificate.publicKey)
    }

    /// The JWS's claims, after its header and ES256 signature checked out with the public half.
    func verifiedClaims(_ jws: JSONValue?) throws -> JSONValue {
        let parts = try #require(jws?.stringValue).split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 3)
        let signature = try #require(Base64.decode(Array(parts[2].utf8), alphabet: .url))
        try #require(publicKey.verifyES256(signature: signature, over: Array((parts[0] + "." + parts[1]).utf8)))
        let header = try JSONValue(parsing: try #require(Base64.decode(Array(parts[0].utf8), alphabet: .url)))
        #expect(Set(header.keys) == ["alg", "kid", "typ"])
        #expect(header["alg"] == .string("ES256") && header["kid"] == .string(Self.keyID) && header["typ"] == .string("JWT"))
        return try JSONValue(parsing: try #require(Base64.decode(Array(parts[1].utf8), alphabet: .url)))
    }

    /// The ledger service's configuration with this key for its app, and a second app without one.
    func routes(_ ledger: PurchaseLedger = .none) -> ReceiptRoutes {
        var configuration = LedgerService.configuration
        configuration.apps[0].serverAPI = AppServerAPIKey(keyID: Self.keyID, issuerID: Self.issuerID, privateKeyFile: file)
        configuration.apps.append(.init(bundleID: "com.example.keyless"))
        let validator = configuration.makeValidator()
        return ReceiptRoutes(
            configuration: configuration, validator: validator, jwsVerifier: JWSVerifier(policy: validator.policy),
            ledger: ledger, metrics: ServiceMetrics(), clock: { fixedNow })
    }
}

extension ReceiptRoutes {
    func offer(_ path: String, _ body: String) -> HTTPResponse {
        handle(post("/v1/offers/\(path)", contentType: "application/json", text: body), on: .main)
    }
}

@Suite struct PromotionalOfferRouteTests {
    static let bundle = LedgerService.bundleID

    @Test func version2_byDefault_isApplesJWS_withTheNonceItAnswers() throws {
        let key = try OfferKey()
        let response = key.routes().offer(
            "promotional",
            #"{"bundle_id":"\#(Self.bundle)","product_id":"pro.monthly","offer_identifier":"WINBACK","transaction_id":"7000"}"#)
        #expect(response.status == .ok)
        let answer = try #require(response.json)
        #expect(answer.keys == ["version", "signature", "key_identifier", "nonce"])
        #expect(answer["version"] == .integer(2) && answer["key_identifier"] == .string(OfferKey.keyID))
        let nonce = try #require(answer["nonce"]?.stringValue)
        #expect(UUID(uuidString: nonce) != nil && nonce == nonce.lowercased())
        let claims = try key.verifiedClaims(answer["signature"])
        #expect(Set(claims.keys) == ["nonce", "iss", "bid", "aud", "iat", "productId", "offerIdentifier", "transactionId"])
        #expect(claims["nonce"] == .string(nonce) && claims["iss"] == .string(OfferKey.issuerID))
        #expect(claims["bid"] == .string(Self.bundle) && claims["aud"] == .string("promotional-offer"))
        #expect(claims["iat"] == .integer(Int64(fixedNow.timeIntervalSince1970)))
        #expect(claims["productId"] == .string("pro.monthly") && claims["offerIdentifier"] == .string("WINBACK"))
        #expect(claims["transactionId"] == .string("7000"))
    }

    @Test func version1_signsApplesPayload_withTheAnsweredNonceAndTimestamp() throws {
        let key = try OfferKey()
        let response = key.routes().offer(
            "promotional",
            #"{"bundle_id":"\#(Self.bundle)","product_id":"pro.monthly","offer_identifier":"WINBACK","version":1,"#
                + #""app_account_token":"7E3FB20B-4CDB-47CC-936D-99D65F608138"}"#)
        #expect(response.status == .ok)
        let answer = try #require(response.json)
        #expect(answer.keys == ["version", "key_identifier", "nonce", "timestamp", "signature"])
        let nonce = try #require(answer["nonce"]?.stringValue)
        #expect(UUID(uuidString: nonce) != nil && nonce == nonce.lowercased())
        let timestamp = ReceiptDate(fixedNow).millisecondsSince1970
        #expect(answer["timestamp"] == .integer(timestamp))
        let signed = [
            Self.bundle, OfferKey.keyID, "pro.monthly", "WINBACK", "7e3fb20b-4cdb-47cc-936d-99d65f608138", nonce,
            String(timestamp),
        ].joined(separator: "\u{2063}")
        let signature = try #require(answer["signature"]?.stringValue)
        let der = try #require(Base64.decode(Array(signature.utf8), alphabet: .standard, padded: true))
        #expect(key.publicKey.verify(signature: der, over: Array(signed.utf8), digest: .sha256))
    }

    @Test(arguments: [
        (#"{"product_id":"p","offer_identifier":"o"}"#, "bundle_id"),
        (#"{"bundle_id":"com.example.unknown","product_id":"p","offer_identifier":"o"}"#, "bundle_id"),
        (#"{"bundle_id":"com.example.app","offer_identifier":"o"}"#, "product_id"),
        (#"{"bundle_id":"com.example.app","product_id":"p","offer_identifier":""}"#, "offer_identifier"),
        (#"{"bundle_id":"com.example.app","product_id":"p","offer_identifier":"o\u2063p"}"#, "offer_identifier"),
        (#"{"bundle_id":"com.example.app","product_id":7,"offer_identifier":"o"}"#, "product_id"),
        (#"{"bundle_id":"com.example.app","product_id":"p","offer_identifier":"o","version":3}"#, "version"),
        (#"{"bundle_id":"com.example.app","product_id":"p","offer_identifier":"o","version":"2"}"#, "version"),
        (#"{"bundle_id":"com.example.app","product_id":"p","offer_identifier":"o","version":1,"app_account_token":"me"}"#,
         "app_account_token"),
        (#"{"bundle_id":"com.example.app","product_id":"p","offer_identifier":"o","version":1,"transaction_id":"1"}"#,
         "transaction_id"),
        (#"{"bundle_id":"com.example.app","product_id":"p","offer_identifier":"o","app_account_token":"7e3fb20b-4cdb-47cc-936d-99d65f608138"}"#,
         "app_account_token"),
    ])
    func wrongMember_isRefused_namingIt(body: String, field: String) throws {
        let response = try OfferKey().routes().offer("promotional", body)
        #expect(response.status == .badRequest)
        #expect(response.errorCode == "bad_request" && response.errorDetail == "invalid_field")
        #expect(response.json?["error"]?["field"] == .string(field))
    }

    @Test func appWithoutKey_isServerAPINotConfigured() throws {
        let response = try OfferKey().routes().offer(
            "promotional", #"{"bundle_id":"com.example.keyless","product_id":"p","offer_identifier":"o"}"#)
        #expect(response.status == .serviceUnavailable)
        #expect(response.errorCode == "server_api_not_configured")
    }

    @Test func bodyThatIsNotAnObject_isRefused() throws {
        let response = try OfferKey().routes().offer("promotional", "[1]")
        #expect(response.status == .badRequest && response.errorDetail == "not_a_json_object")
    }
}

/// Introductory offer eligibility decided from histories forged as StoreKit 2 JWS and stored in a real SQLite ledger.
@Suite struct IntroductoryOfferEligibilityRouteTests {
    static let bundle = LedgerService.bundleID
    static let pro = "21000001"
    static let basic = "21000002"

    /// A ledger and routes over it; `store` adds a verified transaction through `POST /v1/validate`.
    struct Scene {
        let key: OfferKey
        let ledger: any LedgerStore
        let routes: ReceiptRoutes

        init() throws {
            key = try OfferKey()
            ledger = try makeLedger(.sqlite)
            routes = key.routes(PurchaseLedger(store: ledger))
        }

        func store(
            _ id: String, original: String? = nil, product: String, group: String, day: Double, offerType: Int64? = nil,
            revoked: Bool = false, environment: String = "Sandbox"
        ) throws {
            var blueprint = SignedEvents.transaction(
                id, purchased: day, expires: day + 30, signed: day, revoked: revoked ? day + 1 : nil,
                original: original ?? id)
            blueprint.environment = environment
            blueprint.productID = product
            blueprint.edits.set.append(("subscriptionGroupIdentifier", .string(group)))
            if let offerType { blueprint.edits.set.append(("offerType", .integer(offerType))) }
            let jws = try JWSPKI.atFixedNow.sign(blueprint.payload)
            let response = routes.handle(
                post("/v1/validate", contentType: "application/json", text: #"{"jws":"\#(jws)"}"#), on: .main)
            try #require(response.status == .ok, "storing \(id): \(response.text)")
        }

        /// The eligibility answer for `transaction` and `product`, its JWS verified and its claims checked.
        func eligibility(_ transaction: String, _ product: String) throws -> JSONValue {
            let response = routes.offer(
                "introductory-eligibility",
                #"{"bundle_id":"\#(IntroductoryOfferEligibilityRouteTests.bundle)","product_id":"\#(product)","#
                    + #""transaction_id":"\#(transaction)"}"#)
            try #require(response.status == .ok, "\(response.text)")
            let answer = try #require(response.json)
            #expect(answer.keys == ["signature", "allow_introductory_offer", "decided_by", "nonce"])
            let claims = try key.verifiedClaims(answer["signature"])
            #expect(claims["aud"] == .string("introductory-offer-eligibility"))
            #expect(claims["productId"] == .string(product) && claims["transactionId"] == .string(transaction))
            #expect(claims["allowIntroductoryOffer"] == answer["allow_introductory_offer"])
            #expect(claims["nonce"] == answer["nonce"])
            return answer
        }
    }

    static func decidedBy(_ transaction: String, _ original: String, _ product: String, _ reason: String) -> JSONValue {
        .object([
            ("transaction_id", .string(transaction)), ("original_transaction_id", .string(original)),
            ("product_id", .string(product)), ("reason", .string(reason)),
        ])
    }

    @Test func transactionTheLedgerNeverSaw_isEligible() throws {
        let answer = try Scene().eligibility("123456789", "pro.monthly")
        #expect(answer["allow_introductory_offer"] == .bool(true) && answer["decided_by"] == .null)
    }

    @Test func introductoryOfferInTheGroup_decides_forAnotherProductOfTheGroup() throws {
        let scene = try Scene()
        try scene.store("7001", product: "pro.monthly", group: Self.pro, day: -60, offerType: 1)
        try scene.store("7002", original: "7001", product: "pro.monthly", group: Self.pro, day: -30)
        // Another customer's purchase is what places pro.yearly in the group.
        try scene.store("8001", product: "pro.yearly", group: Self.pro, day: -5)
        let answer = try scene.eligibility("7002", "pro.yearly")
        #expect(answer["allow_introductory_offer"] == .bool(false))
        #expect(answer["decided_by"] == Self.decidedBy("7001", "7001", "pro.monthly", "introductory_offer"))
    }

    @Test func paidPeriodInTheGroup_decides() throws {
        let scene = try Scene()
        try scene.store("7001", product: "pro.monthly", group: Self.pro, day: -40)
        let answer = try scene.eligibility("7001", "pro.monthly")
        #expect(answer["allow_introductory_offer"] == .bool(false))
        #expect(answer["decided_by"] == Self.decidedBy("7001", "7001", "pro.monthly", "paid_period"))
    }

    @Test func historyInAnotherGroup_isEligible() throws {
        let scene = try Scene()
        try scene.store("7001", product: "basic.monthly", group: Self.basic, day: -40, offerType: 1)
        try scene.store("8001", product: "pro.monthly", group: Self.pro, day: -5)
        let answer = try scene.eligibility("7001", "pro.monthly")
        #expect(answer["allow_introductory_offer"] == .bool(true) && answer["decided_by"] == .null)
    }

    @Test func productTheLedgerCannotPlace_onlyItsOwnTransactionsCount() throws {
        let scene = try Scene()
        try scene.store("7001", product: "pro.monthly", group: Self.pro, day: -40, offerType: 1)
        let answer = try scene.eligibility("7001", "pro.weekly")
        #expect(answer["allow_introductory_offer"] == .bool(true))
    }

    @Test func originalTransactionsOfTheSameAccount_areTheCustomers() throws {
        let scene = try Scene()
        try scene.store("7001", product: "basic.monthly", group: Self.basic, day: -10)
        try scene.store("7101", product: "pro.monthly", group: Self.pro, day: -90, offerType: 1)
        try scene.store("7102", original: "7101", product: "pro.monthly", group: Self.pro, day: -60)
        _ = try scene.ledger.link(originalTransactionIDs: ["7001", "7101"], to: "user-1", source: .purchase, at: 1)
        let answer = try scene.eligibility("7001", "pro.monthly")
        #expect(answer["decided_by"] == Self.decidedBy("7101", "7101", "pro.monthly", "introductory_offer"))
        // Nobody links 7201 to that account: its customer is only itself.
        try scene.store("7201", product: "basic.monthly", group: Self.basic, day: -10)
        #expect(try scene.eligibility("7201", "pro.monthly")["allow_introductory_offer"] == .bool(true))
    }

    @Test func refundedIntroductoryOffer_stillDecides() throws {
        let scene = try Scene()
        try scene.store("7001", product: "pro.monthly", group: Self.pro, day: -40, offerType: 1, revoked: true)
        let answer = try scene.eligibility("7001", "pro.monthly")
        #expect(answer["decided_by"] == Self.decidedBy("7001", "7001", "pro.monthly", "introductory_offer"))
    }

    @Test func callerDecides_withoutTheLedger() throws {
        let key = try OfferKey()
        let response = key.routes().offer(
            "introductory-eligibility",
            #"{"bundle_id":"\#(Self.bundle)","product_id":"pro.monthly","transaction_id":"1","allow_introductory_offer":false}"#)
        #expect(response.status == .ok)
        #expect(response.json?["decided_by"] == .null && response.json?["allow_introductory_offer"] == .bool(false))
        #expect(try key.verifiedClaims(response.json?["signature"])["allowIntroductoryOffer"] == .bool(false))
    }

    @Test func leftToReceiptd_withoutALedger_isStoreNotConfigured() throws {
        let response = try OfferKey().routes().offer(
            "introductory-eligibility", #"{"bundle_id":"\#(Self.bundle)","product_id":"p","transaction_id":"1"}"#)
        #expect(response.status == .serviceUnavailable && response.errorCode == "store_not_configured")
    }

    @Test(arguments: [
        (#"{"bundle_id":"com.example.app","product_id":"p"}"#, "transaction_id"),
        (#"{"bundle_id":"com.example.app","product_id":"p","transaction_id":"1","allow_introductory_offer":"yes"}"#,
         "allow_introductory_offer"),
    ])
    func wrongMember_isRefused_namingIt(body: String, field: String) throws {
        let response = try OfferKey().routes().offer("introductory-eligibility", body)
        #expect(response.status == .badRequest && response.errorDetail == "invalid_field")
        #expect(response.json?["error"]?["field"] == .string(field))
    }
}

/// The rules on histories no forged JWS makes: receipt entries, environments, family sharing.
@Suite struct IntroductoryOfferHistoryTests {
    static func decider(
        _ transactions: [TransactionFacts], product: String = Shop.yearly, environment: String? = "Production",
        groups: [String: String] = [Shop.monthly: "G", Shop.yearly: "G"]
    ) throws -> IntroductoryOfferHistory.Decider? {
        try IntroductoryOfferHistory(productID: product, bundleID: Shop.bundleID, environment: environment)
            .decider(among: transactions) { product throws(LedgerError) in groups[product] }
    }

    @Test func receiptTrial_isPlacedByItsProductsGroup() throws {
        let trial = Shop.transaction("1", product: Shop.monthly, purchase: Shop.t0, offer: [("isTrialPeriod", .bool(true))])
        #expect(try Self.decider([trial])?.reason == .introductoryOffer)
        #expect(try Self.decider([trial], groups: [:]) == nil)
    }

    @Test func earliestTransaction_decides() throws {
        let paid = Shop.transaction("2", product: Shop.monthly, purchase: Shop.t0 - Shop.day)
        let intro = Shop.transaction("3", product: Shop.yearly, purchase: Shop.t0, offer: [("offerType", .integer(1))])
        #expect(try Self.decider([intro, paid]) == .init(transaction: paid, reason: .paidPeriod))
    }

    @Test func otherEnvironmentsFamilySharingAndOneTimePurchases_areNotTheCustomersHistory() throws {
        let sandbox = Shop.transaction("4", product: Shop.yearly, purchase: Shop.t0, environment: "Sandbox")
        let shared = Shop.transaction("5", product: Shop.yearly, purchase: Shop.t0, ownership: "FAMILY_SHARED")
        let oneTime = Shop.transaction("6", product: Shop.yearly, type: Shop.nonConsumable, purchase: Shop.t0)
        #expect(try Self.decider([sandbox, shared, oneTime]) == nil)
        #expect(try Self.decider([sandbox], environment: "Sandbox")?.transaction.transactionID == "4")
    }
}
