#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif
import JSONText

/// The page served at `GET /`: a form to check one receipt, for support staff and developers.
///
/// One self-contained HTML document (inline CSS and script, no external assets). With JavaScript it posts the
/// receipt to `/v1/validate` (a chosen file as `application/octet-stream`, pasted base64 as `text/plain`, the
/// device id as `X-Device-Id`) and renders the JSON result. Without JavaScript the same form submits
/// `multipart/form-data` with a `receipt` file part and a `device_id` field; the server answers that with HTML.
///
/// Its lookup boxes are plain `GET /lookup?id=…` and `GET /lookup?account=…` forms, answered with a page by the
/// server, with or without JavaScript.
///
/// Everything taken from a response is inserted with `textContent`, never parsed as HTML.
/// Element ids the browser test relies on: `#verdict` (with `data-state` = `valid`, `invalid` or `error`),
/// `#error`, `#checks`, `#receipt`, `#purchases`, `#subscriptions`, `#request-id`, `#lookup-form`, `#lookup-id`,
/// `#lookup-submit`, `#account-lookup-form`, `#lookup-account`, `#account-lookup-submit`.
public enum SupportPage {
    /// A sentence for people, by error code, for every code `/v1/validate` can answer with.
    ///
    /// The page's script embeds this table, so a server-rendered answer that uses it reads the same.
    public static let errorSentences: [String: String] = [
        "malformed_receipt":
            "This is not a readable App Store receipt: it is not a signed receipt, or its contents are damaged.",
        "signature_invalid": "The receipt's signature does not match its contents: the receipt has been altered.",
        "certificate_untrusted": "This receipt was not signed by Apple (or by a root this server trusts).",
        "bundle_id_mismatch": "This receipt belongs to an app this server does not accept.",
        "version_not_accepted": "This receipt was issued for an app version this server does not accept.",
        "device_hash_mismatch": "This receipt was issued to a different device than the device id given.",
        "environment_not_accepted":
            "This receipt comes from an environment (Production, Sandbox or Xcode) this server does not accept.",
        "malformed_jws": "This is not a readable StoreKit 2 signed transaction: it is not a JWS of the shape Apple signs.",
        "app_apple_id_mismatch": "This signed data names another App Store app id than this server's app.",
        "kind_mismatch": "This is another kind of signed data than the one asked for.",
        "unknown_kind": "This is well signed, but not a kind of signed data StoreKit 2 makes: say which kind it is.",
        "bad_request": "The request could not be read: the receipt is missing or is not valid base64.",
        "unsupported_media_type": "The receipt was sent in a format this server does not accept.",
        "payload_too_large": "The receipt is larger than this server accepts.",
        "header_too_large": "The request's headers are larger than this server accepts.",
        "request_timeout": "The request took too long to arrive. Try again.",
        "service_unavailable": "The server is busy right now. Try again in a moment.",
        "not_found": "The server has no such address.",
        "method_not_allowed": "The server does not accept this kind of request here.",
    ]

    /// The verdict's headline by error code: it names what failed (the device id, the app, the environment…) rather
    /// than blaming the receipt for all of them.
    public static let headlines: [String: String] = [
        "malformed_receipt": "Not a readable receipt",
        "malformed_jws": "Not a readable StoreKit 2 JWS",
        "signature_invalid": "Signature does not match the contents",
        "certificate_untrusted": "Not signed by a trusted certificate",
        "bundle_id_mismatch": "App (bundle id) not accepted",
        "version_not_accepted": "App version not accepted",
        "device_hash_mismatch": "Device id does not match",
        "environment_not_accepted": "Environment not accepted",
        "app_apple_id_mismatch": "App Store app id does not match",
        "kind_mismatch": "Not the kind of signed data asked for",
        "unknown_kind": "Signed data of no known kind",
    ]

    /// What an upload was instead of a receipt, by the `reason` `receiptd verify` and `/v1/validate` give.
    public static let reasonSentences: [String: String] = [
        "pem": "This is PEM text (a certificate or key), not a receipt.",
        "text": "This is plain text, not a receipt or its base64.",
        "json": "This is JSON, not a receipt: send the receipt (its base64) itself.",
        "truncated": "The receipt is cut short: copy or upload the whole file.",
        "not_a_receipt_file": "This is another kind of file (an image, a PDF, an archive), not a receipt.",
        "missing": "The signed data does not name it at all.",
    ]

