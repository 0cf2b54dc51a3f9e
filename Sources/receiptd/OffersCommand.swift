import ArgumentParser
import HTTP1Server
import JSONText
import ReceiptService

/// `receiptd offers sign promotional|introductory-eligibility`: what `POST /v1/offers/…` answers, from a shell.
struct Offers: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Signs promotional offers and introductory offer eligibility for StoreKit.",
        discussion: """
            Signed with the app's in-app purchase key (the config's apps[].server_api: key_id, issuer_id, \
            private_key_file), as Apple's server library signs them; never calls Apple, never prints the key.
            """,
        subcommands: [OffersSign.self])
}

struct OffersSign: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Prints the JSON POST /v1/offers/promotional or /v1/offers/introductory-eligibility answers.",
        subcommands: [OffersSignPromotional.self, OffersSignIntroductoryEligibility.self])

    static let answerAndStatus = """
        Environment: RECEIPTD_CONFIG (the config file when --config is not given), RECEIPTD_STORE_POSTGRES.
        Exit status: 0 signed; 1 the app has no server_api key (server_api_not_configured), or the ledger is \
        missing or cannot be reached; 2 a usage error (a flag the route would refuse as invalid_field).
        """
}

struct OffersSignPromotional: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "promotional",
        abstract: "Signs a promotional offer: version 2 (a JWS, default) or 1 (StoreKit 1's SKPaymentDiscount).",
        discussion: """
            Prints {"version": 2, "signature", "key_identifier", "nonce"}, or for --version 1 \
            {"version": 1, "key_identifier", "nonce", "timestamp", "signature"}.
            """ + "\n" + OffersSign.answerAndStatus)

    @Option(help: ArgumentHelp("The app's bundle id, one of the config's apps.", valueName: "bundle-id"))
    var bundleId: String

    @Option(help: ArgumentHelp("The subscription's product id.", valueName: "product-id"))
    var productId: String

    @Option(help: ArgumentHelp("The promotional offer's identifier in App Store Connect.", valueName: "offer-id"))
    var offerId: String

    @Option(help: ArgumentHelp("Version 1 only: the UUID the purchase will carry as its appAccountToken.", valueName: "uuid"))
    var appAccountToken: String?

    @Option(help: ArgumentHelp("Version 2 only: any transaction of the customer (an appTransactionId too).", valueName: "id"))
    var transactionId: String?

    @Option(
        help: ArgumentHelp("The signature's version: 1 or 2 (default).", valueName: "1|2"),
        transform: { text in try parsed(text, expecting: "1 or 2") { ["1": Int64(1), "2": Int64(2)][$0] } })
    var version: Int64 = 2

    @OptionGroup var config: ConfigOption

    func execute() -> Int32 {
        var members: [(key: String, value: JSONValue)] = [
            ("bundle_id", .string(bundleId)), ("product_id", .string(productId)), ("offer_identifier", .string(offerId)),
            ("version", .integer(version)),
        ]
        if let appAccountToken { members.append(("app_account_token", .string(appAccountToken))) }
        if let transactionId { members.append(("transaction_id", .string(transactionId))) }
        return signOffer(.promotional, members, usesLedger: false, configPath: config.config)
    }
}

struct OffersSignIntroductoryEligibility: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "introductory-eligibility",
        abstract: "Signs whether a customer may have a product's introductory offer, decided from the ledger unless --allow says.",
        discussion: """
            Prints {"signature", "allow_introductory_offer", "decided_by", "nonce"}. Without --allow, the customer's \
            history in the ledger decides (docs/server-api.md), and "decided_by" names the transaction that made them \
            ineligible.
            """ + "\n" + OffersSign.answerAndStatus)

    @Option(help: ArgumentHelp("The app's bundle id, one of the config's apps.", valueName: "bundle-id"))
    var bundleId: String

    @Option(help: ArgumentHelp("The subscription's product id.", valueName: "product-id"))
    var productId: String

    @Option(help: ArgumentHelp("Any transaction of the customer (an appTransactionId too).", valueName: "id"))
    var transactionId: String

    @Option(
        help: ArgumentHelp("Decide instead of the ledger: true or false.", valueName: "true|false"),
        transform: { text in try parsed(text, expecting: "true or false") { ["true": true, "false": false][$0] } })
    var allow: Bool?

    @OptionGroup var config: ConfigOption

    func execute() -> Int32 {
        var members: [(key: String, value: JSONValue)] = [
            ("bundle_id", .string(bundleId)), ("product_id", .string(productId)),
            ("transaction_id", .string(transactionId)),
        ]
        if let allow { members.append(("allow_introductory_offer", .bool(allow))) }
        return signOffer(.introductoryEligibility, members, usesLedger: allow == nil, configPath: config.config)
    }
}

/// The flags the route's members refuse, by member: a usage error names the flag, not the JSON member.
private let flagOfMember = [
    "bundle_id": "--bundle-id", "product_id": "--product-id", "offer_identifier": "--offer-id",
    "app_account_token": "--app-account-token", "transaction_id": "--transaction-id", "version": "--version",
    "allow_introductory_offer": "--allow",
]

private func signOffer(
    _ kind: OfferSignatureKind, _ members: [(key: String, value: JSONValue)], usesLedger: Bool, configPath: String?
) -> Int32 {
    let command = "offers sign \(kind.rawValue)"
    guard let configuration = serverAPICommandConfiguration(command, configPath: configPath) else {
        return ExitStatus.failure
    }
    var ledger = PurchaseLedger.none
    if usesLedger {
        guard
            let opened = serverAPICommandLedger(
                command, configuration, neededFor: "the customer's history decides eligibility; or pass --allow")
        else { return ExitStatus.failure }
        ledger = opened
    }
    defer { try? ledger.close() }
    let routes = ReceiptRoutes(
        configuration: configuration, validator: configuration.makeValidator(),
        jwsVerifier: configuration.makeJWSVerifier(), ledger: ledger, metrics: ServiceMetrics())
    let response = routes.offerResponse(kind, body: JSONValue.object(members).serialized())
    guard response.status.code == 200, let answer = try? JSONValue(parsing: response.body) else {
        let error = (try? JSONValue(parsing: response.body))?["error"]
        guard case .string(let code)? = error?["code"], case .string(let message)? = error?["message"] else {
            printError("receiptd \(command): status \(response.status.code)")
            return ExitStatus.failure
        }
        if case .string(let member)? = error?["field"] {
            printError("receiptd \(command): \(flagOfMember[member] ?? member): \(message)")
            return ExitStatus.usage
        }
        printError("receiptd \(command): \(code): \(message)")
        return ExitStatus.failure
    }
    var text = answer.serialized(pretty: true)
    text.append(0x0A)
    StandardStream.output.write(text)
    return ExitStatus.success
}
