import ReceiptEngine
import StoreKitJWS
import CryptoFloor

/// The human-readable form of a verdict, for support staff at a terminal.
enum VerdictReport {
    static func text(for result: ValidationResult, file: String?) -> String {
        var lines: [String] = []
        let subject = file.map { "\($0): " } ?? ""
        if let error = result.error {
            lines.append("\(subject)INVALID (\(error.code.rawValue)): \(error.message)")
        } else {
            lines.append("\(subject)VALID")
        }
        let checks = result.checks
        lines.append(
            "  checks: signature \(checks.signature.rawValue), bundle id \(checks.bundleID.rawValue), "
                + "version \(checks.version.rawValue), device hash \(checks.deviceHash.rawValue), "
                + "environment \(checks.environment.rawValue)")
        guard let receipt = result.receipt else { return lines.joined(separator: "\n") }
        let environment = result.environment?.rawValue ?? "unknown"
        lines.append("  environment: \(environment) (receipt type \(receipt.receiptType ?? "absent"))")
        lines.append("  bundle id: \(receipt.bundleID)")
        lines.append(
            "  version: \(receipt.applicationVersion) (originally \(receipt.originalApplicationVersion ?? "unknown"))")
        lines.append("  created: \(receipt.creationDate.rfc3339)")
        if let expiration = receipt.expirationDate { lines.append("  expires: \(expiration.rfc3339)") }
        lines.append("  purchases: \(receipt.inAppPurchases.count)")
        if !receipt.inAppPurchases.isEmpty {
            let rows = receipt.inAppPurchases.map { purchase in
                [
                    purchase.productID ?? "-", purchase.transactionID ?? "-", purchase.originalTransactionID ?? "-",
                    purchase.quantity.map(String.init) ?? "-", purchase.purchaseDate?.rfc3339 ?? "-",
                    purchase.expiresDate?.rfc3339 ?? "-", purchase.cancellationDate?.rfc3339 ?? "-",
                ]
            }
            lines += table(
                header: ["product", "transaction", "original", "qty", "purchased", "expires", "cancelled"], rows: rows
            ).map { "    " + $0 }
        }
        if !result.subscriptions.isEmpty {
            lines.append("  subscriptions: \(result.subscriptions.count)")
            lines += subscriptionTable(result.subscriptions)
        }
        return lines.joined(separator: "\n")
    }

