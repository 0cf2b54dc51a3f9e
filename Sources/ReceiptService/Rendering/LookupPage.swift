import HTTP1Server
import JSONText
import Ledger
import ReceiptEngine

/// The answer of `GET /lookup`: the ledger's view of one or more subscriptions, for support staff.
///
/// One self-contained document with no script and no external asset: the status now, a drawn timeline (inline SVG,
/// see ``SubscriptionTimeline``), a legend, and a table of the same events for screen readers and for copying. Every
/// value from the ledger is escaped; what Apple signed is still attacker-chosen text once a test root is trusted.
///
/// Accounts that claimed a transaction are shown: answering "where is my purchase?" needs to know which account it
/// was granted to, and the page is behind the `support` scope. Device ids are never stored, so never shown.
///
/// Hooks for tests: `#lookup-form`, `#lookup-id`, `#lookup-verdict` (`data-state` `found` or `error`, `data-code`
/// on errors), one `section.subscription` per subscription with `data-original-transaction-id`, `.status`
/// (`data-status`), `svg.timeline`, `table.events` (rows with `data-event` and `data-date`, Unix milliseconds, in date
/// order), `table.transactions`. An account (`/lookup?account=`): `#lookup-verdict` with `data-matched="account"`,
/// `ul.entitlements` (one `li` per entitlement with `data-entitlement` and `data-active`), the sections above for its
/// subscriptions, and `table.purchases` (rows with `data-transaction-id`, newest first).
///
/// With webhooks configured, the events sent for the account (its page) or for each subscription (an id's page):
/// `table.webhook-events` (rows with `data-event-id`, `data-type`, `data-sequence`, `data-created-at` in Unix
/// milliseconds, newest first), each row's `li.delivery` with `data-webhook`, `data-state` and `data-attempts`.
enum LookupPage {
    /// What was looked up, and what the ledger knows of it.
    struct Found: Sendable {
        /// How the id was recognised; the page's `data-matched`.
        enum Match: String, Sendable {
            case transaction
            case originalTransaction = "original_transaction"
            case order
            case account
        }

        var matchedAs: Match
        var subscriptions: [Subscription]
    }

    struct Subscription: Sendable {
        var facts: SubscriptionFacts
        /// Claims by transaction id.
        var claims: [String: Claim]
        /// The outbox's events for the original transaction, newest first; nil: not shown (no webhooks, or the
        /// account's page lists them once for all its subscriptions).
        var webhookEvents: [OutboxEvent]? = nil
        /// Apple's refund questions about its transactions, newest first.
        var consumptionRequests: [ConsumptionRequest] = []
    }

    /// How many events a page lists at most: the newest, which are the ones support asks about.
    static let webhookEventLimit = 50

    static func page(id: String, found: Found, now: Int64) -> String {
        var body = form(id: id)
        let what =
            switch found.matchedAs {
            case .order: "order \(id)"
            case .originalTransaction: "original transaction \(id)"
            case .transaction: "transaction \(id)"
            case .account: "account \(id)"
            }
        let count = found.subscriptions.count
        body += "<p id=\"lookup-verdict\" data-state=\"found\" data-matched=\"\(found.matchedAs.rawValue)\">"
            + "Found \(escape(what))"
            + (found.matchedAs == .order ? ": \(count) purchase\(count == 1 ? "" : "s")" : "")
            + " <span class=\"muted\">as of \(escape(dateText(now)))</span></p>\n"
        if found.subscriptions.isEmpty {
            body += "<p class=\"muted\">Nothing to show: no transaction in Apple's answer verified.</p>\n"
        }
        for (index, subscription) in found.subscriptions.enumerated() {
            body += section(subscription, index: index, now: now)
        }
        if found.subscriptions.contains(where: { $0.facts.isAutoRenewable }) { body += extendScript }
        return document(title: "Lookup: \(what)", body: body)
    }

