import ReceiptEngine

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
            let rows = result.subscriptions.map { subscription in
                [
                    subscription.productID ?? "-", subscription.originalTransactionID,
                    subscription.latestTransactionID ?? "-", subscription.expiresDate.rfc3339,
                    subscription.isActive ? "active" : "inactive", subscription.isCancelled ? "cancelled" : "",
                ]
            }
            lines += table(header: ["product", "original", "latest", "expires", "state", ""], rows: rows)
                .map { "    " + $0 }
        }
        return lines.joined(separator: "\n")
    }

    /// The closing table of a many-file run: how many were valid, and how many failed with each code.
    static func summary(_ tally: [String: Int], unreadable: Int, total: Int) -> String {
        var rows = tally.sorted { $0.key == "valid" || ($1.key != "valid" && $0.key < $1.key) }
            .map { [$0.key, String($0.value)] }
        if unreadable > 0 { rows.append(["unreadable", String(unreadable)]) }
        rows.append(["total", String(total)])
        return (["", "summary:"] + table(header: ["verdict", "receipts"], rows: rows).map { "  " + $0 })
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
