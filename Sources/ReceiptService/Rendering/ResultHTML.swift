public import ReceiptEngine
public import StoreKitJWS
import JSONText

/// The verdict as a small self-contained page, for a person who posted the support form from a browser.
///
/// Everything taken from a receipt or a request is escaped: a receipt's strings are attacker-chosen, and this page
/// is served from the same origin as the form.
public enum ResultHTML {
    public static func page(_ result: ValidationResult) -> String {
        var body = verdict(result.error, valid: "Valid receipt", environment: result.environment)

        body += "<h2>Checks</h2>\n"
        body += table(
            id: "checks", header: ["Check", "Outcome"],
            rows: [
                ["Signature", result.checks.signature.rawValue],
                ["Bundle ID", result.checks.bundleID.rawValue],
                ["Version", result.checks.version.rawValue],
                ["Device hash", result.checks.deviceHash.rawValue],
                ["Environment", result.checks.environment.rawValue],
            ])

        if let receipt = result.receipt {
            body += "<h2>Receipt</h2>\n"
            body += table(
                id: "receipt", header: ["Field", "Value"],
                rows: [
                    ["Bundle ID", receipt.bundleID],
                    ["Application version", receipt.applicationVersion],
                    ["Original application version", receipt.originalApplicationVersion ?? "—"],
                    ["Receipt type", receipt.receiptType ?? "—"],
                    ["App item ID", receipt.appItemID.map(String.init) ?? "—"],
                    ["Created", receipt.creationDate.rfc3339],
                    ["Expires", receipt.expirationDate?.rfc3339 ?? "—"],
                    ["Originally purchased", receipt.originalPurchaseDate?.rfc3339 ?? "—"],
                ])
            body += "<h2>Purchases</h2>\n"
            if receipt.inAppPurchases.isEmpty {
                body += "<p>No in-app purchases.</p>\n"
            } else {
                body += table(
                    id: "purchases", header: ["Product", "Quantity", "Transaction", "Original transaction", "Purchased", "Expires",
                             "Cancelled", "Trial"],
                    rows: receipt.inAppPurchases.map { purchase in
                        [
                            purchase.productID ?? "—", purchase.quantity.map(String.init) ?? "—",
                            purchase.transactionID ?? "—", purchase.originalTransactionID ?? "—",
                            purchase.purchaseDate?.rfc3339 ?? "—", purchase.expiresDate?.rfc3339 ?? "—",
                            purchase.cancellationDate?.rfc3339 ?? "—", purchase.isTrialPeriod ? "yes" : "no",
                        ]
                    })
            }
        }

        if !result.subscriptions.isEmpty {
            body += "<h2>Subscriptions</h2>\n"
            body += table(
                id: "subscriptions", header: ["Product", "Original transaction", "Latest transaction", "Expires", "Active", "Cancelled"],
                rows: result.subscriptions.map { status in
                    [
                        status.productID ?? "—", status.originalTransactionID, status.latestTransactionID ?? "—",
                        status.expiresDate.rfc3339, status.isActive ? "yes" : "no", status.isCancelled ? "yes" : "no",
                    ]
                })
        }
        return document(title: title(result.error, valid: "Valid receipt", invalid: "Receipt not valid"), body: body)
    }

    /// A StoreKit 2 verdict: the same verdict and checks as a receipt's, then every normalized field of what was
    /// signed (a notification's nested transaction and renewal info too).
    public static func page(_ result: JWSValidationResult) -> String {
        let kind = result.kind?.subject ?? "JWS"
        var body = verdict(result.error, valid: "Valid \(kind)", environment: result.environment)
        body += "<h2>Checks</h2>\n"
        body += table(
            id: "checks", header: ["Check", "Outcome"],
            rows: [
                ["Signature", result.checks.signature.rawValue], ["Bundle ID", result.checks.bundleID.rawValue],
                ["Environment", result.checks.environment.rawValue], ["App Apple ID", result.checks.appAppleID.rawValue],
                ["Version", result.checks.version.rawValue], ["Device hash", result.checks.deviceHash.rawValue],
            ])
        let sections: [(id: String, title: String, value: JSONValue?)] = [
            ("notification", "Notification", result.notification.map(JWSResultJSON.notification)),
            ("transaction", "Transaction", result.transaction.map(JWSResultJSON.transaction)),
            ("renewal-info", "Renewal info", result.renewalInfo.map(JWSResultJSON.renewalInfo)),
            ("app-transaction", "App transaction", result.appTransaction.map(JWSResultJSON.appTransaction)),
        ]
        for section in sections {
            guard case .object(let members)? = section.value else { continue }
            body += "<h2>\(section.title)</h2>\n"
            body += table(
                id: section.id, header: ["Field", "Value"],
                rows: members.map { member in [member.key, Self.text(member.value)] })
        }
        return document(title: title(result.error, valid: "Valid \(kind)", invalid: "Not a valid \(kind)"), body: body)
    }