    /// A lookup that found nothing, or could not ask: the code and message, and the box to try again.
    static func errorPage(id: String, problem: RequestProblem) -> String {
        let sentence =
            switch problem.code {
            case .notFound: "The ledger has never seen this id."
            case .orderNotFound: "Apple knows no such order."
            case .badRequest: "This is not an id that can be looked up."
            case .serverAPINotConfigured: "Order lookups need the App Store Server API."
            case .serverAPIUnavailable: "Apple could not be asked right now. Try again shortly."
            case .serverAPIBusy: "Too many lookups are waiting on Apple right now. Try again shortly."
            case .storeNotConfigured: "This server keeps no ledger."
            case .storeUnavailable: "The ledger cannot be reached right now. Try again shortly."
            case .accountNotFound: "The ledger holds nothing of this account."
            default: "The lookup failed."
            }
        let body = form(id: id)
            + "<p id=\"lookup-verdict\" data-state=\"error\" data-code=\"\(escape(problem.code.rawValue))\">"
            + "\(escape(sentence))</p>\n"
            + "<p id=\"lookup-error\">\(escape(problem.message)) <code>\(escape(problem.code.rawValue))</code> "
            + "(HTTP \(problem.status.code))</p>\n"
        return document(title: "Lookup: nothing shown", body: body)
    }

    /// The lookup boxes; the support page has the same ones.
    static func form(id: String, account: String = "") -> String {
        """
        <form id="lookup-form" method="get" action="/lookup" role="search">
        <label for="lookup-id">Order id, transaction id or original transaction id</label>
        <input id="lookup-id" name="id" type="text" value="\(escape(id))" required autocomplete="off" spellcheck="false">
        <button type="submit">Look up</button>
        </form>
        <form id="account-lookup-form" method="get" action="/lookup" role="search">
        <label for="lookup-account">Account (the backend's user id)</label>
        <input id="lookup-account" name="account" type="text" value="\(escape(account))" required autocomplete="off" spellcheck="false">
        <button type="submit">Look up</button>
        </form>

        """
    }

    /// An account: what it may use now (a line per entitlement: active or not, until when, why), each subscription's
    /// timeline, then every purchase linked to it.
    static func accountPage(
        account: String, summary: AccountSummary, subscriptions: [Subscription], webhookEvents: [OutboxEvent]? = nil,
        now: Int64
    ) -> String {
        var body = form(id: "", account: account)
        body += "<p id=\"lookup-verdict\" data-state=\"found\" data-matched=\"account\">"
            + "Found account <span class=\"mono\">\(escape(account))</span>"
            + " <span class=\"muted\">as of \(escape(dateText(now)))</span></p>\n"
        body += "<h2>Entitlements</h2>\n<ul class=\"entitlements\">\n"
        let entitlements = summary.entitlements
        if entitlements.isEmpty { body += "<li class=\"muted\">None: no linked purchase grants an entitlement.</li>\n" }
        for line in entitlements {
            let until = line.until.map { ReceiptDate(rfc3339: $0).map { dateText($0.millisecondsSince1970) } ?? $0 }
            let state = line.isActive
                ? "Active" + (until.map { " until \($0)" } ?? ", with no end")
                : "Not active" + (until.map { " since \($0)" } ?? "")
            body += "<li data-entitlement=\"\(escape(line.name))\" data-active=\"\(line.isActive)\">"
                + "<strong class=\"mono\">\(escape(line.name))</strong>: \(escape(state)) "
                + "<span class=\"muted\">(\(escape(line.why)))</span></li>\n"
        }
        body += "</ul>\n"
        for (index, subscription) in subscriptions.enumerated() {
            body += section(subscription, index: index, now: now)
        }
        body += "<h2>Purchases</h2>\n<table class=\"purchases\">\n<caption>Every transaction linked to the account, "
            + "newest first</caption>\n<thead><tr><th scope=\"col\">Transaction</th><th scope=\"col\">Original</th>"
            + "<th scope=\"col\">Product</th><th scope=\"col\">Purchased</th><th scope=\"col\">Expires</th>"
            + "<th scope=\"col\">Revoked</th><th scope=\"col\">Environment</th></tr></thead>\n<tbody>\n"
        let purchases: [JSONValue]
        if case .array(let items)? = summary.json["purchases"] { purchases = items } else { purchases = [] }
        func text(_ value: JSONValue?) -> String {
            if case .string(let text)? = value { return text }
            return "—"
        }
        func date(_ value: JSONValue?) -> String {
            if case .string(let text)? = value, let date = ReceiptDate(rfc3339: text) {
                return dateText(date.millisecondsSince1970)
            }
            return "—"
        }
        for purchase in purchases {
            body += "<tr data-transaction-id=\"\(escape(text(purchase["transaction_id"])))\">"
                + "<td class=\"mono\">\(escape(text(purchase["transaction_id"])))</td>"
                + "<td class=\"mono\">\(escape(text(purchase["original_transaction_id"])))</td>"
                + "<td class=\"mono\">\(escape(text(purchase["product_id"])))</td>"
                + "<td>\(escape(date(purchase["purchase_date"])))</td><td>\(escape(date(purchase["expires_date"])))</td>"
                + "<td>\(escape(date(purchase["revocation_date"])))</td><td>\(escape(text(purchase["environment"])))</td></tr>\n"
        }
        if purchases.isEmpty { body += "<tr><td colspan=\"7\">No purchase is linked to the account.</td></tr>\n" }
        body += "</tbody>\n</table>\n"
        if let webhookEvents {
            body += "<h2>Webhook events</h2>\n" + webhookTable(webhookEvents, of: "the account")
        }
        return document(title: "Lookup: account", body: body)
    }

