#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AppStoreServerAPI
public import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine

/// Which signature StoreKit asked the app's server for.
public enum OfferSignatureKind: String, Sendable, CaseIterable {
    /// `POST /v1/offers/promotional`.
    case promotional
    /// `POST /v1/offers/introductory-eligibility`.
    case introductoryEligibility = "introductory-eligibility"
}

/// Each app's offer signature creator, made from its `server_api` key once, when the routes are made: the promotional
/// offer route answers on the event loop, which must never read a file nor parse a key.
final class OfferSigners: Sendable {
    private let creators: [String: Result<OfferSignatureCreator, AppStoreServerAPIError>]

    init(configuration: ServiceConfiguration) {
        var creators: [String: Result<OfferSignatureCreator, AppStoreServerAPIError>] = [:]
        for app in configuration.serverAPIApps {
            guard let settings = app.serverAPI else { continue }
            do throws(AppStoreServerAPIError) {
                let key = try ServiceConfiguration.serverAPIKey(settings, bundleID: app.bundleID)
                creators[app.bundleID] = .success(OfferSignatureCreator(key: key))
            } catch {
                creators[app.bundleID] = .failure(error)
            }
        }
        self.creators = creators
    }

    /// The creator of a configured app; nil when it has no `server_api` key.
    func creator(bundleID: String) -> Result<OfferSignatureCreator, AppStoreServerAPIError>? { creators[bundleID] }
}

extension ReceiptRoutes {
    /// `POST /v1/offers/promotional`.
    func signPromotionalOffer(_ request: HTTPRequest) -> HTTPResponse {
        offerResponse(.promotional, body: request.body)
    }

    /// `POST /v1/offers/introductory-eligibility`.
    func signIntroductoryOfferEligibility(_ request: HTTPRequest) -> HTTPResponse {
        offerResponse(.introductoryEligibility, body: request.body)
    }

    /// What the offer routes answer for a body, without their authorization: also `receiptd offers sign`'s answer.
    /// Deciding eligibility from the ledger waits on it; nothing here waits on Apple.
    public func offerResponse(_ kind: OfferSignatureKind, body: [UInt8]) -> HTTPResponse {
        do throws(RequestProblem) {
            let members = try Self.offerBody(body)
            switch kind {
            case .promotional: return json(status: .ok, try promotionalOffer(members))
            case .introductoryEligibility: return json(status: .ok, try introductoryOfferEligibility(members))
            }
        } catch {
            return problem(error)
        }
    }

    private func promotionalOffer(_ body: JSONValue) throws(RequestProblem) -> JSONValue {
        let creator = try offerCreator(body)
        let productID = try Self.offerText(body, "product_id")
        let offerIdentifier = try Self.offerText(body, "offer_identifier")
        let version: Int64
        switch body["version"] {
        case nil, .null?: version = 2
        case .integer(let number)? where number == 1 || number == 2: version = number
        default: throw .invalidField("version", "version must be 1 (StoreKit 1's SKPaymentDiscount) or 2 (a JWS, the default)")
        }
        let transactionID = try Self.optionalOfferText(body, "transaction_id")
        let appAccountToken = try Self.optionalOfferText(body, "app_account_token")
        if let appAccountToken, UUID(uuidString: appAccountToken) == nil {
            throw .invalidField("app_account_token", "app_account_token must be a UUID, as StoreKit's appAccountToken")
        }
        // Version 1 signs no transaction, version 2 no app account token (StoreKit 2 passes it as a purchase option
        // of its own): a member the signature leaves out would look bound to the offer when it is not.
        if version == 1, transactionID != nil {
            throw .invalidField("transaction_id", "version 1 signs no transaction id: leave it out, or ask for version 2")
        }
        if version == 2, appAccountToken != nil {
            throw .invalidField(
                "app_account_token",
                "version 2 signs no app account token (StoreKit 2 passes it as its own purchase option): leave it out, "
                    + "or ask for version 1")
        }
        do throws(AppStoreServerAPIError) {
            if version == 1 {
                let nonce = UUID().uuidString.lowercased()
                let timestamp = ReceiptDate(clock()).millisecondsSince1970
                let signature = try creator.promotionalOfferV1(
                    productID: productID, offerIdentifier: offerIdentifier, appAccountToken: appAccountToken,
                    nonce: nonce, timestamp: timestamp)
                return .object([
                    ("version", .integer(1)), ("key_identifier", .string(creator.key.keyID)), ("nonce", .string(nonce)),
                    ("timestamp", .integer(timestamp)), ("signature", .string(signature)),
                ])
            }
            let nonce = UUID().uuidString.lowercased()
            let signature = try creator.promotionalOffer(
                productID: productID, offerIdentifier: offerIdentifier, transactionID: transactionID, nonce: nonce,
                issuedAt: Self.seconds(clock()))
            return .object([
                ("version", .integer(2)), ("signature", .string(signature)),
                ("key_identifier", .string(creator.key.keyID)), ("nonce", .string(nonce)),
            ])
        } catch {
            throw Self.signingProblem(error)
        }
    }

