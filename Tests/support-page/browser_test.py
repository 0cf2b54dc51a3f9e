#!/usr/bin/env python3
"""Drives headless Chromium over the DevTools protocol against receiptd's support page (GET /).

    browser_test.py PORT VALID_RECEIPT INVALID_RECEIPT [SCREENSHOT_DIR] [--skip-no-js] [--device-id ID] [--jws FILE]
                    [--lookup TRANSACTION_ID]

For each receipt it asks the API (POST /v1/validate) what the verdict is, then does what a person does on the
page: loads it, chooses the file, clicks "Check receipt", and reads what the page shows. It asserts that the
page shows the API's verdict, the error as the sentence SupportPage.swift maps its code to, every check, and
every product id; that pasted base64 works like a file; that nothing from the response became markup; and,
with JavaScript disabled, that the plain form submission gets an HTML answer. A screenshot of each case is
written to SCREENSHOT_DIR (default /tmp/receiptd-support-page). Exits 1 on the first failed assertion.

With --lookup, it also types that transaction id into the lookup box, with and without JavaScript, and checks the
page against GET /v1/subscriptions/{original}: the status, one bar per transaction, a refund mark per revoked one,
the grace and billing-retry shading, and the events table; then an unknown id and an order id get their error page.
"""

import base64
import html as htmllib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import websocket  # websocket-client

HERE = os.path.dirname(os.path.abspath(__file__))
SUPPORT_PAGE_SWIFT = os.path.join(HERE, "..", "..", "Sources", "ReceiptService", "Rendering", "SupportPage.swift")
CHECK_KEYS = ["signature", "bundle_id", "version", "device_hash", "environment"]