    /// The sentence for `code`, or a generic one for a code this page does not know.
    public static func sentence(for code: String) -> String {
        errorSentences[code] ?? "The receipt could not be checked."
    }

    /// The whole page, UTF-8 HTML.
    public static let html: String = template.replacingPlaceholder(
        "/*ERROR_SENTENCES*/{}",
        with: javaScriptObjectLiteral(errorSentences)
    ).replacingPlaceholder("/*HEADLINES*/{}", with: javaScriptObjectLiteral(headlines))
        .replacingPlaceholder("/*REASONS*/{}", with: javaScriptObjectLiteral(reasonSentences))

    /// JSON is a JavaScript literal; keys are sorted so the page is byte-for-byte the same on every run (stable
    /// ETags, reproducible tests), and `<` is escaped so no value can close the `<script>` element.
    static func javaScriptObjectLiteral(_ table: [String: String]) -> String {
        let object = JSONValue.object(table.keys.sorted().map { ($0, .string(table[$0]!)) })
        // Scalar by scalar: a `Character` holding `<` and a combining mark would not match a `<` search.
        var literal = ""
        for scalar in String(decoding: object.serialized(pretty: true), as: UTF8.self).unicodeScalars {
            switch scalar {
            case "<": literal += "\\u003c"
            case "\u{2028}": literal += "\\u2028"
            case "\u{2029}": literal += "\\u2029"
            default: literal.unicodeScalars.append(scalar)
            }
        }
        return literal
    }

