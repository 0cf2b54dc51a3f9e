import AppStoreServerAPI
import ArgumentParser
import JSONText
import ReceiptEngine
import ReceiptForge
import ReceiptService

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// `receiptd testing transaction | renewal-info | app-transaction | notification`: StoreKit 2 signed data made to
// order with the EC test chain that `init-ca` writes beside the receipt PKI. Each command declares only the flag
// groups it reads, so its `--help` never offers a flag it refuses.

/// An RFC 3339 date flag.
private func rfc3339Date(_ text: String) throws -> Date {
    try parsed(text, expecting: "an RFC 3339 date (2026-01-01T00:00:00Z)") { ReceiptDate(rfc3339: $0)?.date }
}

/// Every forge: the chain, when it was signed, where, and where it goes.
struct SignedDataOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The test PKI made by `receiptd testing init-ca`.", valueName: "dir"))
    var ca: String

    @Option(
        help: ArgumentHelp("signedDate, RFC 3339 (2026-01-01T00:00:00Z); default now.", valueName: "date"),
        transform: rfc3339Date)
    var signed: Date?

    @Option(
        help: ArgumentHelp("Production (default, as for receipts), Sandbox or Xcode.", valueName: "env"),
        transform: { text in
            try parsed(text, expecting: "Production, Sandbox or Xcode") {
                ["Production", "Sandbox", "Xcode"].contains($0) ? $0 : nil
            }
        })
    var environment = "Production"

    @Option(
        help: ArgumentHelp(
            "A JSON object of payload members to set after every other flag: a member that exists is replaced "
                + "(objects are merged member by member), a new one added, e.g. '{\"isUpgraded\": true, \"price\": 9990}'.",
            valueName: "json"))
    var members: String?

    @Option(
        help: ArgumentHelp("Leaves a member out (repeatable; data.bundleId names one in an object).", valueName: "name")
    )
    var omit: [String] = []

    @Option(help: ArgumentHelp("Where to write it; default standard output.", valueName: "file"))
    var out: String?
}

/// What a transaction and renewal info share.
struct PurchaseOptions: ParsableArguments {
    @Option(help: ArgumentHelp("originalTransactionId; default --transaction-id.", valueName: "id"))
    var originalTransactionId: String?

    @Option(help: ArgumentHelp("productId; default pro.monthly.", valueName: "id"))
    var productId = "pro.monthly"

    @Option(
        help: ArgumentHelp("expiresDate (and renewalDate); default a month after the purchase.", valueName: "date"),
        transform: rfc3339Date)
    var expires: Date?
}

/// A transaction's own flags.
struct TransactionOptions: ParsableArguments {
    static let productTypes = [
        "Auto-Renewable Subscription", "Non-Renewing Subscription", "Consumable", "Non-Consumable",
    ]

    @Option(help: ArgumentHelp("transactionId; default 2000000000000001.", valueName: "id"))
    var transactionId = "2000000000000001"

    @Option(
        help: ArgumentHelp(
            "Auto-Renewable Subscription (default), Non-Renewing Subscription, Consumable, Non-Consumable; only a "
                + "subscription has an expiry unless --expires is given.",
            valueName: "type"),
        transform: { text in
            try parsed(text, expecting: TransactionOptions.productTypes.joined(separator: ", ")) {
                TransactionOptions.productTypes.contains($0) ? $0 : nil
            }
        })
    var productType = TransactionOptions.productTypes[0]

    @Option(
        help: ArgumentHelp("purchaseDate; default a minute before --signed.", valueName: "date"), transform: rfc3339Date
    )
    var purchased: Date?

    @Option(help: ArgumentHelp("revocationDate (a refund).", valueName: "date"), transform: rfc3339Date)
    var revoked: Date?

    @Option(
        help: ArgumentHelp("inAppOwnershipType: PURCHASED or FAMILY_SHARED.", valueName: "type"),
        transform: { text in
            try parsed(text, expecting: "PURCHASED or FAMILY_SHARED") {
                ["PURCHASED", "FAMILY_SHARED"].contains($0) ? $0 : nil
            }
        })
    var ownership: String?
}

