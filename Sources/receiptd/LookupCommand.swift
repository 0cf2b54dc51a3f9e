#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AppStoreServerAPI
import ArgumentParser
import JSONText
import Ledger
import ReceiptEngine
import ReceiptService

/// `receiptd lookup order|transaction|app-transaction ID`: what `GET /v1/orders/{order_id}` answers, from a shell, and
/// a customer's app transaction.
struct Lookup: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Asks Apple's App Store Server API about an order, a transaction or an app transaction.",
        discussion: """
            Asks, for each app with a "server_api" key and each environment "environments" allows, until one knows \
            the order (the id on the customer's emailed receipt) or the transaction. Every signed transaction Apple \
            returns is verified like any other before it is printed; with a "store" they enter the ledger.
            """,
        subcommands: [LookupOrder.self, LookupTransaction.self, LookupAppTransaction.self])

    static let answerAndStatus = """
        Prints one JSON object: {"order_id"|"transaction_id", "transactions": [normalized transactions]}.
        Environment: RECEIPTD_CONFIG (the config file when --config is not given), RECEIPTD_STORE_POSTGRES.
        Exit status: 0 found; 1 not found (order_not_found or transaction_not_found), Apple unreachable \
        (server_api_unavailable) or no key configured (server_api_not_configured); 2 a usage error.
        """
}

struct LookupOrder: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "order", abstract: "Looks up an order id from a customer's receipt email.",
        discussion: Lookup.answerAndStatus)

    @Argument(help: ArgumentHelp("The order id.", valueName: "order-id"))
    var id: String

    @OptionGroup var config: ConfigOption

    func execute() -> Int32 { lookUp(.order, id, configPath: config.config) }
}

struct LookupTransaction: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "transaction", abstract: "Looks up a transaction id.", discussion: Lookup.answerAndStatus)

    @Argument(help: ArgumentHelp("The transaction id.", valueName: "transaction-id"))
    var id: String

    @OptionGroup var config: ConfigOption

    func execute() -> Int32 { lookUp(.transaction, id, configPath: config.config) }
}

struct LookupAppTransaction: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "app-transaction",
        abstract: "Looks up the app transaction of the customer who made a transaction.",
        discussion: """
            Asks Get App Transaction Info with any transaction id of the customer. The signed app transaction is \
            verified like any other before it is printed; it is not stored.
            Prints one JSON object: {"transaction_id", "bundle_id", "environment", "app_transaction": {…}}.
            Environment: RECEIPTD_CONFIG (the config file when --config is not given).
            Exit status: 0 found; 1 not found (app_transaction_not_found), Apple's answer failed verification (its \
            code, such as signature_invalid), Apple unreachable (server_api_unavailable) or no key configured \
            (server_api_not_configured); 2 a usage error.
            """)

    @Argument(help: ArgumentHelp("Any transaction id of the customer.", valueName: "transaction-id"))
    var id: String

    @OptionGroup var config: ConfigOption

    func execute() -> Int32 {
        guard !id.isEmpty else {
            printError("receiptd lookup: expected an id")
            return ExitStatus.usage
        }
        guard let configuration = serverAPICommandConfiguration("lookup", configPath: config.config) else {
            return ExitStatus.failure
        }
        // Nothing is stored: an app transaction says which app version the customer first bought, not a purchase.
        let routes = ReceiptRoutes(
            configuration: configuration, validator: configuration.makeValidator(),
            jwsVerifier: configuration.makeJWSVerifier(), ledger: .none, metrics: ServiceMetrics(),
            log: ServiceLog(format: configuration.logFormat, sink: { printError($0) }))
        switch routes.lookUpAppTransaction(id) {
        case .found(let bundleID, let environment, let appTransaction):
            var text = JSONValue.object([
                ("transaction_id", .string(id)), ("bundle_id", .string(bundleID)),
                ("environment", .string(environment.rawValue)), ("app_transaction", appTransaction),
            ]).serialized(pretty: true)
            text.append(0x0A)
            StandardStream.output.write(text)
            return ExitStatus.success
        case .refused(let error):
            printError(
                "receiptd lookup: \(error.code): Apple's signed app transaction failed verification: \(error.message)")
        case .unanswered(.notFound):
            printError(
                "receiptd lookup: app_transaction_not_found: Apple knows no app transaction for transaction \(id)")
        case .unanswered(let lookup):
            return report(lookup)
        }
        return ExitStatus.failure
    }
}

private enum LookupKind: String {
    case order, transaction
}

private func lookUp(_ kind: LookupKind, _ id: String, configPath: String?) -> Int32 {
    guard !id.isEmpty else {
        printError("receiptd lookup: expected an id")
        return ExitStatus.usage
    }
    // Without a ledger the lookup still answers; one that cannot be opened only means nothing is stored.
    guard
        let configuration = serverAPICommandConfiguration("lookup", configPath: configPath),
        let ledger = serverAPICommandLedger("lookup", configuration, neededFor: nil)
    else { return ExitStatus.failure }
    let routes = ReceiptRoutes(
        configuration: configuration, validator: configuration.makeValidator(),
        jwsVerifier: configuration.makeJWSVerifier(), ledger: ledger, metrics: ServiceMetrics(),
        log: ServiceLog(format: configuration.logFormat, sink: { printError($0) }))
    let idKey = kind == .order ? "order_id" : "transaction_id"
    let lookup = kind == .order ? routes.lookUpOrder(id) : routes.lookUpTransaction(id)
    switch lookup {
    case .found(let transactions):
        var text = JSONValue.object([(idKey, .string(id)), ("transactions", .array(transactions))]).serialized(pretty: true)
        text.append(0x0A)
        StandardStream.output.write(text)
        return ExitStatus.success
    case .notFound:
        printError("receiptd lookup: \(kind == .order ? "order_not_found" : "transaction_not_found"): Apple knows no \(kind.rawValue) \(id)")
    case .notConfigured, .unavailable, .busy:
        return report(lookup)
    }
    return ExitStatus.failure
}

/// A lookup that got no answer: why, on standard error.
private func report(_ lookup: ServerAPILookup) -> Int32 {
    switch lookup {
    case .found, .notFound: break
    case .notConfigured:
        printError("receiptd lookup: server_api_not_configured: no app has a server_api key (key_id, issuer_id, private_key_file)")
    case .unavailable(let failures):
        printError("receiptd lookup: server_api_unavailable: " + failures.map(\.detail).joined(separator: "; "))
    case .busy(_, let failures):
        printError("receiptd lookup: server_api_busy: " + failures.map(\.detail).joined(separator: "; "))
    }
    return ExitStatus.failure
}
