#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ArgumentParser
import JSONText
import Ledger
import ReceiptEngine
import ReceiptService

/// `receiptd accounts show|delete ACCOUNT`: what `GET` and `DELETE /v1/accounts/{account}` do, from a shell.
struct Accounts: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "An account's entitlements, subscriptions and purchases; forgetting an account.",
        discussion: """
            Opens the ledger the config's "store" key names (or RECEIPTD_STORE_POSTGRES) directly, as receiptd \
            store status does; safe while receiptd serve runs. An account is the backend's user id, as the routes \
            under /v1/accounts take it (docs/accounts.md).
            """ + Store.environment,
        subcommands: [AccountsShow.self, AccountsDelete.self])
}

struct AccountsShow: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Prints an account's entitlements (active or not, until when, why), subscriptions and purchases.",
        discussion: """
            With --json, the JSON GET /v1/accounts/{account} answers.
            Exit status: 0 printed; 1 the ledger holds nothing of the account, no store is configured, or the \
            database cannot be reached; 2 a usage error.
            """ + Store.environment)

    @Argument(help: ArgumentHelp("The account (the backend's user id).", valueName: "account"))
    var account: String

    @Option(
        help: ArgumentHelp(
            "The instant the rules are applied at, RFC 3339 (default now), as the route's ?at=.", valueName: "date"),
        transform: { text in
            try parsed(text, expecting: "an RFC 3339 date like 2026-01-31T12:00:00Z") { ReceiptDate(rfc3339: $0) }
        })
    var at: ReceiptDate?

    @Flag(help: "Print the JSON GET /v1/accounts/{account} answers.")
    var json = false

    @OptionGroup var config: ConfigOption

    func execute() -> Int32 {
        runAccountsCommand("show", account: account, configPath: config.config) { (store, ledger) throws(StoreCommandFailure) in
            let snapshot: AccountSnapshot?
            do throws(LedgerError) {
                snapshot = try ledger.account(account)
            } catch {
                throw StoreCommandFailure(message: store.explain(error))
            }
            guard let snapshot else { throw StoreCommandFailure(message: accountNotFound) }
            let instant = (at ?? ReceiptDate(Date())).millisecondsSince1970
            let summary = AccountSummary(snapshot: snapshot, configuration: store.configuration, at: instant)
            if json {
                var text = summary.json.serialized(pretty: true)
                text.append(0x0A)
                StandardStream.output.write(text)
            } else {
                print(summary.lines.joined(separator: "\n"))
            }
        }
    }
}

struct AccountsDelete: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Forgets an account: its links, app account tokens and transfer records.",
        discussion: """
            For privacy requests, as DELETE /v1/accounts/{account}: Apple's facts (transactions, renewals, \
            notifications, claims) stay in the ledger, linked to nobody.
            Exit status: 0 deleted; 1 the ledger holds nothing of the account, no store is configured, or the \
            database cannot be reached; 2 a usage error.
            """ + Store.environment)

    @Argument(help: ArgumentHelp("The account (the backend's user id).", valueName: "account"))
    var account: String

    @OptionGroup var config: ConfigOption

    func execute() -> Int32 {
        runAccountsCommand("delete", account: account, configPath: config.config) { (store, ledger) throws(StoreCommandFailure) in
            let deleted: Bool
            do throws(LedgerError) {
                deleted = try ledger.deleteAccount(account)
            } catch {
                throw StoreCommandFailure(message: store.explain(error))
            }
            guard deleted else { throw StoreCommandFailure(message: accountNotFound) }
            print("deleted: the account's links, app account tokens and transfer records")
        }
    }
}

private let accountNotFound = "account_not_found: the ledger holds nothing of this account"

private func runAccountsCommand(
    _ subcommand: String, account: String, configPath: String?,
    _ command: (ConfiguredStore, any LedgerStore) throws(StoreCommandFailure) -> Void
) -> Int32 {
    guard ReceiptRoutes.isStorableAccount(account) else {
        printError(
            "receiptd accounts \(subcommand): an account is 1 to \(ReceiptRoutes.maximumAccountBytes) bytes of UTF-8 "
                + "without control characters")
        return ExitStatus.usage
    }
    return runLedgerCommand("accounts \(subcommand)", configPath: configPath, command)
}