    private static func section(_ subscription: Subscription, index: Int, now: Int64) -> String {
        let facts = subscription.facts
        let latest = facts.latestTransaction
        let renewal = facts.renewal
        let product = latest?.productID ?? renewal?.productID ?? "unknown product"
        let (status, statusText) = currentStatus(facts, now: now)
        var html = "<section class=\"subscription\" data-original-transaction-id=\"\(escape(facts.originalTransactionID))\">\n"
        html += "<h2>\(facts.isAutoRenewable ? "Subscription" : "Purchase") "
            + "<span class=\"mono\">\(escape(facts.originalTransactionID))</span>: \(escape(product))</h2>\n"
        html += "<p class=\"status\" data-status=\"\(escape(status))\"><strong>\(escape(headline(status)))</strong>"
            + (statusText.isEmpty ? "" : ": \(escape(statusText))") + " <code>\(escape(status))</code></p>\n"

        var details: [(String, String)] = [
            ("Product", product), ("Environment", latest?.environment ?? renewal?.environment ?? "—"),
        ]
        if facts.isAutoRenewable {
            details += [
                ("Expires", latest?.expiresDate.map(dateText) ?? "—"),
                ("Auto-renew", renewal?.autoRenewStatus.map { $0 ? "on" : "off" } ?? "—"),
                ("Renews to", renewal?.autoRenewProductID ?? "—"),
                ("Billing retry", renewal?.isInBillingRetryPeriod.map { $0 ? "yes" : "no" } ?? "—"),
                ("Grace period ends", renewal?.gracePeriodExpiresDate.map(dateText) ?? "—"),
                ("Expiration intent", renewal?.expirationIntent.map(expirationIntentText) ?? "—"),
            ]
        }
        details += [
            (
                "Last notification",
                facts.lastNotification.map {
                    $0.type + ($0.subtype.map { " / \($0)" } ?? "") + ", " + dateText($0.signedDate)
                } ?? "—"
            ),
            ("Ledger updated", dateText(facts.updatedAt)),
        ]
        html += "<dl class=\"details\">"
            + details.map { "<dt>\(escape($0.0))</dt><dd>\(escape($0.1))</dd>" }.joined() + "</dl>\n"

        let timeline = SubscriptionTimeline(facts, now: now)
        html += "<h3>Timeline</h3>\n<figure>\n" + timeline.svg(index: index) + "\n"
        html += "<figcaption>" + legend(timeline) + "</figcaption>\n</figure>\n"

        html += "<h3>Events</h3>\n<table class=\"events\">\n<caption>The timeline's events, oldest first</caption>\n"
        html += "<thead><tr><th scope=\"col\">Date (UTC)</th><th scope=\"col\">Event</th>"
            + "<th scope=\"col\">Transaction</th><th scope=\"col\">Product</th><th scope=\"col\">Details</th></tr></thead>\n<tbody>\n"
        for event in timeline.events {
            let detail = event.kind == "now" ? headline(status) : event.detail
            html += "<tr data-event=\"\(escape(event.kind))\" data-date=\"\(event.date)\"><td>\(escape(dateText(event.date)))</td>"
                + "<td>\(escape(event.title))</td><td class=\"mono\">\(escape(event.transactionID ?? "—"))</td>"
                + "<td class=\"mono\">\(escape(event.productID ?? "—"))</td><td>\(escape(detail))</td></tr>\n"
        }
        html += "</tbody>\n</table>\n"

        html += "<h3>Transactions</h3>\n<table class=\"transactions\">\n"
        html += "<thead><tr><th scope=\"col\">Transaction</th><th scope=\"col\">Product</th><th scope=\"col\">Purchased</th>"
            + "<th scope=\"col\">Expires</th><th scope=\"col\">Revoked</th><th scope=\"col\">Claimed by</th></tr></thead>\n<tbody>\n"
        // Newest first, as the ledger's JSON lists them.
        for transaction in facts.transactions {
            let revoked = transaction.revocationDate.map {
                dateText($0) + " (" + revocationReasonText(transaction.revocationReason) + ")"
            } ?? (transaction.isUpgraded == true ? "upgraded" : "no")
            let claim = subscription.claims[transaction.transactionID].map { "\($0.account), \(dateText($0.claimedAt))" }
                ?? "not claimed"
            html += "<tr data-transaction-id=\"\(escape(transaction.transactionID))\">"
                + "<td class=\"mono\">\(escape(transaction.transactionID))</td><td class=\"mono\">\(escape(transaction.productID))</td>"
                + "<td>\(escape(transaction.purchaseDate.map(dateText) ?? "—"))</td>"
                + "<td>\(escape(transaction.expiresDate.map(dateText) ?? "—"))</td>"
                + "<td>\(escape(revoked))</td><td class=\"claim\">\(escape(claim))</td></tr>\n"
        }
        if facts.transactions.isEmpty {
            html += "<tr><td colspan=\"6\">Known only through renewal info: no transaction has reached the ledger.</td></tr>\n"
        }
        html += "</tbody>\n</table>\n"
        html += consumptionTable(subscription.consumptionRequests, now: now)
        if let events = subscription.webhookEvents {
            let subject = facts.isAutoRenewable ? "this subscription" : "this purchase"
            html += "<h3>Webhook events</h3>\n" + webhookTable(events, of: subject)
        }
        if facts.isAutoRenewable { html += extendForm(facts.originalTransactionID) }
        return html + "</section>\n"
    }