/// Renewal info's own flags.
struct RenewalOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp("autoRenewStatus: true (default) or false.", valueName: "true|false"),
        transform: { text in try parsed(text, expecting: "true or false") { ["true": true, "false": false][$0] } })
    var autoRenew = true

    @Option(help: ArgumentHelp("gracePeriodExpiresDate.", valueName: "date"), transform: rfc3339Date)
    var gracePeriodExpires: Date?

    @Flag(help: "isInBillingRetryPeriod: true.")
    var billingRetry = false
}

/// Binding signed data to a device, as StoreKit does.
struct DeviceBindingOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Binds it to a device (deviceVerification), with --nonce or a random nonce.", valueName: "id"),
        transform: { text in try parsed(text, expecting: deviceIdentifierForm, DeviceIdentifier.init) })
    var deviceId: DeviceIdentifier?

    @Option(
        help: ArgumentHelp("deviceVerificationNonce.", valueName: "uuid"),
        transform: { text in try parsed(text, expecting: "a UUID", UUID.init(uuidString:)) })
    var nonce: UUID?

    func validate() throws {
        if nonce != nil, deviceId == nil { throw ArgumentParser.ValidationError("--nonce: needs --device-id") }
    }

    /// The device binding StoreKit signs: SHA-384 over the nonce and the device id.
    var binding: (value: String, nonce: UUID)? {
        deviceId.map { device in
            let nonce = nonce ?? UUID()
            return (deviceVerification(device: device, nonce: nonce), nonce)
        }
    }
}

/// `--app-apple-id N`.
private func appAppleID(_ text: String) throws -> Int64 {
    try parsed(text, expecting: "a positive integer") { Int64($0).flatMap { $0 > 0 ? $0 : nil } }
}

/// The signed-data flags of one forging command, resolved once: dates with their defaults, the chain to sign with.
private struct SignedDataRequest {
    let authority: JWSTestAuthority
    let options: SignedDataOptions
    let signed: Date
    let purchase: PurchaseOptions
    let transactionOptions: TransactionOptions
    let renewalOptions: RenewalOptions
    let purchased: Date
    let expires: Date?

    var isAutoRenewable: Bool { transactionOptions.productType == TransactionOptions.productTypes[0] }

    /// The groups a command does not declare keep their defaults.
    init(
        _ options: SignedDataOptions, purchase: PurchaseOptions? = nil, transaction: TransactionOptions? = nil,
        renewal: RenewalOptions? = nil, now: Date
    ) throws(UsageError) {
        self.options = options
        do {
            authority = try JWSTestAuthority(directory: options.ca)
        } catch {
            throw UsageError("--ca: \(error)")
        }
        do {
            self.purchase = try purchase ?? PurchaseOptions.parse([])
            transactionOptions = try transaction ?? TransactionOptions.parse([])
            renewalOptions = try renewal ?? RenewalOptions.parse([])
        } catch {
            throw UsageError("\(error)")
        }
        signed = options.signed ?? now
        purchased = transactionOptions.purchased ?? signed.addingTimeInterval(-60)
        let isAutoRenewable = transactionOptions.productType == TransactionOptions.productTypes[0]
        expires = self.purchase.expires ?? (isAutoRenewable ? purchased.addingTimeInterval(30 * 86_400) : nil)
    }

    var transactionID: String { transactionOptions.transactionId }
    var originalTransactionID: String { purchase.originalTransactionId ?? transactionID }

    func transaction(bundleID: String, device: DeviceBindingOptions?) -> TransactionBlueprint {
        var blueprint = TransactionBlueprint(bundleID: bundleID, signedDate: signed, environment: options.environment)
        blueprint.transactionID = transactionID
        blueprint.originalTransactionID = originalTransactionID
        blueprint.productID = purchase.productId
        blueprint.type = transactionOptions.productType
        blueprint.purchaseDate = purchased
        blueprint.expiresDate = expires
        blueprint.revocationDate = transactionOptions.revoked
        // Apple always sends a reason with a revocation: 0 "other", 1 "a problem in the app".
        blueprint.revocationReason = transactionOptions.revoked == nil ? nil : 0
        blueprint.deviceVerification = device?.binding
        if !isAutoRenewable {
            blueprint.webOrderLineItemID = nil
            blueprint.edits.omitted.insert("subscriptionGroupIdentifier")
        }
        if let ownership = transactionOptions.ownership {
            blueprint.edits.set.append(("inAppOwnershipType", .string(ownership)))
        }
        return blueprint
    }

