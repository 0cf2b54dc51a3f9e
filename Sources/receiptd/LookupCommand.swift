#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AppStoreServerAPI
import ArgumentParser
import JSONText
import Ledger
import ReceiptService

/// `receiptd lookup order|transaction ID`: what `GET /v1/orders/{order_id}` answers, from a shell.
struct Lookup: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Asks Apple's App Store Server API about an order or a transaction.",
        discussion: """
            Asks, for each app with a "server_api" key and each environment "environments" allows, until one knows \
            the order (the id on the customer's emailed receipt) or the transaction. Every signed transaction Apple \
            returns is verified like any other before it is printed; with a "store" they enter the ledger.
            """,
        subcommands: [LookupOrder.self, LookupTransaction.self])

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
    switch kind == .order ? routes.lookUpOrder(id) : routes.lookUpTransaction(id) {
    case .found(let transactions):
        var text = JSONValue.object([(idKey, .string(id)), ("transactions", .array(transactions))]).serialized(pretty: true)
        text.append(0x0A)
        StandardStream.output.write(text)
        return ExitStatus.success
    case .notFound:
        printError("receiptd lookup: \(kind == .order ? "order_not_found" : "transaction_not_found"): Apple knows no \(kind.rawValue) \(id)")
    case .notConfigured:
        printError("receiptd lookup: server_api_not_configured: no app has a server_api key (key_id, issuer_id, private_key_file)")
    case .unavailable(let failures):
        printError("receiptd lookup: server_api_unavailable: " + failures.map(\.detail).joined(separator: "; "))
    case .busy(_, let failures):
        printError("receiptd lookup: server_api_busy: " + failures.map(\.detail).joined(separator: "; "))
    }
    return ExitStatus.failure
}
