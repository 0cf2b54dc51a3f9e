#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ReceiptService

let usage = """
    receiptd: validates App Store receipts and StoreKit 2 signed data offline.

    Usage:
      receiptd serve [--config PATH] [--host H] [--port N] [--log-format json|text]
      receiptd verify FILE... [--config PATH] [--device-id ID] [--bundle-id ID] [--kind KIND] [--json]
      receiptd testing init-ca DIR
      receiptd testing receipt --ca DIR --bundle-id ID --app-version V [--original-version V] [--device-id ID]
                               [--environment Production|Sandbox] [--created DATE] [--purchase SPEC]...
                               [--format der|base64] [--out FILE]
      receiptd testing transaction --ca DIR --bundle-id ID [--transaction-id ID] [--product-id ID] [--expires DATE]
                                   [--device-id ID [--nonce UUID]] [flags] [--out FILE]
      receiptd testing renewal-info --ca DIR [--auto-renew true|false] [--billing-retry] [flags] [--out FILE]
      receiptd testing app-transaction --ca DIR --bundle-id ID [--app-version V] [--device-id ID [--nonce UUID]]
                                       [flags] [--out FILE]
      receiptd testing notification --ca DIR --type TYPE [--subtype SUBTYPE] --bundle-id ID [flags]
                                    [--out FILE] [--post URL]
      receiptd store status|backup FILE|restore BACKUP|migrate [--config PATH]
      receiptd token new --name NAME --scopes SCOPE[,SCOPE...]
      receiptd store sync [--since DATE] [--until DATE] [--app BUNDLE] [--environment Production|Sandbox]
      receiptd lookup order ORDER_ID | lookup transaction TRANSACTION_ID [--config PATH]
      receiptd notifications test --app BUNDLE [--environment Production|Sandbox] [--timeout SECONDS]
      receiptd version
      receiptd help [COMMAND]

    Every command takes --help. verify exits 0 when every file is valid, 1 when any is not, 2 on a usage error.
    """

/// Dispatches a command line; returns the process's exit status.
func runReceiptd(_ arguments: [String]) -> Int32 {
    guard let command = arguments.first else {
        printError(usage)
        return ExitStatus.usage
    }
    let rest = Array(arguments.dropFirst())
    switch command {
    case "serve": return runServe(arguments: rest)
    case "verify": return runVerify(rest)
    case "testing": return runTesting(rest)
    case "store": return runStore(rest)
    case "token": return runToken(rest)
    case "lookup": return runLookup(rest)
    case "notifications": return runNotifications(rest)
    case "version", "--version":
        print("receiptd \(ReceiptdVersion.current)")
        return ExitStatus.success
    case "help", "--help", "-h":
        // `help serve` is `serve --help`, as in git and swift.
        if let topic = rest.first,
            ["serve", "verify", "testing", "store", "token", "lookup", "notifications"].contains(topic)
        {
            return runReceiptd([topic] + rest.dropFirst() + ["--help"])
        }
        print(usage)
        return ExitStatus.success
    default:
        printError("receiptd: unknown command '\(command)'\n\n\(usage)")
        return ExitStatus.usage
    }
}

/// What `--device-id` takes, for usage errors.
let deviceIdentifierForm = "a UUID (iOS) or a MAC address aa:bb:cc:dd:ee:ff (macOS)"

enum ExitStatus {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 2
}

func printError(_ message: String) {
    StandardStream.error.write(message + "\n")
}