    func renewalInfo() -> RenewalInfoBlueprint {
        var blueprint = RenewalInfoBlueprint(signedDate: signed, environment: options.environment)
        blueprint.originalTransactionID = originalTransactionID
        blueprint.productID = purchase.productId
        blueprint.autoRenewStatus = renewalOptions.autoRenew ? 1 : 0
        if let expires { blueprint.edits.set.append(("renewalDate", milliseconds(expires))) }
        if !renewalOptions.autoRenew {
            // 1: the customer cancelled, which is what turning auto-renew off means until the period ends.
            blueprint.edits.set.append(("expirationIntent", .integer(1)))
        }
        if renewalOptions.billingRetry { blueprint.edits.set.append(("isInBillingRetryPeriod", .bool(true))) }
        if let gracePeriodExpires = renewalOptions.gracePeriodExpires {
            blueprint.edits.set.append(("gracePeriodExpiresDate", milliseconds(gracePeriodExpires)))
        }
        return blueprint
    }

    /// `data.status` as Apple reports the subscription after the event.
    func subscriptionStatus(at now: Date) -> Int64 {
        if transactionOptions.revoked != nil { return 5 }
        if let gracePeriodExpires = renewalOptions.gracePeriodExpires, gracePeriodExpires > now { return 4 }
        if renewalOptions.billingRetry { return 3 }
        if let expires, expires <= now { return 2 }
        return 1
    }

    /// `payload` with the JSON object `members` (given as `flag`) merged in and the `omitting` members
    /// (`data.bundleId` for one inside an object) left out.
    func edited(
        _ payload: JSONValue, by members: String?, flag: String, omitting: [String] = []
    ) throws(UsageError) -> JSONValue {
        var result = payload
        if let text = members {
            guard let members = try? JSONValue(parsing: Array(text.utf8)), case .object = members else {
                throw UsageError("\(flag): expected a JSON object of payload members, e.g. '{\"price\": 9990}'")
            }
            result = Self.merged(result, members)
        }
        for path in omitting {
            result = Self.removing(path.split(separator: ".").map(String.init)[...], from: result)
        }
        return result
    }

    private static func merged(_ base: JSONValue, _ edits: JSONValue) -> JSONValue {
        guard case .object(var members) = base, case .object(let changes) = edits else { return edits }
        for change in changes {
            if let index = members.firstIndex(where: { $0.key == change.key }) {
                members[index].value = merged(members[index].value, change.value)
            } else {
                members.append(change)
            }
        }
        return .object(members)
    }

    private static func removing(_ path: ArraySlice<String>, from value: JSONValue) -> JSONValue {
        guard let name = path.first, case .object(let members) = value else { return value }
        if path.count == 1 { return .object(members.filter { $0.key != name }) }
        return .object(members.map { $0.key == name ? ($0.key, removing(path.dropFirst(), from: $0.value)) : $0 })
    }

    func milliseconds(_ date: Date) -> JSONValue { .integer(ReceiptDate(date).millisecondsSince1970) }
}

struct ForgeTransaction: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "transaction",
        abstract: "Signs a StoreKit 2 transaction (Transaction.jwsRepresentation) with the test chain.",
        discussion:
            "It verifies only where DIR/jws-root.pem is in trusted_roots. DATE is RFC 3339 (2026-01-01T00:00:00Z).")

    @Option(help: ArgumentHelp("bundleId.", valueName: "id"))
    var bundleId: String

    @OptionGroup var signedData: SignedDataOptions
    @OptionGroup var purchase: PurchaseOptions
    @OptionGroup var transaction: TransactionOptions
    @OptionGroup var device: DeviceBindingOptions

    func execute() -> Int32 {
        forgeSignedData("transaction", signedData, purchase: purchase, transaction: transaction) { request in
            request.transaction(bundleID: bundleId, device: device).payload
        }
    }
}

