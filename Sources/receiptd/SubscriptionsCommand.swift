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

/// `receiptd subscriptions extend|extend-all`: Apple's renewal-date extensions, from a shell.
struct Subscriptions: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Extends subscriptions' renewal dates with Apple: one subscription, or every active subscriber.",
        discussion: """
            Asks Apple's App Store Server API (the app's "server_api" key) to extend renewal dates, and records each \
            request and Apple's answer in the ledger when a "store" is configured. Apple's limits: 1 to 90 days; \
            at most two extensions of one subscription in 365 days; only active subscriptions; a family-shared \
            subscription through the organizer's purchase. Reasons: undeclared, customer_satisfaction, other, \
            service_issue_or_outage (Apple's codes 0 to 3).
            """,
        subcommands: [SubscriptionsExtend.self, SubscriptionsExtendAll.self])

    static let reasonHelp = ArgumentHelp(
        "Why: undeclared, customer_satisfaction, other or service_issue_or_outage.", valueName: "reason")

    static func reason(_ text: String) throws -> RenewalExtensionReason {
        try parsed(text, expecting: RenewalExtensionReason.allCases.map(\.rawValue).joined(separator: ", "),
            RenewalExtensionReason.init(rawValue:))
    }

    static func days(_ text: String) throws -> Int {
        try parsed(text, expecting: "a whole number of days from 1 to 90") { text in
            Int(text).flatMap { ReceiptRoutes.renewalExtensionDays.contains($0) ? $0 : nil }
        }
    }
}

struct SubscriptionsExtend: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "extend",
        abstract: "Extends one subscription's renewal date (Extend a Subscription Renewal Date).",
        discussion: """
            The app and environment are the ledger's for the subscription; one the ledger does not know is asked \
            of each app with a key, in each environment allowed, until one knows it. Prints the JSON POST \
            /v1/subscriptions/{id}/extend answers, then fetches the subscription's signed status from Apple into \
            the ledger.
            Environment: RECEIPTD_CONFIG (the config file when --config is not given), RECEIPTD_STORE_POSTGRES.
            Exit status: 0 extended; 1 Apple refused (extension_refused, with Apple's code and what its limit is), \
            could not be reached (server_api_unavailable, server_api_busy) or no key is configured; 2 a usage error.
            """)

    @Argument(help: ArgumentHelp("The subscription's original transaction id.", valueName: "original-transaction-id"))
    var originalTransactionID: String

    @Option(help: ArgumentHelp("Days to extend by, 1 to 90.", valueName: "days"), transform: Subscriptions.days)
    var days: Int

    @Option(help: Subscriptions.reasonHelp, transform: Subscriptions.reason)
    var reason: RenewalExtensionReason

    @OptionGroup var config: ConfigOption

    func execute() -> Int32 {
        let command = "subscriptions extend"
        guard !originalTransactionID.isEmpty else {
            printError("receiptd \(command): expected an original transaction id")
            return ExitStatus.usage
        }
        guard
            let configuration = serverAPICommandConfiguration(command, configPath: config.config),
            let ledger = serverAPICommandLedger(command, configuration, neededFor: nil)
        else { return ExitStatus.failure }
        let routes = ReceiptRoutes(
            configuration: configuration, validator: configuration.makeValidator(),
            jwsVerifier: configuration.makeJWSVerifier(), ledger: ledger, metrics: ServiceMetrics(),
            log: ServiceLog(format: configuration.logFormat, sink: { printError($0) }))
        let reply = routes.extendRenewal(
            originalTransactionID: originalTransactionID, days: days, reason: reason, requestedBy: "cli",
            searchApps: true, refreshInline: true)
        guard let json = reply.json else {
            printError("receiptd \(command): \(reply.errorCode ?? "server_api_unavailable"): \(reply.errorMessage ?? "")")
            return ExitStatus.failure
        }
        var text = json.serialized(pretty: true)
        text.append(0x0A)
        StandardStream.output.write(text)
        return ExitStatus.success
    }
}

