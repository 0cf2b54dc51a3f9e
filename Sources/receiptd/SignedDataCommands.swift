#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import JSONText
import ReceiptEngine
import ReceiptForge
import ReceiptService

// `receiptd testing transaction | renewal-info | app-transaction | notification`: StoreKit 2 signed data made to
// order with the EC test chain that `init-ca` writes beside the receipt PKI.

let forgeTransactionUsage = """
    usage: receiptd testing transaction --ca DIR --bundle-id ID [--transaction-id ID] [--original-transaction-id ID]
                                        [--product-id ID] [--product-type TYPE] [--environment Production|Sandbox|Xcode]
                                        [--purchased DATE] [--expires DATE] [--revoked DATE] [--signed DATE]
                                        [--ownership PURCHASED|FAMILY_SHARED] [--device-id ID [--nonce UUID]]
                                        [--members JSON] [--omit NAME] [--out FILE]
      Signs a StoreKit 2 transaction (Transaction.jwsRepresentation) with the EC test chain in DIR (made by init-ca);
      it verifies only where DIR/jws-root.pem is in trusted_roots.
    \(signedDataFlagHelp(transactionOptions))
    """

let forgeRenewalInfoUsage = """
    usage: receiptd testing renewal-info --ca DIR [--original-transaction-id ID] [--product-id ID]
                                         [--environment Production|Sandbox|Xcode] [--auto-renew true|false]
                                         [--expires DATE] [--grace-period-expires DATE] [--billing-retry]
                                         [--signed DATE] [--members JSON] [--omit NAME] [--out FILE]
      Signs StoreKit 2 renewal info (a subscription's signedRenewalInfo) with the EC test chain in DIR.
    \(signedDataFlagHelp(renewalInfoOptions))
    """

let forgeAppTransactionUsage = """
    usage: receiptd testing app-transaction --ca DIR --bundle-id ID [--app-version V] [--original-version V]
                                            [--app-apple-id N] [--environment Production|Sandbox|Xcode]
                                            [--signed DATE] [--device-id ID [--nonce UUID]] [--members JSON]
                                            [--omit NAME] [--out FILE]
      Signs a StoreKit 2 app transaction (AppTransaction.jwsRepresentation) with the EC test chain in DIR.
      --app-version V   applicationVersion (checked against the app's versions), default 1.0
      --signed DATE     its receiptCreationDate, the instant its chain is checked at
    \(signedDataFlagHelp(appTransactionOptions))
    """

let forgeNotificationUsage = """
    usage: receiptd testing notification --ca DIR --type TYPE [--subtype SUBTYPE] --bundle-id ID [--uuid UUID]
                                         [--app-apple-id N] [transaction and renewal-info flags] [--signed DATE]
                                         [--section NAME] [--members JSON] [--omit NAME]
                                         [--transaction-members JSON] [--renewal-members JSON]
                                         [--out FILE] [--post URL]
      Signs an App Store Server Notification V2 of any type and subtype with the EC test chain in DIR. Unless the
      type is TEST, it carries a signed transaction and, for an auto-renewable subscription, signed renewal info,
      both made from the flags of `testing transaction` and `testing renewal-info`; data.status follows them
      (5 revoked, 3 billing retry, 4 grace period, 2 expired, else 1).
      --type TYPE       notificationType: SUBSCRIBED, DID_RENEW, EXPIRED, REFUND, TEST, or any other
      --uuid UUID       notificationUUID, default a random one
      --post URL        deliver it as the App Store does (POST {"signedPayload": "<JWS>"}, application/json, http://
                        only) and print "HTTP <status>" and the answer's body; exit 0 on a 2xx answer, else 1
      --section NAME    the member that names the app: data (default), summary, appData or externalPurchaseToken
      --transaction-members JSON, --renewal-members JSON
                        as --members, for the signed transaction and the signed renewal info it carries
    \(signedDataFlagHelp(notificationOptions))
    """