class Failure(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Failure(message)


def error_sentences():
    """The code → sentence table, read from the Swift source that the page embeds it from."""
    source = open(SUPPORT_PAGE_SWIFT, encoding="utf-8").read()
    table = source[source.index("errorSentences: [String: String] = ["):]
    table = table[: table.index("\n    ]")]
    return {code: sentence for code, sentence in re.findall(r'"([a-z_]+)":\s*"((?:[^"\\]|\\.)*)"', table)}


def ask_api(port, path, device_id):
    """What /v1/validate answers for this file: the page must show the same."""
    with open(path, "rb") as file:
        body = file.read()
    headers = {"Content-Type": "application/octet-stream", "Accept": "application/json"}
    if device_id:
        headers["X-Device-Id"] = device_id
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/validate", data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


class Chromium:
    """One headless Chromium with one page, spoken to over the DevTools protocol."""

    def __init__(self):
        binary = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
        expect(binary is not None, "chromium is not installed (apt-get install -y chromium)")
        self.profile = tempfile.mkdtemp(prefix="receiptd-chromium-")
        self.process = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
             f"--user-data-dir={self.profile}", "--remote-debugging-port=0", "--remote-allow-origins=*",
             "--window-size=1000,1400", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 30
        while not os.path.exists(port_file) or os.path.getsize(port_file) == 0:
            expect(self.process.poll() is None, "chromium exited at startup")
            expect(time.time() < deadline, "chromium did not open its DevTools port within 30 s")
            time.sleep(0.1)
        debug_port = open(port_file).read().split()[0]
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{debug_port}/json/list", timeout=10))
        page = next(t for t in targets if t.get("type") == "page")
        self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events = []
        for domain in ("Page", "DOM", "Runtime"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=1000, height=1400, deviceScaleFactor=1, mobile=False)

    def call(self, method, **params):
        self.next_id += 1
        call_id = self.next_id
        self.socket.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == call_id:
                expect("error" not in message, f"DevTools {method} failed: {message.get('error')}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for_event(self, method, timeout=20):
        deadline = time.time() + timeout
        while True:
            for index, event in enumerate(self.events):
                if event["method"] == method:
                    del self.events[: index + 1]
                    return event
            expect(time.time() < deadline, f"no {method} within {timeout} s")
            self.socket.settimeout(max(0.1, deadline - time.time()))
            try:
                message = json.loads(self.socket.recv())
            except websocket.WebSocketTimeoutException:
                continue
            if "method" in message:
                self.events.append(message)

    def navigate(self, url):
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for_event("Page.loadEventFired")

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        expect("exceptionDetails" not in result, f"script failed: {expression}: {result.get('exceptionDetails')}")
        return result["result"].get("value")

    def node(self, selector):
        root = self.call("DOM.getDocument", depth=0)["root"]["nodeId"]
        node = self.call("DOM.querySelector", nodeId=root, selector=selector)["nodeId"]
        expect(node != 0, f"the page has no {selector}")
        return node

    def click(self, selector):
        """A real mouse click at the element's centre: works with JavaScript disabled too."""
        quad = self.call("DOM.getBoxModel", nodeId=self.node(selector))["model"]["content"]
        x, y = (quad[0] + quad[4]) / 2, (quad[1] + quad[5]) / 2
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        with open(path, "wb") as file:
            file.write(base64.b64decode(data))
        print(f"  screenshot: {path}")

    def close(self):
        try:
            self.socket.close()
        except Exception:
            pass
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


READ_RESULT = """(() => {
  const text = (id) => { const e = document.getElementById(id); return e && !e.hidden ? e.textContent.trim() : ""; };
  const rows = (id) => Array.from(document.querySelectorAll("#" + id + " tbody tr"))
    .map((r) => Array.from(r.cells).map((c) => c.textContent.trim()));
  const checks = {};
  for (const row of document.querySelectorAll("#checks tbody tr")) checks[row.dataset.check] = row.cells[1].textContent.trim();
  return {
    state: document.getElementById("verdict").dataset.state || "",
    verdict: text("verdict"), error: text("error"), requestID: text("request-id"),
    checks, purchases: rows("purchases"), subscriptions: rows("subscriptions"),
    markup: document.querySelectorAll("#result img, #result script, #result iframe, #result a").length,
  };
})()"""


def wait_for_verdict(browser):
    deadline = time.time() + 20
    while True:
        state = browser.evaluate("document.getElementById('verdict').dataset.state || ''")
        if state:
            return browser.evaluate(READ_RESULT)
        expect(time.time() < deadline, "the page showed no verdict within 20 s")
        time.sleep(0.1)


def check_shown(name, shown, status, answer, sentences):
    expect(status in (200, 422), f"{name}: /v1/validate answered HTTP {status}, not 200 or 422: {answer}")
    if answer["valid"]:
        expect(shown["state"] == "valid", f"{name}: page shows state '{shown['state']}', the API says valid")
        expect("Valid" in shown["verdict"], f"{name}: verdict reads '{shown['verdict']}', not 'Valid…'")
        expect(shown["error"] == "", f"{name}: a valid receipt shows an error: {shown['error']}")
    else:
        code = answer["error"]["code"]
        expect(shown["state"] == "invalid", f"{name}: page shows state '{shown['state']}', the API says invalid")
        expect("Invalid" in shown["verdict"], f"{name}: verdict reads '{shown['verdict']}', not 'Invalid…'")
        expect(code in sentences, f"{name}: SupportPage.swift has no sentence for error code {code}")
        expect(shown["error"] == sentences[code],
               f"{name}: error reads '{shown['error']}', expected '{sentences[code]}' for {code}")
    for key in CHECK_KEYS:
        expected = answer.get("checks", {}).get(key, "skipped")
        expect(shown["checks"].get(key, "").lower() == expected,
               f"{name}: check {key} shows '{shown['checks'].get(key)}', the API says '{expected}'")
    purchases = (answer.get("receipt") or {}).get("in_app") or []
    shown_products = [row[0] for row in shown["purchases"] if len(row) == 7]
    expect(shown_products == [p["product_id"] for p in purchases],
           f"{name}: purchases table shows {shown_products}, the API has {[p['product_id'] for p in purchases]}")
    subscriptions = answer.get("subscriptions") or []
    shown_subscriptions = [row[0] for row in shown["subscriptions"] if len(row) == 4]
    expect(shown_subscriptions == [s["product_id"] for s in subscriptions],
           f"{name}: subscriptions table shows {shown_subscriptions}, the API has "
           f"{[s['product_id'] for s in subscriptions]}")
    expect(shown["markup"] == 0, f"{name}: response data was rendered as markup ({shown['markup']} elements)")
    expect(shown["requestID"].startswith("Request id: "), f"{name}: the page does not show the X-Request-Id")


def run_with_javascript(browser, port, name, path, device_id, paste, sentences, shots):
    status, answer = ask_api(port, path, device_id)
    browser.navigate(f"http://127.0.0.1:{port}/")
    if paste:
        data = open(path, "rb").read()
        text = data.decode("ascii").strip() if data[:1] != b"\x30" else base64.b64encode(data).decode("ascii")
        browser.evaluate(f"document.getElementById('base64').value = {json.dumps(text)}")
    else:
        browser.call("DOM.setFileInputFiles", files=[os.path.abspath(path)], nodeId=browser.node("#file"))
    if device_id:
        browser.evaluate(f"document.getElementById('device-id').value = {json.dumps(device_id)}")
    browser.click("#submit")
    shown = wait_for_verdict(browser)
    browser.screenshot(os.path.join(shots, f"{name}.png"))
    check_shown(name, shown, status, answer, sentences)
    print(f"ok: {name}: {shown['verdict']}" + (f" — {shown['error']}" if shown["error"] else "")
          + f"; {len(shown['purchases'])} purchase row(s), {len(shown['subscriptions'])} subscription row(s)")
    return answer


def run_without_javascript(browser, port, name, path, device_id, answer, sentences, shots):
    browser.call("Emulation.setScriptExecutionDisabled", value=True)
    try:
        browser.navigate(f"http://127.0.0.1:{port}/")
        browser.call("DOM.setFileInputFiles", files=[os.path.abspath(path)], nodeId=browser.node("#file"))
        if device_id:
            browser.call("DOM.setAttributeValue", nodeId=browser.node("#device-id"), name="value", value=device_id)
        browser.events.clear()
        browser.click("#submit")
        browser.wait_for_event("Page.loadEventFired")
        history = browser.call("Page.getNavigationHistory")
        url = history["entries"][history["currentIndex"]]["url"]
        expect(url.split("?")[0].endswith("/v1/validate"), f"{name}: the form went to {url}, not /v1/validate")
        root = browser.call("DOM.getDocument", depth=-1)["root"]["nodeId"]
        html = browser.call("DOM.getOuterHTML", nodeId=root)["outerHTML"]
        text = re.sub(r"\s+", " ", htmllib.unescape(re.sub(r"<[^>]*>", " ", html)))
        mime = browser.call("Page.getResourceTree")["frameTree"]["frame"].get("mimeType", "")
        expect(mime == "text/html", f"{name}: the form's answer is {mime}, not text/html")
        browser.screenshot(os.path.join(shots, f"{name}.png"))
        if answer["valid"]:
            expect(re.search(r"\bvalid\b", text, re.I), f"{name}: the HTML answer never says 'valid': {text[:300]}")
        else:
            code = answer["error"]["code"]
            expect(sentences.get(code, "\0") in text or code in text,
                   f"{name}: the HTML answer shows neither the sentence nor the code for {code}: {text[:300]}")
        for purchase in (answer.get("receipt") or {}).get("in_app") or []:
            expect(purchase["product_id"] in text, f"{name}: the HTML answer lacks product {purchase['product_id']}")
        print(f"ok: {name}: the form without JavaScript got an HTML answer")
    finally:
        browser.call("Emulation.setScriptExecutionDisabled", value=False)


READ_LOOKUP = """(() => {
  const section = document.querySelector("section.subscription");
  const verdict = document.getElementById("lookup-verdict");
  return {
    state: verdict ? verdict.dataset.state || "" : "", code: verdict ? verdict.dataset.code || "" : "",
    matched: verdict ? verdict.dataset.matched || "" : "",
    original: section ? section.dataset.originalTransactionId : "",
    status: section ? section.querySelector(".status").dataset.status : "",
    bars: Array.from(document.querySelectorAll("svg.timeline rect.bar")).map((r) => r.dataset.transactionId),
    refunds: Array.from(document.querySelectorAll("svg.timeline g.refund")).map((g) => g.dataset.transactionId),
    grace: document.querySelectorAll("svg.timeline rect.grace[data-period=current]").length,
    retry: document.querySelectorAll("svg.timeline rect.billing-retry[data-period=current]").length,
    pastPeriods: document.querySelectorAll("svg.timeline rect[data-period=past]").length,
    eventDates: Array.from(document.querySelectorAll("table.events tbody tr")).map((r) => Number(r.dataset.date)),
    overlaps: (() => {
      const boxes = Array.from(document.querySelectorAll("svg.timeline text"))
        .map((t) => [t.textContent, t.getBoundingClientRect()]);
      const found = [];
      boxes.forEach(([a, p], i) => boxes.slice(i + 1).forEach(([b, q]) => {
        if (p.left < q.right - 0.5 && q.left < p.right - 0.5 && p.top < q.bottom - 0.5 && q.top < p.bottom - 0.5) {
          found.push(`${a} / ${b}`);
        }
      }));
      return found;
    })(),
    now: document.querySelectorAll("svg.timeline g.now").length,
    events: Array.from(document.querySelectorAll("table.events tbody tr")).map((r) => r.dataset.event),
    external: document.querySelectorAll("iframe, img, link, [src]").length,
    inlineScripts: document.querySelectorAll("script:not([src])").length,
    claims: Object.fromEntries(Array.from(document.querySelectorAll("table.transactions tbody tr[data-transaction-id]"))
      .map((r) => [r.dataset.transactionId, r.querySelector("td.claim").textContent])),
  };
})()"""


def api_json(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def submit_lookup(browser, port, lookup_id, javascript):
    """Types the id into the support page's lookup box and presses its button, as a person does."""
    browser.call("Emulation.setScriptExecutionDisabled", value=not javascript)
    try:
        browser.navigate(f"http://127.0.0.1:{port}/")
        if javascript:
            browser.evaluate(f"document.getElementById('lookup-id').value = {json.dumps(lookup_id)}")
        else:
            browser.call("DOM.setAttributeValue", nodeId=browser.node("#lookup-id"), name="value", value=lookup_id)
        browser.events.clear()
        browser.click("#lookup-submit")
        browser.wait_for_event("Page.loadEventFired")
        history = browser.call("Page.getNavigationHistory")
        url = history["entries"][history["currentIndex"]]["url"]
        expect(urllib.parse.urlparse(url).path == "/lookup", f"lookup {lookup_id}: the box went to {url}, not /lookup")
        expect(urllib.parse.parse_qs(urllib.parse.urlparse(url).query).get("id") == [lookup_id],
               f"lookup {lookup_id}: the box sent {url}")
        # Read with scripts on again, whatever the page under test was loaded with.
        browser.call("Emulation.setScriptExecutionDisabled", value=False)
        return browser.evaluate(READ_LOOKUP)
    finally:
        browser.call("Emulation.setScriptExecutionDisabled", value=False)


def run_lookup(browser, port, lookup_id, javascript, shots):
    name = "lookup-js" if javascript else "lookup-no-js"
    status, transaction = api_json(port, f"/v1/transactions/{lookup_id}")
    expect(status == 200, f"{name}: GET /v1/transactions/{lookup_id} answered {status}: {transaction}")
    original = transaction["transaction"]["original_transaction_id"]
    status, subscription = api_json(port, f"/v1/subscriptions/{original}")
    expect(status == 200, f"{name}: GET /v1/subscriptions/{original} answered {status}: {subscription}")
    shown = submit_lookup(browser, port, lookup_id, javascript)
    browser.screenshot(os.path.join(shots, f"{name}.png"))
    expect(shown["state"] == "found", f"{name}: the page says {shown['state']} ({shown['code']}), not found")
    expect(shown["original"] == original, f"{name}: shows subscription {shown['original']}, not {original}")
    expect(shown["status"] == subscription["status"],
           f"{name}: status {shown['status']}, the API says {subscription['status']}")
    ids = sorted(t["transaction_id"] for t in subscription["transactions"])
    expect(sorted(shown["bars"]) == ids, f"{name}: bars for {sorted(shown['bars'])}, the API has {ids}")
    revoked = sorted(t["transaction_id"] for t in subscription["transactions"] if t.get("revocation_date"))
    expect(sorted(shown["refunds"]) == revoked, f"{name}: refund marks on {shown['refunds']}, revoked: {revoked}")
    in_grace_or_retry = subscription["is_in_billing_retry_period"] is True
    expect((shown["grace"] > 0) == (in_grace_or_retry and subscription["grace_period_expires_date"] is not None),
           f"{name}: {shown['grace']} grace period shading(s) for {subscription['grace_period_expires_date']}")
    if subscription["status"] == "in_billing_retry":
        expect(shown["retry"] == 1, f"{name}: no billing-retry shading while the API says in_billing_retry")
    expect(shown["now"] == 1, f"{name}: the timeline does not mark now")
    expect(shown["overlaps"] == [], f"{name}: timeline labels overlap: {shown['overlaps']}")
    expect(shown["eventDates"] == sorted(shown["eventDates"]), f"{name}: the events table is not in date order")
    if os.environ.get("RECEIPTD_LOOKUP_PAST_PERIODS"):
        expected = int(os.environ["RECEIPTD_LOOKUP_PAST_PERIODS"])
        expect(shown["pastPeriods"] == expected, f"{name}: {shown['pastPeriods']} past period(s) drawn, not {expected}")
    if os.environ.get("RECEIPTD_LOOKUP_NOTIFICATIONS"):
        expected = int(os.environ["RECEIPTD_LOOKUP_NOTIFICATIONS"])
        listed = shown["events"].count("notification")
        expect(listed == expected, f"{name}: the events table lists {listed} notification(s), not {expected}")
    for event in ["purchase", "expiry", "now"] + (["refund"] if revoked else []):
        expect(event in shown["events"], f"{name}: the events table has no {event} row: {shown['events']}")
    for transaction_id in ids:
        _, record = api_json(port, f"/v1/transactions/{transaction_id}")
        account = (record.get("claim") or {}).get("account")
        shown_claim = shown["claims"].get(transaction_id, "")
        expect(account in shown_claim if account else shown_claim == "not claimed",
               f"{name}: transaction {transaction_id} shows claim '{shown_claim}', the API says {account}")
    expect(shown["external"] == 0, f"{name}: the lookup page loads external assets ({shown['external']})")
    # One script of its own at most: the subscription view's "Extend" button, which asks before it posts.
    expect(shown["inlineScripts"] <= 1, f"{name}: the lookup page has {shown['inlineScripts']} scripts")
    print(f"ok: {name}: subscription {original} {shown['status']}, {len(shown['bars'])} bar(s), "
          f"{len(shown['refunds'])} refund(s), {shown['grace']} grace, {shown['retry']} retry shading(s) now, "
          f"{shown['pastPeriods']} past, no labels overlapping")


def run_lookup_errors(browser, port, shots):
    for lookup_id, expected, javascript in [("999999999999", "not_found", False), ("MK5TTTVWJH", "server_api", True)]:
        shown = submit_lookup(browser, port, lookup_id, javascript)
        expect(shown["state"] == "error" and shown["code"].startswith(expected),
               f"lookup {lookup_id}: the page shows {shown['state']} {shown['code']}, expected {expected}…")
        print(f"ok: lookup {lookup_id}: error page {shown['code']}")
    browser.screenshot(os.path.join(shots, "lookup-error.png"))


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    skip_no_js = "--skip-no-js" in argv
    device_id = ""
    jws_path = ""
    lookup_id = ""
    if "--lookup" in argv:
        lookup_id = argv[argv.index("--lookup") + 1]
        args.remove(lookup_id)
    if "--jws" in argv:
        jws_path = argv[argv.index("--jws") + 1]
        args.remove(jws_path)
    if "--device-id" in argv:
        device_id = argv[argv.index("--device-id") + 1]
        args.remove(device_id)
    if len(args) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    port, valid_path, invalid_path = args[0], args[1], args[2]
    shots = args[3] if len(args) > 3 else "/tmp/receiptd-support-page"
    os.makedirs(shots, exist_ok=True)
    sentences = error_sentences()

    browser = Chromium()
    try:
        valid = run_with_javascript(browser, port, "valid-file", valid_path, device_id, False, sentences, shots)
        expect(valid["valid"], f"the receipt meant to be valid ({valid_path}) is invalid: {valid.get('error')}")
        invalid = run_with_javascript(browser, port, "invalid-file", invalid_path, "", False, sentences, shots)
        expect(not invalid["valid"], f"the receipt meant to be invalid ({invalid_path}) is valid")
        run_with_javascript(browser, port, "valid-pasted", valid_path, device_id, True, sentences, shots)
        if jws_path:
            signed = run_with_javascript(browser, port, "jws-pasted", jws_path, "", True, sentences, shots)
            expect(signed["valid"] and signed["kind"] == "transaction",
                   f"the JWS meant to be a valid transaction is not: {signed.get('kind')} {signed.get('error')}")
            shown = browser.evaluate(
                "(document.querySelector('#signed dl[data-section=transaction]') || {}).textContent || ''")
            transaction_id = signed["transaction"]["transaction_id"]
            expect(transaction_id in shown, f"jws-pasted: the page does not show transaction {transaction_id}")
            print("ok: jws-pasted: the page shows the signed transaction's fields")
        if not skip_no_js:
            run_without_javascript(browser, port, "no-js-valid", valid_path, device_id, valid, sentences, shots)
            run_without_javascript(browser, port, "no-js-invalid", invalid_path, "", invalid, sentences, shots)
        if lookup_id:
            run_lookup(browser, port, lookup_id, True, shots)
            if not skip_no_js:
                run_lookup(browser, port, lookup_id, False, shots)
            run_lookup_errors(browser, port, shots)
    except Failure as failure:
        print(f"FAIL: {failure}", file=sys.stderr)
        return 1
    finally:
        browser.close()
    print("support page: all browser checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