struct SubscriptionsExtendAll: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "extend-all",
        abstract: "Extends the renewal date of every active subscriber of a product, and follows it to completion.",
        discussion: """
            Asks Apple (Extend Subscription Renewal Dates for All Active Subscribers), prints `request_identifier ID` \
            at once, then asks Apple for the request's status every --poll-interval seconds until it is complete and \
            prints `complete: succeeded N, failed M`. Apple applies the extension to each eligible subscriber (each \
            one's limits apply) and sends each a RENEWAL_EXTENDED notification.
            --bundle-id: default the only app with a "server_api" key. --environment: default Production when \
            "environments" allows it, else Sandbox.
            Environment: RECEIPTD_CONFIG (the config file when --config is not given), RECEIPTD_STORE_POSTGRES.
            Exit status: 0 complete; 1 Apple refused (extension_refused), could not be reached \
            (server_api_unavailable) or no key is configured; 2 a usage error.
            """)

    @Option(help: ArgumentHelp("The subscription product to extend.", valueName: "product"))
    var product: String

    @Option(help: ArgumentHelp("Days to extend by, 1 to 90.", valueName: "days"), transform: Subscriptions.days)
    var days: Int

    @Option(help: Subscriptions.reasonHelp, transform: Subscriptions.reason)
    var reason: RenewalExtensionReason

    @Option(
        help: ArgumentHelp(
            "Only this storefront (ISO 3166-1 alpha-3, e.g. USA); repeat for several; default every storefront.",
            valueName: "code"))
    var storefront: [String] = []

    @Option(help: ArgumentHelp("The app (a bundle id with a server_api key).", valueName: "bundle"))
    var bundleID: String?

    @Option(
        help: ArgumentHelp("Production or Sandbox.", valueName: "environment"),
        transform: { text in try parsed(text, expecting: "Production or Sandbox", AppStoreEnvironment.init(rawValue:)) })
    var environment: AppStoreEnvironment?

    @Option(
        help: ArgumentHelp("Seconds between status requests (default 10).", valueName: "seconds"),
        transform: { text in
            try parsed(text, expecting: "a number of seconds from 0.1 to 3600") { text in
                Double(text).flatMap { (0.1...3600).contains($0) ? $0 : nil }
            }
        })
    var pollInterval: Double = 10

    @OptionGroup var config: ConfigOption

    func validate() throws {
        guard !product.isEmpty else { throw ArgumentParser.ValidationError("--product must not be empty") }
        for code in storefront where code.count != 3 || !code.allSatisfy({ $0.isASCII && $0.isUppercase }) {
            throw ArgumentParser.ValidationError("--storefront \(code): expected an ISO 3166-1 alpha-3 code such as USA")
        }
    }

    func execute() -> Int32 {
        let command = "subscriptions extend-all"
        guard
            let configuration = serverAPICommandConfiguration(command, configPath: config.config),
            let ledger = serverAPICommandLedger(command, configuration, neededFor: nil)
        else { return ExitStatus.failure }
        let keyed = configuration.serverAPIApps.map(\.bundleID)
        guard let bundleID = bundleID ?? (keyed.count == 1 ? keyed[0] : nil) else {
            printError(
                "receiptd \(command): server_api_not_configured: "
                    + (keyed.isEmpty
                        ? "no app has a server_api key (key_id, issuer_id, private_key_file)"
                        : "several apps have a server_api key: name one with --bundle-id"))
            return ExitStatus.failure
        }
        let allowsProduction = configuration.environments.contains { $0.rawValue == AppStoreEnvironment.production.rawValue }
        let environment = environment ?? (allowsProduction ? .production : .sandbox)
        let client: AppStoreServerAPIClient
        do {
            client = try ServerAPIClients(configuration: configuration).client(bundleID: bundleID, environment: environment)
        } catch {
            printError("receiptd \(command): \(error.code.rawValue): \(error.detail)")
            return ExitStatus.failure
        }
        var record = RenewalExtensionRecord(
            requestIdentifier: UUID().uuidString.lowercased(), productID: product, bundleID: bundleID,
            environment: environment.rawValue, days: days, reasonCode: reason.code, storefronts: storefront,
            requestedBy: "cli", requestedAt: Int64(wallClockSeconds() * 1000), outcome: .requested)
        func keep() {
            guard ledger.isConfigured else { return }
            do {
                try ledger.withStore { (store) throws(LedgerError) in try store.record(renewalExtension: record) }
            } catch {
                printError("receiptd \(command): the ledger did not store request \(record.requestIdentifier)")
            }
        }
        func fail(_ error: AppStoreServerAPIError) -> Int32 {
            let refused = error.code == .rejected || error.code == .notFound
            record.outcome = refused ? .refused : .failed
            record.appleStatus = error.httpStatus
            record.appleErrorCode = error.appleErrorCode
            record.message = ReceiptRoutes.renewalExtensionLimit(error.appleErrorCode, fallback: error.detail)
            keep()
            printError(
                "receiptd \(command): \(refused ? "extension_refused" : error.code.rawValue): " + (record.message ?? ""))
            return ExitStatus.failure
        }
        do {
            _ = try client.extendRenewalDatesForAllActiveSubscribers(
                MassRenewalExtension(
                    RenewalExtension(
                        extendByDays: days, extendReasonCode: reason.code, requestIdentifier: record.requestIdentifier),
                    productID: product, storefrontCountryCodes: storefront))
        } catch {
            return fail(error)
        }
        record.appleStatus = 200
        keep()
        StandardStream.output.write("request_identifier \(record.requestIdentifier)\n")
        while true {
            sleepSeconds(pollInterval)
            let status: MassRenewalExtensionStatus
            do {
                status = try client.massRenewalExtensionStatus(
                    productID: product, requestIdentifier: record.requestIdentifier)
            } catch {
                printError(
                    "receiptd \(command): \(error.code.rawValue): the status of \(record.requestIdentifier) could not "
                        + "be read (\(error.detail)); Apple goes on with the extension")
                return ExitStatus.failure
            }
            guard status.complete else { continue }
            record.outcome = .extended
            record.completedAt = status.completeDate ?? Int64(wallClockSeconds() * 1000)
            record.succeededCount = status.succeededCount
            record.failedCount = status.failedCount
            keep()
            StandardStream.output.write(
                "complete: succeeded \(status.succeededCount ?? 0), failed \(status.failedCount ?? 0)\n")
            return ExitStatus.success
        }
    }
}