/// One line per flag the forges share; each usage lists only the lines of the flags its command accepts, so that
/// `--help` never offers a flag the command refuses.
private let signedDataFlagLines: [(flag: String, help: String)] = [
    ("--signed", "  --signed DATE              signedDate, default now"),
    ("--environment", "  --environment ENV          Production (default, as for receipts), Sandbox or Xcode"),
    ("--purchased", "  --purchased DATE           purchaseDate, default a minute before --signed"),
    ("--expires", "  --expires DATE             expiresDate (and renewalDate), default a month after the purchase"),
    ("--revoked", "  --revoked DATE             revocationDate (a refund)"),
    ("--product-type", """
      --product-type TYPE        Auto-Renewable Subscription (default), Non-Renewing Subscription, Consumable,
                                 Non-Consumable; only a subscription has an expiry unless --expires is given
    """),
    (
        "--transaction-id",
        "  --transaction-id ID        default 2000000000000001; --original-transaction-id defaults to it"
    ),
    ("--auto-renew", "  --auto-renew true|false    autoRenewStatus, default true"),
    (
        "--device-id",
        "  --device-id ID             binds it to a device (deviceVerification) with --nonce or a random nonce"
    ),
    ("--members", """
      --members JSON             a JSON object of payload members to set, after every other flag: a member that
                                 exists is replaced (objects are merged member by member), a new one added; any field
                                 Apple documents, or one it does not, e.g. '{"isUpgraded": true, "price": 9990}'
    """),
    ("--omit", "  --omit NAME                leaves a member out (repeatable; data.bundleId names one in an object)"),
    ("--out", "  --out FILE                 default standard output"),
]

private func signedDataFlagHelp(_ accepted: Set<String>) -> String {
    (["  DATE is RFC 3339 (2026-01-01T00:00:00Z)."]
        + signedDataFlagLines.filter { accepted.contains($0.flag) }.map(\.help)).joined(separator: "\n")
}

/// The signed-data flags of one forging command, read once: dates, identifiers, the chain to sign with.
private struct SignedDataRequest {
    let authority: JWSTestAuthority
    let reader: ArgumentReader
    let signed: Date
    let environment: String
    let purchased: Date
    let expires: Date?
    let revoked: Date?
    let isAutoRenewable: Bool
    let productType: String
    let transactionID: String
    let originalTransactionID: String
    let productID: String
    let autoRenew: Bool
    let gracePeriodExpires: Date?
    let device: DeviceIdentifier?
    let nonce: UUID?
    let appAppleID: Int64?

    static let productTypes = [
        "Auto-Renewable Subscription", "Non-Renewing Subscription", "Consumable", "Non-Consumable",
    ]

    init(_ reader: ArgumentReader, now: Date) throws(UsageError) {
        self.reader = reader
        try reader.expectPositional(atMost: 0)
        let directory = try reader.required("--ca")
        do {
            authority = try JWSTestAuthority(directory: directory)
        } catch {
            throw UsageError("--ca: \(error)")
        }
        func date(_ flag: String) throws(UsageError) -> Date? {
            try reader.value(flag, expecting: "an RFC 3339 date (2026-01-01T00:00:00Z)") {
                ReceiptDate(rfc3339: $0)?.date
            }
        }
        signed = try date("--signed") ?? now
        environment =
            try reader.value("--environment", expecting: "Production, Sandbox or Xcode") {
                ["Production", "Sandbox", "Xcode"].contains($0) ? $0 : nil
            } ?? "Production"
        purchased = try date("--purchased") ?? signed.addingTimeInterval(-60)
        productType =
            try reader.value("--product-type", expecting: Self.productTypes.joined(separator: ", ")) {
                Self.productTypes.contains($0) ? $0 : nil
            } ?? Self.productTypes[0]
        isAutoRenewable = productType == Self.productTypes[0]
        expires = try date("--expires") ?? (isAutoRenewable ? purchased.addingTimeInterval(30 * 86_400) : nil)
        revoked = try date("--revoked")
        gracePeriodExpires = try date("--grace-period-expires")
        transactionID = reader.value("--transaction-id") ?? "2000000000000001"
        originalTransactionID = reader.value("--original-transaction-id") ?? transactionID
        productID = reader.value("--product-id") ?? "pro.monthly"
        autoRenew =
            try reader.value("--auto-renew", expecting: "true or false") { ["true": true, "false": false][$0] } ?? true
        device = try reader.value("--device-id", expecting: deviceIdentifierForm, DeviceIdentifier.init)
        nonce = try reader.value("--nonce", expecting: "a UUID", UUID.init(uuidString:))
        if nonce != nil, device == nil { throw UsageError("--nonce: needs --device-id") }
        appAppleID = try reader.value("--app-apple-id", expecting: "a positive integer") {
            Int64($0).flatMap { $0 > 0 ? $0 : nil }
        }
    }

    /// The device binding StoreKit signs: SHA-384 over the nonce and the device id.
    var deviceBinding: (value: String, nonce: UUID)? {
        device.map { device in
            let nonce = nonce ?? UUID()
            return (deviceVerification(device: device, nonce: nonce), nonce)
        }
    }