struct ForgeRenewalInfo: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "renewal-info",
        abstract: "Signs StoreKit 2 renewal info (a subscription's signedRenewalInfo) with the test chain.",
        discussion: "DATE is RFC 3339 (2026-01-01T00:00:00Z).")

    @OptionGroup var signedData: SignedDataOptions
    @OptionGroup var purchase: PurchaseOptions
    @OptionGroup var renewal: RenewalOptions

    func execute() -> Int32 {
        forgeSignedData("renewal-info", signedData, purchase: purchase, renewal: renewal) { request in
            request.renewalInfo().payload
        }
    }
}

struct ForgeAppTransaction: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "app-transaction",
        abstract: "Signs a StoreKit 2 app transaction (AppTransaction.jwsRepresentation) with the test chain.",
        discussion: "--signed is its receiptCreationDate, the instant its chain is checked at.")

    @Option(help: ArgumentHelp("bundleId.", valueName: "id"))
    var bundleId: String

    @Option(help: ArgumentHelp("applicationVersion (checked against the app's versions).", valueName: "v"))
    var appVersion = "1.0"

    @Option(help: ArgumentHelp("originalApplicationVersion.", valueName: "v"))
    var originalVersion = "1.0"

    @Option(help: ArgumentHelp("appAppleId.", valueName: "n"), transform: appAppleID)
    var appAppleId: Int64?

    @OptionGroup var signedData: SignedDataOptions
    @OptionGroup var device: DeviceBindingOptions

    func execute() -> Int32 {
        forgeSignedData("app-transaction", signedData) { request in
            var blueprint = AppTransactionBlueprint(
                bundleID: bundleId, receiptCreationDate: request.signed, receiptType: signedData.environment)
            blueprint.appAppleID = appAppleId
            blueprint.applicationVersion = appVersion
            blueprint.originalApplicationVersion = originalVersion
            blueprint.deviceVerification = device.binding
            return blueprint.payload
        }
    }
}

struct ForgeNotification: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "notification",
        abstract: "Signs an App Store Server Notification V2 of any type with the test chain.",
        discussion: """
            Unless the type is TEST, it carries a signed transaction and, for an auto-renewable subscription, \
            signed renewal info, both made from the flags of `testing transaction` and `testing renewal-info`; \
            data.status follows them (5 revoked, 3 billing retry, 4 grace period, 2 expired, else 1).
            --post delivers it as the App Store does (POST {"signedPayload": "<JWS>"}, application/json) and prints \
            "HTTP <status>" and the answer's body; it exits 0 on a 2xx answer, else 1.
            """)

    @Option(
        help: ArgumentHelp(
            "notificationType: SUBSCRIBED, DID_RENEW, EXPIRED, REFUND, TEST, or any other.", valueName: "type"))
    var type: String

    @Option(help: ArgumentHelp("subtype.", valueName: "subtype"))
    var subtype: String?

    @Option(help: ArgumentHelp("bundleId.", valueName: "id"))
    var bundleId: String

    @Option(
        help: ArgumentHelp("notificationUUID; default a random one.", valueName: "uuid"),
        transform: { text in try parsed(text, expecting: "a UUID", UUID.init(uuidString:)) })
    var uuid: UUID?

    @Option(help: ArgumentHelp("appAppleId.", valueName: "n"), transform: appAppleID)
    var appAppleId: Int64?

    @Option(
        help: ArgumentHelp(
            "The member that names the app: data (default), summary, appData or externalPurchaseToken.",
            valueName: "name"),
        transform: { text in
            try parsed(
                text, expecting: "data, summary, appData or externalPurchaseToken",
                NotificationBlueprint.Section.init(rawValue:))
        })
    var section: NotificationBlueprint.Section = .data

    @Option(help: ArgumentHelp("As --members, for the signed transaction it carries.", valueName: "json"))
    var transactionMembers: String?

    @Option(help: ArgumentHelp("As --members, for the signed renewal info it carries.", valueName: "json"))
    var renewalMembers: String?

    @Option(help: ArgumentHelp("Deliver it to this http:// or https:// URL as the App Store does.", valueName: "url"))
    var post: String?

    @OptionGroup var signedData: SignedDataOptions
    @OptionGroup var purchase: PurchaseOptions
    @OptionGroup var transaction: TransactionOptions
    @OptionGroup var renewal: RenewalOptions

    func validate() throws {
        if let post { _ = try deliveryURL(post) }
    }

    func execute() -> Int32 {
        let now = Date()
        return forgeSignedData(
            "notification", signedData, purchase: purchase, transaction: transaction, renewal: renewal, now: now,
            post: post
        ) { request throws(UsageError) in
            var blueprint = NotificationBlueprint(
                type: type, subtype: subtype, bundleID: bundleId, signedDate: request.signed,
                environment: signedData.environment)
            if let uuid { blueprint.notificationUUID = uuid.uuidString.lowercased() }
            blueprint.appAppleID = appAppleId
            blueprint.section = section
            // Apple's TEST notification is about no purchase: its data names the app and nothing else.
            if type != "TEST" {
                blueprint.signedTransactionInfo = try request.sign(
                    request.edited(
                        request.transaction(bundleID: bundleId, device: nil).payload, by: transactionMembers,
                        flag: "--transaction-members"))
                if request.isAutoRenewable {
                    blueprint.signedRenewalInfo = try request.sign(
                        request.edited(request.renewalInfo().payload, by: renewalMembers, flag: "--renewal-members"))
                    blueprint.status = request.subscriptionStatus(at: now)
                }
            }
            return blueprint.payload
        }
    }
}

