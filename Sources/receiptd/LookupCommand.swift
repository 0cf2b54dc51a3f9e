#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AppStoreServerAPI
import JSONText
import Ledger
import ReceiptService

let lookupUsage = """
    usage: receiptd lookup order ORDER_ID [--config PATH]
           receiptd lookup transaction TRANSACTION_ID [--config PATH]
      Asks Apple's App Store Server API, for each app with a "server_api" key and each environment "environments"
      allows, until one knows the order (the id on the customer's emailed receipt) or the transaction. Every signed
      transaction Apple returns is verified like any other before it is printed; with a "store" they enter the ledger.
      Prints one JSON object: {"order_id"|"transaction_id", "transactions": [normalized transactions]}.
      exit status: 0 found; 1 not found (code order_not_found or transaction_not_found), Apple unreachable
      (server_api_unavailable) or no key configured (server_api_not_configured); 2 usage error
    """

/// `receiptd lookup order|transaction ID`: what `GET /v1/orders/{order_id}` answers, from a shell.
func runLookup(_ arguments: [String]) -> Int32 {
    let kind = arguments.first
    let reader: ArgumentReader
    do {
        reader = try ArgumentReader(Array(arguments.dropFirst()), options: ["--config"])
        if reader.wantsHelp || kind == "--help" || kind == "-h" {
            print(lookupUsage)
            return ExitStatus.success
        }
        guard kind == "order" || kind == "transaction" else { throw UsageError("expected order or transaction") }
        try reader.expectPositional(atMost: 1)
        guard reader.positional.count == 1, !reader.positional[0].isEmpty else { throw UsageError("expected an id") }
    } catch {
        printError("receiptd lookup: \(error)\n\n\(lookupUsage)")
        return ExitStatus.usage
    }
    // Without a ledger the lookup still answers; one that cannot be opened only means nothing is stored.
    guard
        let configuration = serverAPICommandConfiguration("lookup", configPath: reader.value("--config")),
        let ledger = serverAPICommandLedger("lookup", configuration, neededFor: nil)
    else { return ExitStatus.failure }
    let id = reader.positional[0]
    let routes = ReceiptRoutes(
        configuration: configuration, validator: configuration.makeValidator(),
        jwsVerifier: configuration.makeJWSVerifier(), ledger: ledger, metrics: ServiceMetrics(),
        log: ServiceLog(format: configuration.logFormat, sink: { printError($0) }))
    let idKey = kind == "order" ? "order_id" : "transaction_id"
    switch kind == "order" ? routes.lookUpOrder(id) : routes.lookUpTransaction(id) {
    case .found(let transactions):
        var text = JSONValue.object([(idKey, .string(id)), ("transactions", .array(transactions))]).serialized(pretty: true)
        text.append(0x0A)
        StandardStream.output.write(text)
        return ExitStatus.success
    case .notFound:
        printError("receiptd lookup: \(kind == "order" ? "order_not_found" : "transaction_not_found"): Apple knows no \(kind ?? "") \(id)")
    case .notConfigured:
        printError("receiptd lookup: server_api_not_configured: no app has a server_api key (key_id, issuer_id, private_key_file)")
    case .unavailable(let failures):
        printError("receiptd lookup: server_api_unavailable: " + failures.map(\.detail).joined(separator: "; "))
    case .busy(_, let failures):
        printError("receiptd lookup: server_api_busy: " + failures.map(\.detail).joined(separator: "; "))
    }
    return ExitStatus.failure
}