    /// The events the outbox holds for an account or a subscription, and how each webhook's delivery stands: what
    /// support checks when the backend says it never heard of a renewal or a refund.
    private static func webhookTable(_ events: [OutboxEvent], of subject: String) -> String {
        let truncated = events.count >= webhookEventLimit ? " (the latest \(webhookEventLimit))" : ""
        var html = "<table class=\"webhook-events\">\n"
            + "<caption>Events sent to the backend's webhooks for \(escape(subject)), "
            + "newest first\(truncated)</caption>\n"
            + "<thead><tr><th scope=\"col\">Created (UTC)</th><th scope=\"col\">Event</th>"
            + "<th scope=\"col\">Sequence</th><th scope=\"col\">Id</th><th scope=\"col\">Deliveries</th></tr></thead>\n"
            + "<tbody>\n"
        for event in events {
            html += "<tr data-event-id=\"\(escape(event.id))\" data-type=\"\(escape(event.type))\" "
                + "data-sequence=\"\(event.sequence)\" data-created-at=\"\(event.createdAt)\">"
                + "<td>\(escape(dateText(event.createdAt)))</td><td class=\"mono\">\(escape(event.type))</td>"
                + "<td>\(event.sequence)</td><td class=\"mono\">\(escape(event.id))</td><td><ul class=\"deliveries\">"
            for delivery in event.deliveries {
                html += "<li class=\"delivery\" data-webhook=\"\(escape(delivery.webhook))\" "
                    + "data-state=\"\(delivery.state.rawValue)\" data-attempts=\"\(delivery.attempts)\">"
                    + "<span class=\"mono\">\(escape(delivery.webhook))</span>: \(escape(deliveryText(delivery)))</li>"
            }
            html += "</ul></td></tr>\n"
        }
        if events.isEmpty {
            html += "<tr><td colspan=\"5\">No event has been written for \(escape(subject)).</td></tr>\n"
        }
        return html + "</tbody>\n</table>\n"
    }

    private static func deliveryText(_ delivery: OutboxEvent.Delivery) -> String {
        var text: String
        switch delivery.state {
        case .delivered: text = "delivered" + (delivery.deliveredAt.map { " " + dateText($0) } ?? "")
        case .pending: text = "pending" + (delivery.nextAttemptAt.map { ", next try " + dateText($0) } ?? "")
        case .failed: text = "failed (no 2xx for 72 hours; receiptd webhooks replay sends it again)"
        }
        text += ", \(delivery.attempts) \(delivery.attempts == 1 ? "attempt" : "attempts")"
        switch (delivery.lastStatus, delivery.lastError) {
        case (let status?, let error?): text += ", last HTTP \(status): \(error)"
        case (let status?, nil) where delivery.state != .delivered: text += ", last HTTP \(status)"
        case (nil, let error?): text += ", last error: \(error)"
        default: break
        }
        return text
    }