extension SignedDataRequest {
    /// Signs with the test chain; a chain read from disk that cannot sign is reported like a bad `--ca`.
    func sign(_ payload: JSONValue) throws(UsageError) -> String {
        do {
            return try authority.sign(payload)
        } catch {
            throw UsageError("--ca \(options.ca): signing failed: \(error)")
        }
    }
}

/// Signs what `make` builds, and writes it to `--out` or standard output, or delivers it to `--post`.
private func forgeSignedData(
    _ command: String, _ options: SignedDataOptions, purchase: PurchaseOptions? = nil,
    transaction: TransactionOptions? = nil, renewal: RenewalOptions? = nil, now: Date = Date(), post: String? = nil,
    make: (SignedDataRequest) throws(UsageError) -> JSONValue
) -> Int32 {
    let jws: String
    do throws(UsageError) {
        let request = try SignedDataRequest(
            options, purchase: purchase, transaction: transaction, renewal: renewal, now: now)
        jws = try request.sign(
            request.edited(make(request), by: options.members, flag: "--members", omitting: options.omit))
    } catch {
        printError("receiptd testing \(command): \(error)")
        return ExitStatus.usage
    }
    if let output = options.out {
        guard FileManager.default.createFile(atPath: output, contents: Data((jws + "\n").utf8)) else {
            printError("receiptd testing \(command): \(output): cannot write")
            return ExitStatus.failure
        }
    } else if post == nil {
        print(jws)
    }
    guard let post else { return ExitStatus.success }
    return deliver(signedPayload: jws, to: post, command: command)
}

/// A `--post` target libcurl may be given: http:// (a test server) or https://, with a host.
private func deliveryURL(_ target: String) throws -> String {
    let lowered = target.lowercased()
    guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://"),
        let host = URLComponents(string: target)?.host, !host.isEmpty
    else {
        throw ArgumentParser.ValidationError("--post: expected an http:// or https:// URL, not \(target)")
    }
    return target
}

/// `--post`: the answer's status line and body on standard output, as a backend's test would want to see them.
private func deliver(signedPayload: String, to target: String, command: String) -> Int32 {
    let transport = HTTPSTransport(caFile: nil, timeoutSeconds: 10, allowsPlainHTTP: true)
    let request = OutboundRequest(
        method: "POST", url: target,
        headers: [("Content-Type", "application/json"), ("User-Agent", "receiptd-testing")],
        body: JSONValue.object([("signedPayload", .string(signedPayload))]).serialized())
    switch transport.send(request) {
    case .failure(let failure):
        printError("receiptd testing \(command): --post \(target): \(failure.message)")
        return ExitStatus.failure
    case .success(let answer):
        var text = "HTTP \(answer.status)\n" + String(decoding: answer.body, as: UTF8.self)
        if !text.hasSuffix("\n") { text += "\n" }
        StandardStream.output.write(text)
        return (200..<300).contains(answer.status) ? ExitStatus.success : ExitStatus.failure
    }
}
