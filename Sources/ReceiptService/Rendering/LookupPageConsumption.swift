import Ledger

extension LookupPage {
    /// Apple's refund questions about the purchase's transactions, and what became of each: what support checks
    /// when a customer says a refund was granted or refused.
    static func consumptionTable(_ requests: [ConsumptionRequest], now: Int64) -> String {
        guard !requests.isEmpty else { return "" }
        var html = "<h3>Refund requests</h3>\n<table class=\"consumption-requests\">\n"
            + "<caption>Apple's CONSUMPTION_REQUEST notifications and the answers sent, newest first</caption>\n"
            + "<thead><tr><th scope=\"col\">Asked (UTC)</th><th scope=\"col\">Transaction</th>"
            + "<th scope=\"col\">Reason</th><th scope=\"col\">State</th><th scope=\"col\">Answer</th></tr></thead>\n"
            + "<tbody>\n"
        for request in requests {
            let state = request.state(at: now)
            let detail: String
            switch state {
            case .open:
                detail = (request.answer == nil ? "no answer from the backend yet" : "answered, sending")
                    + "; Apple's window closes " + dateText(request.expiresAt)
            case .sent:
                detail = "sent " + (request.sentAt.map(dateText) ?? "") + ", Apple answered "
                    + (request.appleStatus.map { String($0) } ?? "—")
            case .failed:
                detail = "Apple refused it" + (request.appleErrorCode.map { " (error \($0))" } ?? "")
            case .expired:
                detail = "12 hours passed unsent" + (request.answer == nil ? ": the backend never answered" : "")
            }
            html += "<tr data-state=\"\(state.rawValue)\"><td>\(ResultHTML.escape(dateText(request.requestedAt)))</td>"
                + "<td class=\"mono\">\(ResultHTML.escape(request.transactionID))</td>"
                + "<td>\(ResultHTML.escape(request.reason ?? "—"))</td><td>\(state.rawValue)</td>"
                + "<td>\(ResultHTML.escape(detail))</td></tr>\n"
        }
        return html + "</tbody>\n</table>\n"
    }
}