    // A raw string: the script's backslashes and `\(` stay as written.
    private static let template: String = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>receiptd: check a receipt</title>
<style>
:root { --fg: #1d1d1f; --muted: #6e6e73; --line: #d2d2d7; --ok: #1a7f37; --ok-bg: #e6f4ea; --bad: #b3261e;
        --bad-bg: #fce8e6; --warn: #8a5a00; --warn-bg: #fff4e0; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 60rem; padding: 1.5rem; color: var(--fg); line-height: 1.45;
       font: 16px/1.45 -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
p.lead { color: var(--muted); margin: 0 0 1.25rem; }
form { display: grid; gap: .9rem; padding: 1rem; border: 1px solid var(--line); border-radius: 10px; }
label { display: block; font-weight: 600; margin-bottom: .3rem; }
.hint { font-weight: normal; color: var(--muted); font-size: .9rem; }
textarea, input[type=text] { width: 100%; padding: .5rem; border: 1px solid var(--line); border-radius: 6px;
       font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
textarea { min-height: 7rem; resize: vertical; }
button { justify-self: start; padding: .55rem 1.3rem; font-size: 1rem; border: 0; border-radius: 6px;
         background: #0066cc; color: #fff; cursor: pointer; }
button:disabled { opacity: .6; cursor: progress; }
#verdict { margin: 1.5rem 0 .5rem; padding: .8rem 1rem; border-radius: 8px; font-size: 1.3rem; font-weight: 700; }
#verdict[data-state=valid] { background: var(--ok-bg); color: var(--ok); }
#verdict[data-state=invalid] { background: var(--bad-bg); color: var(--bad); }
#verdict[data-state=error] { background: var(--warn-bg); color: var(--warn); }
#error { margin: .25rem 0; font-size: 1.05rem; }
#error-detail, #request-id { color: var(--muted); font-size: .85rem; margin: .25rem 0; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); }
td.mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; word-break: break-all; }
.passed { color: var(--ok); font-weight: 600; }
.failed { color: var(--bad); font-weight: 600; }
.skipped { color: var(--muted); }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: 0; font-size: .9rem; }
dt { color: var(--muted); }
dd { margin: 0; word-break: break-all; }
.empty { color: var(--muted); font-style: italic; }
[hidden] { display: none !important; }
details { margin-top: 1.5rem; }
pre { overflow: auto; background: #f5f5f7; padding: .75rem; border-radius: 6px; font-size: .8rem; }
</style>
</head>
<body>
<h1>Check an App Store receipt</h1>
<p class="lead">Upload a receipt file or paste its base64 text, or paste a StoreKit 2 signed transaction, renewal
  info, app transaction or notification (a JWS). Everything is checked by this server only.</p>

<form id="form" method="post" action="/v1/validate" enctype="multipart/form-data">
  <div>
    <label for="file">Receipt file
      <span class="hint">(the app's <code>receipt</code> file, or a text file of its base64)</span></label>
    <input id="file" name="receipt" type="file">
  </div>
  <div id="paste-field">
    <label for="base64">…or paste the receipt as base64, or a StoreKit 2 JWS
      <span class="hint">(used when no file is chosen)</span></label>
    <textarea id="base64" spellcheck="false" autocomplete="off" placeholder="MIIT…"></textarea>
    <noscript><p class="hint">Pasting needs JavaScript; without it, choose a file.</p></noscript>
  </div>
  <div>
    <label for="device-id">Device id <span class="hint">(optional: the app's identifierForVendor, checks the
      receipt was issued to that device)</span></label>
    <input id="device-id" name="device_id" type="text" autocomplete="off" spellcheck="false"
      placeholder="6D1A2B3C-0000-4000-8000-0123456789AB">
  </div>
  <button id="submit" type="submit">Check receipt</button>
</form>

<section id="result" aria-live="polite" hidden>
  <div id="verdict" role="status"></div>
  <p id="error" hidden></p>
  <p id="error-detail" hidden></p>
  <p id="request-id" hidden></p>

  <div id="details" hidden>
    <h2>Checks</h2>
    <table id="checks">
      <thead><tr><th>Check</th><th>Result</th></tr></thead>
      <tbody></tbody>
    </table>

    <div id="receipt-details">
    <h2>Receipt</h2>
    <dl id="receipt"></dl>

    <h2>Purchases</h2>
    <table id="purchases">
      <thead><tr><th>Product</th><th>Transaction</th><th>Original transaction</th><th>Purchased</th>
        <th>Expires</th><th>Cancelled</th><th>Trial</th></tr></thead>
      <tbody></tbody>
    </table>

    <h2>Subscriptions</h2>
    <table id="subscriptions">
      <thead><tr><th>Product</th><th>Expires</th><th>Active</th><th>Cancelled</th></tr></thead>
      <tbody></tbody>
    </table>
    </div>

    <div id="signed-details" hidden>
    <h2 id="signed-title">Signed data</h2>
    <div id="signed"></div>
    </div>
  </div>

  <details><summary>Raw response</summary><pre id="raw"></pre></details>
</section>

<section id="lookup">
<h2>Look up a purchase</h2>
<p class="lead">What the ledger knows of a customer's purchase: its status now and a timeline of purchases, renewals,
  refunds, grace and billing-retry periods.</p>
<form id="lookup-form" method="get" action="/lookup" role="search">
  <div>
    <label for="lookup-id">Order id, transaction id or original transaction id
      <span class="hint">(the order id is on the customer's emailed Apple receipt)</span></label>
    <input id="lookup-id" name="id" type="text" required autocomplete="off" spellcheck="false"
      placeholder="MK5TTTVWJH or 2000000123456789">
  </div>
  <button id="lookup-submit" type="submit">Look up</button>
</form>
<form id="account-lookup-form" method="get" action="/lookup" role="search">
  <div>
    <label for="lookup-account">Or an account
      <span class="hint">(the backend's user id: what it may use now, its subscriptions and purchases)</span></label>
    <input id="lookup-account" name="account" type="text" required autocomplete="off" spellcheck="false"
      placeholder="user-42">
  </div>
  <button id="account-lookup-submit" type="submit">Look up</button>
</form>
</section>

<script>
"use strict";
const SENTENCES = /*ERROR_SENTENCES*/{};
const HEADLINES = /*HEADLINES*/{};
const REASONS = /*REASONS*/{};
const CHECKS = [
  ["signature", "Signed by a trusted chain"],
  ["bundle_id", "App (bundle id)"],
  ["version", "App version"],
  ["device_hash", "Issued to this device"],
  ["environment", "Environment"],
  ["app_apple_id", "App Store app id"],
];
const $ = (id) => document.getElementById(id);

function sentence(code) {
  return Object.prototype.hasOwnProperty.call(SENTENCES, code) ? SENTENCES[code] : "The receipt could not be checked.";
}

function date(value) {
  if (value === null || value === undefined || value === "") return "—";
  return String(value).replace("T", " ").replace(/Z$/, " UTC");
}

function yesNo(value) {
  if (value === null || value === undefined) return "—";
  return value ? "Yes" : "No";
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined || text === "" ? "—" : String(text);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function fillTable(table, items, columns, emptyText) {
  const body = table.tBodies[0];
  body.replaceChildren();
  if (!items || items.length === 0) {
    const row = body.insertRow();
    const td = cell(row, emptyText, "empty");
    td.colSpan = table.tHead.rows[0].cells.length;
    return;
  }
  for (const item of items) {
    const row = body.insertRow();
    for (const [get, className] of columns) cell(row, get(item), className);
  }
}

function reset() {
  for (const id of ["error", "error-detail", "request-id", "details"]) $(id).hidden = true;
  $("verdict").textContent = "";
  $("verdict").removeAttribute("data-state");
  $("raw").textContent = "";
}

function showVerdict(state, text) {
  $("result").hidden = false;
  $("verdict").dataset.state = state;
  $("verdict").textContent = text;
}

function known(table, key) {
  return key && Object.prototype.hasOwnProperty.call(table, key) ? table[key] : "";
}

function showError(code, message, reason) {
  $("error").textContent = sentence(code);
  $("error").dataset.code = code;
  $("error").hidden = false;
  if (message) {
    const said = known(REASONS, reason);
    $("error-detail").textContent = (said ? said + " " : "") + "Details: " + message + " (" + code
      + (reason ? ", " + reason : "") + ")";
    $("error-detail").hidden = false;
  }
}

// A StoreKit 2 verdict's normalized sections, in the order the answer lists them.
const SIGNED_SECTIONS = [
  ["notification", "Notification"], ["transaction", "Transaction"], ["renewal_info", "Renewal info"],
  ["app_transaction", "App transaction"],
];

function renderSigned(result) {
  const container = $("signed");
  container.replaceChildren();
  for (const [key, title] of SIGNED_SECTIONS) {
    const section = result[key];
    if (!section || typeof section !== "object") continue;
    const heading = document.createElement("h3");
    heading.textContent = title;
    const list = document.createElement("dl");
    list.dataset.section = key;
    for (const [name, value] of Object.entries(section)) {
      const dt = document.createElement("dt");
      dt.textContent = name;
      const dd = document.createElement("dd");
      dd.textContent = value === null || value === undefined || value === "" ? "—" : String(value);
      list.append(dt, dd);
    }
    container.append(heading, list);
  }
}

function render(result) {
  const valid = result.valid === true;
  // A StoreKit 2 verdict always has signed_date; one whose kind is unknown is still signed data, not a receipt.
  const kind = result.kind && result.kind !== "receipt" ? String(result.kind).replace(/_/g, " ")
    : ("signed_date" in result ? "signed data" : "receipt");
  const failed = !valid && result.error ? known(HEADLINES, String(result.error.code)) : "";
  showVerdict(valid ? "valid" : "invalid", (valid ? "Valid " : "Invalid ") + kind + (failed ? ": " + failed : ""));
  if (!valid && result.error) showError(String(result.error.code), result.error.message, result.error.reason);

  const checks = $("checks").tBodies[0];
  checks.replaceChildren();
  for (const [key, label] of CHECKS) {
    if (kind === "receipt" && key === "app_apple_id") continue;
    const status = result.checks && result.checks[key] ? String(result.checks[key]) : "skipped";
    const row = checks.insertRow();
    row.dataset.check = key;
    cell(row, label);
    cell(row, status.charAt(0).toUpperCase() + status.slice(1), status);
  }

  const receipt = result.receipt || {};
  const fields = [
    ["Environment", result.environment || "unknown"],
    ["Bundle id", receipt.bundle_id],
    ["App version", receipt.application_version],
    ["Originally purchased version", receipt.original_application_version],
    ["Receipt type", receipt.receipt_type],
    ["Created", date(receipt.creation_date)],
    ["Expires", date(receipt.expiration_date)],
    ["Originally purchased", date(receipt.original_purchase_date)],
  ];
  const list = $("receipt");
  list.replaceChildren();
  for (const [name, value] of fields) {
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    dd.textContent = value === null || value === undefined || value === "" ? "—" : String(value);
    list.append(dt, dd);
  }

  fillTable($("purchases"), receipt.in_app, [
    [(p) => p.product_id, "mono"],
    [(p) => p.transaction_id, "mono"],
    [(p) => p.original_transaction_id, "mono"],
    [(p) => date(p.purchase_date)],
    [(p) => date(p.expires_date)],
    [(p) => (p.cancellation_date ? date(p.cancellation_date) : "No")],
    [(p) => yesNo(p.is_trial_period)],
  ], "No in-app purchases in this receipt.");

  fillTable($("subscriptions"), result.subscriptions, [
    [(s) => s.product_id, "mono"],
    [(s) => date(s.expires_date)],
    [(s) => yesNo(s.active)],
    [(s) => yesNo(s.cancelled)],
  ], "No subscriptions in this receipt.");

  renderSigned(result);
  $("signed-details").hidden = kind === "receipt" || !result.payload;
  // A receipt that could not be read or trusted has no contents worth showing, only its checks.
  $("receipt-details").hidden = !result.receipt;
  $("details").hidden = !result.receipt && !result.checks;
}

async function submit(event) {
  event.preventDefault();
  reset();
  const file = $("file").files[0];
  const pasted = $("base64").value.trim();
  const headers = { "Accept": "application/json" };
  let body;
  if (file) {
    // A receipt is DER (it starts with a SEQUENCE, 0x30); a file of base64 text is sent as text.
    const bytes = new Uint8Array(await file.arrayBuffer());
    const isText = bytes.length > 0 && bytes[0] !== 0x30
      && /^[A-Za-z0-9+\/=\s]+$/.test(new TextDecoder().decode(bytes));
    body = bytes;
    headers["Content-Type"] = isText ? "text/plain" : "application/octet-stream";
  } else if (pasted) {
    body = pasted;
    headers["Content-Type"] = "text/plain";
  } else {
    showVerdict("error", "Nothing to check");
    $("error").textContent = "Choose a receipt file or paste its base64 text.";
    $("error").hidden = false;
    return;
  }
  const deviceID = $("device-id").value.trim();
  if (deviceID) headers["X-Device-Id"] = deviceID;

  $("submit").disabled = true;
  $("verdict").textContent = "Checking…";
  $("result").hidden = false;
  try {
    const response = await fetch("/v1/validate", { method: "POST", headers, body });
    const requestID = response.headers.get("X-Request-Id");
    if (requestID) {
      $("request-id").textContent = "Request id: " + requestID;
      $("request-id").hidden = false;
    }
    const text = await response.text();
    $("raw").textContent = text;
    let result = null;
    try { result = JSON.parse(text); } catch (_) { result = null; }
    if (result && typeof result.valid === "boolean") {
      render(result);
    } else {
      const code = result && result.error && result.error.code ? String(result.error.code) : "";
      showVerdict("error", "Could not check the receipt (HTTP " + response.status + ")");
      showError(code, result && result.error ? result.error.message : "", result && result.error ? result.error.reason : "");
    }
  } catch (error) {
    showVerdict("error", "Could not reach the server");
    $("error").textContent = "The request failed before the server answered: " + error.message;
    $("error").hidden = false;
  } finally {
    $("submit").disabled = false;
  }
}

$("form").addEventListener("submit", submit);
</script>
</body>
</html>
"""#
}

extension String {
    fileprivate func replacingPlaceholder(_ placeholder: String, with value: String) -> String {
        guard let range = firstRange(of: placeholder) else {
            preconditionFailure("SupportPage template lost its placeholder \(placeholder)")
        }
        var result = self
        result.replaceSubrange(range, with: value)
        return result
    }
}