    /// A StoreKit 2 verdict: its kind, checks, and the fields support staff ask about first. Nothing is shown from
    /// a JWS whose signature did not verify (the result holds nothing then), and never the device id it is bound to.
    static func text(for result: JWSValidationResult, file: String?) -> String {
        var lines: [String] = []
        let subject = file.map { "\($0): " } ?? ""
        if let error = result.error {
            let finer = [error.reason?.rawValue, error.detail?.rawValue].compactMap { $0 }.map { ", " + $0 }.joined()
            lines.append("\(subject)INVALID (\(error.code.rawValue)\(finer)): \(error.message)")
        } else {
            lines.append("\(subject)VALID")
        }
        lines.append("  kind: \(result.kind?.rawValue ?? "unknown")")
        let checks = result.checks
        lines.append(
            "  checks: signature \(checks.signature.rawValue), bundle id \(checks.bundleID.rawValue), "
                + "environment \(checks.environment.rawValue), app apple id \(checks.appAppleID.rawValue), "
                + "version \(checks.version.rawValue), device hash \(checks.deviceHash.rawValue)")
        guard result.payload != nil else { return lines.joined(separator: "\n") }
        lines.append("  environment: \(result.environment?.rawValue ?? "unknown")")
        if let signed = result.signedDate { lines.append("  signed: \(signed.rfc3339)") }
        if let notification = result.notification {
            let subtype = notification.subtype.map { " / \($0)" } ?? ""
            lines.append("  notification: \(notification.notificationType ?? "-")\(subtype)")
            lines.append("    uuid: \(notification.notificationUUID ?? "-"), version \(notification.version ?? "-")")
            lines.append(
                "    app: \(notification.bundleID ?? "-")"
                    + (notification.appAppleID.map { " (apple id \($0))" } ?? "")
                    + (notification.status.map { ", status \($0)" } ?? ""))
        }
        if let app = result.appTransaction {
            lines.append(
                "  app transaction: \(show(app.bundleID))" + (app.appAppleID.map { " (apple id \($0))" } ?? "")
                    + ", version \(show(app.applicationVersion)) (originally \(show(app.originalApplicationVersion)))")
            lines.append(
                "    created: \(show(app.receiptCreationDate)), first bought: \(show(app.originalPurchaseDate))")
        }
        if let transaction = result.transaction {
            lines.append(
                "  transaction: \(show(transaction.transactionID)) "
                    + "(original \(show(transaction.originalTransactionID))), "
                    + "product \(show(transaction.productID)), \(show(transaction.bundleID))")
            lines.append(
                "    type: \(show(transaction.type)), quantity \(show(transaction.quantity)), "
                    + "ownership \(show(transaction.inAppOwnershipType))")
            var dates = "    purchased: \(show(transaction.purchaseDate))"
            if let expires = transaction.expiresDate { dates += ", expires: \(expires)" }
            if let revoked = transaction.revocationDate {
                dates += ", revoked: \(revoked) (reason \(show(transaction.revocationReason)))"
            }
            lines.append(dates)
        }
        if let renewal = result.renewalInfo {
            let autoRenew = renewal.autoRenewStatus.map { $0 ? "on" : "off" } ?? "-"
            lines.append(
                "  renewal info: original transaction \(renewal.originalTransactionID ?? "-"), "
                    + "product \(renewal.productID ?? "-"), auto-renew \(autoRenew) "
                    + "(to \(renewal.autoRenewProductID ?? "-"))")
            var states = "    renews: \(show(renewal.renewalDate))"
            if renewal.isInBillingRetryPeriod == true { states += ", in billing retry" }
            if let grace = renewal.gracePeriodExpiresDate { states += ", grace period until \(grace.rfc3339)" }
            if let intent = renewal.expirationIntent { states += ", expiration intent \(intent)" }
            lines.append(states)
        }
        if !result.subscriptions.isEmpty {
            lines.append("  subscriptions: \(result.subscriptions.count)")
            lines += subscriptionTable(result.subscriptions)
        }
        return lines.joined(separator: "\n")
    }

    /// A field as printed; `-` when absent. ReceiptDate describes itself in RFC 3339.
    private static func show(_ value: (some CustomStringConvertible)?) -> String { value?.description ?? "-" }

    private static func subscriptionTable(_ subscriptions: [SubscriptionStatus]) -> [String] {
        let rows = subscriptions.map { subscription in
            [
                subscription.productID ?? "-", subscription.originalTransactionID,
                subscription.latestTransactionID ?? "-", subscription.expiresDate.rfc3339,
                subscription.isActive ? "active" : "inactive", subscription.isCancelled ? "cancelled" : "",
            ]
        }
        return table(header: ["product", "original", "latest", "expires", "state", ""], rows: rows).map { "    " + $0 }
    }

    /// The closing table of a many-file run: how many were valid, and how many failed with each code.
    static func summary(_ tally: [String: Int], unreadable: Int, total: Int, noun: String = "receipts") -> String {
        var rows = tally.sorted { $0.key == "valid" || ($1.key != "valid" && $0.key < $1.key) }
            .map { [$0.key, String($0.value)] }
        if unreadable > 0 { rows.append(["unreadable", String(unreadable)]) }
        rows.append(["total", String(total)])
        return (["", "summary:"] + table(header: ["verdict", noun], rows: rows).map { "  " + $0 })
            .joined(separator: "\n")
    }

    static func table(header: [String], rows: [[String]]) -> [String] {
        let widths = header.indices.map { column in
            ([header] + rows).map { $0[column].count }.max() ?? 0
        }
        func line(_ cells: [String]) -> String {
            zip(cells, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }
                .joined(separator: "  ").trimmedAtEnd(of: " ")
        }
        return [line(header), line(widths.map { String(repeating: "-", count: $0) })] + rows.map(line)
    }
}