    /// The subscription's status now: the same `status` as `GET /v1/subscriptions/{id}`, and one-time purchases named
    /// as such.
    private static func currentStatus(_ facts: SubscriptionFacts, now: Int64) -> (status: String, text: String) {
        let latest = facts.latestTransaction
        guard facts.isAutoRenewable else {
            if let revoked = latest?.revocationDate { return ("revoked", "refunded or revoked \(dateText(revoked))") }
            return ("one_time_purchase", latest?.type.map { "\($0), owned" } ?? "owned")
        }
        let state = facts.status(at: now) ?? .expired
        let expires = latest?.expiresDate.map(dateText) ?? "—"
        let text: String
        switch state {
        case .active:
            text = facts.renewal?.autoRenewStatus == false ? "until \(expires), will not renew" : "renews \(expires)"
        case .inGracePeriod:
            text = "payment failed; access kept until \(facts.renewal?.gracePeriodExpiresDate.map(dateText) ?? "—")"
        case .inBillingRetry:
            text = "payment failed \(expires); Apple is retrying, no access meanwhile"
        case .expired:
            text = "\(expires)" + (facts.renewal?.expirationIntent.map { ", " + expirationIntentText($0) } ?? "")
        case .revoked:
            text = "refunded or revoked \(latest?.revocationDate.map(dateText) ?? "—")"
        case .upgraded:
            text = "moved to a higher product of its group; that transaction has not reached the ledger yet"
        }
        return (state.rawValue, text)
    }

    private static func headline(_ status: String) -> String {
        switch status {
        case "active": "Active"
        case "in_grace_period": "In billing grace period"
        case "in_billing_retry": "In billing retry"
        case "expired": "Expired"
        case "revoked": "Refunded or revoked"
        case "upgraded": "Upgraded"
        case "one_time_purchase": "One-time purchase"
        default: status
        }
    }

    /// Only what this drawing shows, each swatch drawn with the same class as in the SVG.
    private static func legend(_ timeline: SubscriptionTimeline) -> String {
        var items = [("bar", "purchase or renewal (one bar per transaction)")]
        if timeline.bars.count > 1 { items.append(("bar alternate", "the next renewal")) }
        if timeline.bars.contains(where: \.isUpgraded) { items.append(("bar upgraded", "upgraded away")) }
        if timeline.bars.contains(where: { $0.revokedAt != nil }) { items.append(("revoked-part", "refunded or revoked")) }
        if timeline.periods.contains(where: { $0.kind == .grace }) {
            items.append(("grace", "billing grace period (access kept)"))
        }
        if timeline.periods.contains(where: { $0.kind == .billingRetry }) {
            items.append(("billing-retry", "billing retry (no access)"))
        }
        if timeline.expiry != nil { items.append(("expiry-line", "expiry")) }
        items.append(("now-line", "now"))
        return "<ul class=\"legend\">" + items.map { style, text in
            "<li><svg width=\"18\" height=\"12\" aria-hidden=\"true\"><rect class=\"\(style)\" x=\"0\" y=\"0\" "
                + "width=\"18\" height=\"12\" rx=\"2\"/></svg> \(escape(text))</li>"
        }.joined() + "</ul>"
    }

    // MARK: - Words

    static func dateText(_ milliseconds: Int64) -> String {
        let text = ReceiptDate(millisecondsSince1970: milliseconds).rfc3339
        return text.readableUTC()
    }

    static func dayText(_ milliseconds: Int64) -> String {
        String(ReceiptDate(millisecondsSince1970: milliseconds).rfc3339.prefix(10))
    }

    /// Apple's `revocationReason`.
    static func revocationReasonText(_ reason: Int?) -> String {
        switch reason {
        case 0: "refunded for another reason (0)"
        case 1: "refunded for an issue in the app (1)"
        case let reason?: "reason \(reason)"
        case nil: "no reason given"
        }
    }

    /// Apple's `expirationIntent`.
    static func expirationIntentText(_ intent: Int) -> String {
        switch intent {
        case 1: "the customer cancelled (1)"
        case 2: "billing error (2)"
        case 3: "the customer did not agree to a price increase (3)"
        case 4: "the product was not available (4)"
        case 5: "other reason (5)"
        default: "intent \(intent)"
        }
    }

