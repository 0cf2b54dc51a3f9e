/// The subscription view's "Extend" button (`POST /v1/subscriptions/{id}/extend`). Hooks for tests:
/// `form.extend-form` (`data-original-transaction-id`), `select[name=reason]`, `input[name=days]`,
/// `.extend-result` (`data-state` `extended` or `error`, `data-code` the error's code).
extension LookupPage {
    static func extendForm(_ originalTransactionID: String) -> String {
        let id = ResultHTML.escape(originalTransactionID)
        let reasons = RenewalExtensionReason.allCases.map {
            "<option value=\"\($0.rawValue)\">\($0.rawValue.replacingUnderscores)</option>"
        }.joined()
        return """
            <h3>Extend the renewal date</h3>
            <form class="extend-form" data-original-transaction-id="\(id)">
            <label>Days (1–90) <input name="days" type="number" min="1" max="90" value="7" required></label>
            <label>Reason <select name="reason">\(reasons)</select></label>
            <button type="submit">Extend</button>
            <span class="hint muted">Apple extends one subscription at most twice in 365 days, active subscriptions only.</span>
            </form>
            <p class="extend-result" role="status"></p>

            """
    }

    /// Asks for confirmation, then posts with the page's own credentials; the answer (Apple's new expiry, or why
    /// Apple refused) shows under the form.
    static let extendScript = """
        <script>
        "use strict";
        for (const form of document.querySelectorAll("form.extend-form")) {
          form.addEventListener("submit", async (event) => {
            event.preventDefault();
            const id = form.dataset.originalTransactionId;
            const days = Number(form.elements.days.value);
            const reason = form.elements.reason.value;
            const result = form.nextElementSibling;
            if (!confirm(`Ask Apple to extend ${id} by ${days} day(s), reason ${reason}? Apple counts it against `
                + `this subscription's two extensions a year.`)) { return; }
            result.removeAttribute("data-state");
            result.textContent = "Asking Apple…";
            try {
              const response = await fetch(`/v1/subscriptions/${encodeURIComponent(id)}/extend`, {
                method: "POST", credentials: "same-origin",
                headers: { "Content-Type": "application/json", "X-Receiptd-Source": "support-page" },
                body: JSON.stringify({ days, reason }) });
              const answer = await response.json();
              if (response.ok) {
                result.dataset.state = "extended";
                result.textContent = `Extended: Apple's new expiry is ${answer.effective_date} `
                  + `(request ${answer.request_identifier}).`;
              } else {
                result.dataset.state = "error";
                result.dataset.code = answer.error.code;
                result.textContent = `${answer.error.message} (${answer.error.code})`;
              }
            } catch (error) {
              result.dataset.state = "error";
              result.dataset.code = "network";
              result.textContent = "receiptd could not be reached: " + error;
            }
          });
        }
        </script>

        """
}

extension String {
    fileprivate var replacingUnderscores: String { String(map { $0 == "_" ? " " : $0 }) }
}