    func transaction(bundleID: String) throws(UsageError) -> TransactionBlueprint {
        var blueprint = TransactionBlueprint(bundleID: bundleID, signedDate: signed, environment: environment)
        blueprint.transactionID = transactionID
        blueprint.originalTransactionID = originalTransactionID
        blueprint.productID = productID
        blueprint.type = productType
        blueprint.purchaseDate = purchased
        blueprint.expiresDate = expires
        blueprint.revocationDate = revoked
        // Apple always sends a reason with a revocation: 0 "other", 1 "a problem in the app".
        blueprint.revocationReason = revoked == nil ? nil : 0
        blueprint.deviceVerification = deviceBinding
        if !isAutoRenewable {
            blueprint.webOrderLineItemID = nil
            blueprint.edits.omitted.insert("subscriptionGroupIdentifier")
        }
        if let ownership = try reader.value(
            "--ownership", expecting: "PURCHASED or FAMILY_SHARED",
            { ["PURCHASED", "FAMILY_SHARED"].contains($0) ? $0 : nil })
        {
            blueprint.edits.set.append(("inAppOwnershipType", .string(ownership)))
        }
        return blueprint
    }

    func renewalInfo() -> RenewalInfoBlueprint {
        var blueprint = RenewalInfoBlueprint(signedDate: signed, environment: environment)
        blueprint.originalTransactionID = originalTransactionID
        blueprint.productID = productID
        blueprint.autoRenewStatus = autoRenew ? 1 : 0
        if let expires { blueprint.edits.set.append(("renewalDate", milliseconds(expires))) }
        if !autoRenew {
            // 1: the customer cancelled, which is what turning auto-renew off means until the period ends.
            blueprint.edits.set.append(("expirationIntent", .integer(1)))
        }
        if reader.isSet("--billing-retry") { blueprint.edits.set.append(("isInBillingRetryPeriod", .bool(true))) }
        if let gracePeriodExpires {
            blueprint.edits.set.append(("gracePeriodExpiresDate", milliseconds(gracePeriodExpires)))
        }
        return blueprint
    }

    /// `data.status` as Apple reports the subscription after the event.
    func subscriptionStatus(at now: Date) -> Int64 {
        if revoked != nil { return 5 }
        if let gracePeriodExpires, gracePeriodExpires > now { return 4 }
        if reader.isSet("--billing-retry") { return 3 }
        if let expires, expires <= now { return 2 }
        return 1
    }