    private static func escape(_ text: String) -> String { ResultHTML.escape(text) }

    private static func document(title: String, body: String) -> String {
        ResultHTML.document(
            title: title, style: style, heading: "Look up a purchase", body: body,
            footer: "<p><a href=\"/\">Back to the support page</a></p>")
    }

    private static let style = """
        :root { --fg: #1d1d1f; --muted: #6e6e73; --line: #d2d2d7; }
        body { margin: 0 auto; max-width: 62rem; padding: 1.5rem; color: var(--fg);
               font: 15px/1.45 -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
        h1 { font-size: 1.4rem; margin: 0 0 1rem; }
        h2 { font-size: 1.15rem; margin: 2rem 0 .4rem; }
        h3 { font-size: 1rem; margin: 1.2rem 0 .4rem; }
        form { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; }
        form label { flex-basis: 100%; font-weight: 600; }
        input[type=text] { flex: 1; min-width: 16rem; padding: .45rem; border: 1px solid var(--line); border-radius: 6px;
               font: 14px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
        button { padding: .5rem 1.2rem; font-size: 1rem; border: 0; border-radius: 6px; background: #0066cc; color: #fff; }
        #lookup-verdict { font-size: 1.15rem; font-weight: 600; margin: 1.2rem 0 .3rem; }
        #lookup-verdict[data-state=error] { color: #8a5a00; }
        .muted, code { color: var(--muted); font-weight: normal; }
        .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; overflow-wrap: break-word; }
        .status { font-size: 1.05rem; }
        .status[data-status=active] strong { color: #1a7f37; }
        .status[data-status=expired] strong, .status[data-status=revoked] strong { color: #b3261e; }
        .status[data-status=in_grace_period] strong, .status[data-status=in_billing_retry] strong { color: #8a5a00; }
        dl.details { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: .5rem 0; }
        dt { color: var(--muted); }
        dd { margin: 0; }
        figure { margin: .5rem 0; }
        svg.timeline { display: block; max-width: 100%; height: auto; font-size: 13px; }
        svg text { fill: var(--fg); }
        .row-label { fill: var(--muted); font-weight: 600; }
        .axis { stroke: var(--muted); }
        .tick { stroke: #ececf0; }
        .tick-label { fill: var(--muted); }
        .bar { fill: #0066cc; }
        .bar.alternate { fill: #4d94db; }
        .bar.upgraded { fill: #a3adb8; }
        .bar.one-time { fill: #5b3cc4; }
        .bar-label, .period-label { fill: #fff; font-size: 11px; }
        .revoked-part { fill: #b3261e; }
        .refund line { stroke: #b3261e; stroke-width: 2; }
        .refund text { fill: #b3261e; font-weight: 600; }
        .grace { fill: #f2b233; }
        .billing-retry { fill: #e8833a; }
        .period-label { fill: #1d1d1f; }
        .expiry line { stroke: #6e6e73; stroke-width: 1.5; stroke-dasharray: 4 3; }
        .now line { stroke: #1a7f37; stroke-width: 2; }
        .now text { fill: #1a7f37; font-weight: 600; }
        .expiry-line { fill: #6e6e73; }
        .now-line { fill: #1a7f37; }
        ul.legend { list-style: none; display: flex; flex-wrap: wrap; gap: .3rem 1.2rem; padding: 0; margin: .4rem 0;
               font-size: .85rem; color: var(--muted); }
        ul.legend svg { vertical-align: -1px; }
        table { border-collapse: collapse; width: 100%; font-size: .88rem; }
        caption { text-align: left; color: var(--muted); font-size: .85rem; padding-bottom: .3rem; }
        th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { color: var(--muted); font-weight: 600; }
        ul.deliveries { list-style: none; margin: 0; padding: 0; }
        li.delivery[data-state=failed] { color: #b3261e; }
        li.delivery[data-state=pending] { color: #8a5a00; }

        """
}

extension String {
    /// `2026-11-24T20:44:46Z` as `2026-11-24 20:44:46 UTC`: easier to read aloud to a customer.
    fileprivate func readableUTC() -> String {
        var text = self
        if let t = text.firstIndex(of: "T") { text.replaceSubrange(t...t, with: " ") }
        if text.hasSuffix("Z") { text.removeLast(); text += " UTC" }
        return text
    }
}