    private func introductoryOfferEligibility(_ body: JSONValue) throws(RequestProblem) -> JSONValue {
        let creator = try offerCreator(body)
        let productID = try Self.offerText(body, "product_id")
        let transactionID = try Self.offerText(body, "transaction_id")
        let allowed: Bool
        let decider: IntroductoryOfferHistory.Decider?
        switch body["allow_introductory_offer"] {
        case .bool(let flag)?:
            (allowed, decider) = (flag, nil)
        case nil, .null?:
            decider = try introductoryOfferDecider(
                bundleID: creator.key.bundleID, productID: productID, transactionID: transactionID)
            allowed = decider == nil
        default:
            throw .invalidField(
                "allow_introductory_offer", "allow_introductory_offer must be true or false, or left out for receiptd "
                    + "to decide from the customer's history")
        }
        let nonce = UUID().uuidString.lowercased()
        let signature: String
        do throws(AppStoreServerAPIError) {
            signature = try creator.introductoryOfferEligibility(
                productID: productID, allowIntroductoryOffer: allowed, transactionID: transactionID, nonce: nonce,
                issuedAt: Self.seconds(clock()))
        } catch {
            throw Self.signingProblem(error)
        }
        let decidedBy: JSONValue =
            decider.map { decider in
                .object([
                    ("transaction_id", .string(decider.transaction.transactionID)),
                    ("original_transaction_id", .string(decider.transaction.originalTransactionID)),
                    ("product_id", .string(decider.transaction.productID)), ("reason", .string(decider.reason.rawValue)),
                ])
            } ?? .null
        return .object([
            ("signature", .string(signature)), ("allow_introductory_offer", .bool(allowed)), ("decided_by", decidedBy),
            ("nonce", .string(nonce)),
        ])
    }

    /// The customer's history, read in one pass of ledger calls. A transaction the ledger never saw (a new customer,
    /// or an `appTransactionId`) has no history: eligible, as StoreKit says of a new customer.
    private func introductoryOfferDecider(
        bundleID: String, productID: String, transactionID: String
    ) throws(RequestProblem) -> IntroductoryOfferHistory.Decider? {
        do {
            return try ledger.withStore { (store) throws(LedgerError) -> IntroductoryOfferHistory.Decider? in
                guard let record = try store.transaction(id: transactionID) else { return nil }
                let original = record.facts.originalTransactionID
                var history: [TransactionFacts]
                if let owner = try store.owner(originalTransactionID: original), let snapshot = try store.account(owner) {
                    history = snapshot.record.links.flatMap { snapshot.subscriptions[$0.originalTransactionID]?.transactions ?? [] }
                    // Linked after the snapshot's owner was read, or moved meanwhile: still the customer's.
                    if !snapshot.record.links.contains(where: { $0.originalTransactionID == original }) {
                        history += try store.transactions(originalTransactionIDs: [original])
                    }
                } else {
                    history = try store.transactions(originalTransactionIDs: [original])
                }
                let rules = IntroductoryOfferHistory(
                    productID: productID, bundleID: bundleID, environment: record.facts.environment)
                return try rules.decider(among: history) { (product) throws(LedgerError) in
                    try store.subscriptionGroup(productID: product, bundleID: bundleID)
                }
            }
        } catch {
            throw Self.storeProblem(error)
        }
    }

    private func offerCreator(_ body: JSONValue) throws(RequestProblem) -> OfferSignatureCreator {
        let bundleID = try Self.offerText(body, "bundle_id")
        guard configuration.app(bundleID: bundleID) != nil else {
            throw .invalidField("bundle_id", "bundle_id \(bundleID) is not one of this server's apps (apps[].bundle_id)")
        }
        switch offerSigners.creator(bundleID: bundleID) {
        case .success(let creator)?: return creator
        case .failure(let error)?:
            throw RequestProblem(
                status: .serviceUnavailable, code: .serverAPINotConfigured,
                message: "\(bundleID)'s server_api key cannot sign: \(error.message)")
        case nil:
            throw RequestProblem(
                status: .serviceUnavailable, code: .serverAPINotConfigured,
                message: "\(bundleID) has no server_api key (key_id, issuer_id, private_key_file): offers are signed "
                    + "with the app's in-app purchase key")
        }
    }

    private static func offerBody(_ body: [UInt8]) throws(RequestProblem) -> JSONValue {
        guard let json = try? JSONValue(parsing: body) else {
            throw .badRequest(.bodyNotJSON, "expected a JSON object naming bundle_id, product_id and the offer")
        }
        guard case .object = json else {
            throw .badRequest(.notAJSONObject, "expected a JSON object naming bundle_id, product_id and the offer")
        }
        return json
    }

    /// A string member: 1 to 255 bytes without control characters, nor U+2063, which separates version 1's fields
    /// (one inside a field would let it stand for another).
    private static func optionalOfferText(_ body: JSONValue, _ member: String) throws(RequestProblem) -> String? {
        switch body[member] {
        case nil, .null?:
            return nil
        case .string(let text)?:
            guard !text.isEmpty, text.utf8.count <= 255,
                !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0 == "\u{2063}" })
            else {
                throw .invalidField(member, "\(member) must be 1 to 255 bytes without control characters nor U+2063")
            }
            return text
        default:
            throw .invalidField(member, "\(member) must be a string")
        }
    }

    private static func offerText(_ body: JSONValue, _ member: String) throws(RequestProblem) -> String {
        guard let text = try optionalOfferText(body, member) else {
            throw .invalidField(member, "\(member) is required: a non-empty string")
        }
        return text
    }

    private static func seconds(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970.rounded(.down)) }

    private static func signingProblem(_ error: AppStoreServerAPIError) -> RequestProblem {
        RequestProblem(status: .serviceUnavailable, code: .serverAPINotConfigured, message: error.message)
    }
}