    /// `payload` with the JSON object of `flag` merged in and the `omitting` members (`data.bundleId` for one
    /// inside an object) left out.
    func edited(_ payload: JSONValue, by flag: String, omitting: [String] = []) throws(UsageError) -> JSONValue {
        var result = payload
        if let text = reader.value(flag) {
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

/// Every forge: the chain, when it was signed, where, and where it goes.
private let commonOptions: Set = ["--signed", "--environment", "--out", "--ca", "--members", "--omit"]
private let transactionFlags: Set = [
    "--bundle-id", "--transaction-id", "--original-transaction-id", "--product-id", "--product-type", "--purchased",
    "--expires", "--revoked", "--ownership",
]
private let renewalFlags: Set = [
    "--original-transaction-id", "--product-id", "--auto-renew", "--expires", "--grace-period-expires",
]
private let deviceFlags: Set = ["--device-id", "--nonce"]
private let transactionOptions = commonOptions.union(transactionFlags).union(deviceFlags)
private let renewalInfoOptions = commonOptions.union(renewalFlags)
private let appTransactionOptions = commonOptions.union(deviceFlags).union([
    "--bundle-id", "--app-version", "--original-version", "--app-apple-id",
])
private let notificationOptions = commonOptions.union(transactionFlags).union(renewalFlags).union([
    "--type", "--subtype", "--uuid", "--app-apple-id", "--post", "--section", "--transaction-members",
    "--renewal-members",
])

func runForgeTransaction(_ arguments: [String]) -> Int32 {
    forgeSignedData(
        "transaction", arguments, usage: forgeTransactionUsage,
        options: transactionOptions
    ) { request in
        try request.transaction(bundleID: request.reader.required("--bundle-id")).payload
    }
}

func runForgeRenewalInfo(_ arguments: [String]) -> Int32 {
    forgeSignedData(
        "renewal-info", arguments, usage: forgeRenewalInfoUsage,
        options: renewalInfoOptions, flags: ["--billing-retry"]
    ) { request in
        request.renewalInfo().payload
    }
}

func runForgeAppTransaction(_ arguments: [String]) -> Int32 {
    forgeSignedData(
        "app-transaction", arguments, usage: forgeAppTransactionUsage,
        options: appTransactionOptions
    ) { request in
        var blueprint = AppTransactionBlueprint(
            bundleID: try request.reader.required("--bundle-id"), receiptCreationDate: request.signed,
            receiptType: request.environment)
        blueprint.appAppleID = request.appAppleID
        blueprint.applicationVersion = request.reader.value("--app-version") ?? "1.0"
        blueprint.originalApplicationVersion = request.reader.value("--original-version") ?? "1.0"
        blueprint.deviceVerification = request.deviceBinding
        return blueprint.payload
    }
}

func runForgeNotification(_ arguments: [String]) -> Int32 {
    let now = Date()
    return forgeSignedData(
        "notification", arguments, usage: forgeNotificationUsage,
        options: notificationOptions,
        flags: ["--billing-retry"], now: now
    ) { request in
        let reader = request.reader
        let type = try reader.required("--type")
        var blueprint = NotificationBlueprint(
            type: type, subtype: reader.value("--subtype"), bundleID: try reader.required("--bundle-id"),
            signedDate: request.signed, environment: request.environment)
        if let uuid = try reader.value("--uuid", expecting: "a UUID", UUID.init(uuidString:)) {
            blueprint.notificationUUID = uuid.uuidString.lowercased()
        }
        blueprint.appAppleID = request.appAppleID
        if let section = try reader.value(
            "--section", expecting: "data, summary, appData or externalPurchaseToken",
            NotificationBlueprint.Section.init(rawValue:))
        {
            blueprint.section = section
        }
        // Apple's TEST notification is about no purchase: its data names the app and nothing else.
        if type != "TEST" {
            blueprint.signedTransactionInfo = try request.authority.sign(
                request.edited(request.transaction(bundleID: blueprint.bundleID).payload, by: "--transaction-members"))
            if request.isAutoRenewable {
                blueprint.signedRenewalInfo = try request.authority.sign(
                    request.edited(request.renewalInfo().payload, by: "--renewal-members"))
                blueprint.status = request.subscriptionStatus(at: now)
            }
        }
        return blueprint.payload
    }
}

/// Reads the flags, signs what `make` builds, and writes it to `--out` or standard output, or delivers it to
/// `--post`. A signing failure (which a chain read from disk should never cause) exits 1.
private func forgeSignedData(
    _ command: String, _ arguments: [String], usage: String, options: Set<String>, flags: Set<String> = [],
    now: Date = Date(), make: (SignedDataRequest) throws -> JSONValue
) -> Int32 {
    let request: SignedDataRequest
    do {
        let reader = try ArgumentReader(arguments, options: options, flags: flags)
        if reader.wantsHelp {
            print(usage)
            return ExitStatus.success
        }
        request = try SignedDataRequest(reader, now: now)
    } catch {
        printError("receiptd testing \(command): \(error)\n\n\(usage)")
        return ExitStatus.usage
    }
    let jws: String
    do {
        let payload = try request.edited(make(request), by: "--members", omitting: request.reader.values("--omit"))
        jws = try request.authority.sign(payload)
    } catch let error as UsageError {
        printError("receiptd testing \(command): \(error)\n\n\(usage)")
        return ExitStatus.usage
    } catch {
        printError("receiptd testing \(command): signing failed: \(error)")
        return ExitStatus.failure
    }
    let target = request.reader.value("--post")
    if let output = request.reader.value("--out") {
        guard FileManager.default.createFile(atPath: output, contents: Data((jws + "\n").utf8)) else {
            printError("receiptd testing \(command): \(output): cannot write")
            return ExitStatus.failure
        }
    } else if target == nil {
        print(jws)
    }
    guard let target else { return ExitStatus.success }
    return deliver(signedPayload: jws, to: target, command: command)
}

/// `--post`: the answer's status line and body on standard output, as a backend's test would want to see them.
private func deliver(signedPayload: String, to target: String, command: String) -> Int32 {
    let answer: HTTPAnswer
    do {
        answer = try NotificationDelivery.post(signedPayload: signedPayload, to: target)
    } catch let error as NotificationDelivery.TargetError {
        printError("receiptd testing \(command): --post: \(error)")
        return ExitStatus.usage
    } catch {
        printError("receiptd testing \(command): --post \(target): \(error)")
        return ExitStatus.failure
    }
    var text = "HTTP \(answer.status)\n" + String(decoding: answer.body, as: UTF8.self)
    if !text.hasSuffix("\n") { text += "\n" }
    StandardStream.output.write(text)
    return (200..<300).contains(answer.status) ? ExitStatus.success : ExitStatus.failure
}