    /// The page's headline names what failed (the device id, the app…) when the code says which.
    private static func title(_ error: ValidationError?, valid: String, invalid: String) -> String {
        guard let error else { return valid }
        return SupportPage.headlines[error.code.rawValue] ?? invalid
    }

    /// The verdict line, the error's sentence and code, the environment. The ids and sentences match the support
    /// page's script, so the form reads the same with or without it.
    private static func verdict(_ error: ValidationError?, valid: String, environment: ReceiptEnvironment?) -> String {
        var body = ""
        if let error {
            let headline = SupportPage.headlines[error.code.rawValue].map { ": " + $0 } ?? ""
            body += "<p id=\"verdict\" data-state=\"invalid\" class=\"verdict invalid\">"
            body += "Not valid\(escape(headline))</p>\n"
            body += "<p id=\"error\">\(escape(SupportPage.sentence(for: error.code.rawValue)))<br>"
            if let reason = error.reason, let said = SupportPage.reasonSentences[reason.rawValue] {
                body += "\(escape(said))<br>"
            }
            body += "\(escape(error.message)) <code>\(escape(error.code.rawValue))</code></p>\n"
        } else {
            body += "<p id=\"verdict\" data-state=\"valid\" class=\"verdict valid\">\(escape(valid))</p>\n"
        }
        if let environment { body += "<p>Environment: \(escape(environment.rawValue))</p>\n" }
        return body
    }

    private static func text(_ value: JSONValue) -> String {
        switch value {
        case .null: "—"
        case .string(let text): text
        default: String(decoding: value.serialized(), as: UTF8.self)
        }
    }

    /// A page for a request that never reached the engine (bad upload, wrong type).
    public static func errorPage(status: Int, code: String, message: String, reason: String? = nil) -> String {
        let said = reason.flatMap { SupportPage.reasonSentences[$0] }.map { escape($0) + "<br>" } ?? ""
        return document(
            title: "Request not accepted",
            body: "<p id=\"verdict\" data-state=\"error\" class=\"verdict invalid\">"
                + "\(escape(SupportPage.sentence(for: code)))</p>\n"
                + "<p id=\"error\">\(said)\(escape(message)) <code>\(escape(code))</code> (HTTP \(status))</p>\n")
    }

    /// Text as HTML content or a quoted attribute value. The one HTML escaper; each output format has its own
    /// (JSON in JSONText, log lines in ServiceLog), however alike their switches look.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }

    private static func table(id: String, header: [String], rows: [[String]]) -> String {
        var html = "<table id=\"\(id)\">\n<tr>" + header.map { "<th>\(escape($0))</th>" }.joined() + "</tr>\n"
        for row in rows {
            html += "<tr>" + row.map { "<td>\(escape($0))</td>" }.joined() + "</tr>\n"
        }
        return html + "</table>\n"
    }

    /// The page every HTML answer is: `style`, `heading` and `footer` go in as HTML, unescaped.
    static func document(title: String, style: String, heading: String, body: String, footer: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title)) — receiptd</title>
        <style>
        \(style)</style>
        </head>
        <body>
        <h1>\(heading)</h1>
        \(body)\(footer)
        </body>
        </html>

        """
    }

    private static func document(title: String, body: String) -> String {
        document(
            title: title, style: style, heading: escape(title), body: body,
            footer: "<p><a href=\"/\">Check another receipt</a></p>")
    }

    private static let style = """
        body { font: 15px/1.5 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; padding: 0 1rem; color: #222; }
        table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; }
        th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: left; vertical-align: top; }
        th { background: #f4f4f4; }
        .verdict { font-size: 1.3rem; font-weight: 600; }
        .valid { color: #176f2c; }
        .invalid { color: #a11d1d; }
        code { font-size: 0.9em; color: #555; }

        """
}
