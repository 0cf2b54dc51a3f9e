#!/usr/bin/env python3
"""A fake of Apple's App Store Server API for receiptd's tests, over HTTPS with a test CA made at start-up.

    fake-app-store-server.py DIR

DIR/fixture.json (written by the test) says what the fake knows:
  {"keyId", "issuerId", "bundleId", "environment", "pageSize",
   "notifications": [{"signedPayload", "date" (ms), "sendAttempts"?}],
   "transactions": {"ID": ["JWS", ...]},                  # history v2, and Get Transaction Info (first JWS)
   "subscriptions": {"ID": [{"subscriptionGroupIdentifier", "lastTransactions": [...]}]},
   "orders": {"ORDER": ["JWS", ...]},
   "testNotification": "JWS",
   "refunds": {"ID": ["JWS", ...]},                       # Get Refund History v2 (paged like history)
   "appTransactions": {"ID": "JWS"},                       # Get App Transaction Info
   "extensions": {"ORIGINAL_ID": {"errorCode": 4030004 | 4030005 | 4030007} | {"effectiveDate": MS}},
   "massStatusPolls": N,                                    # status polls before a mass extension is complete (1)
   "faults": {"PATH": [{"status": 500} | {"status": 429, "retryAfter": "1"} | {"hang": SECONDS}, ...]},
   "always": {"hang": SECONDS} | {"status": 429, "retryAfter": "7"}, with "pathPrefix": "/inApps/v1/lookup/" if only
             for the paths under it}
Calls of a server's duties answer as Apple does: Send Consumption Information v2 202 with no body (400 with
Apple's code for a body Apple refuses), Set App Account Token and Finish Transaction 200 with no body, an extension
Apple's answer (at most two per original transaction: the third is 4030005), a mass extension its request id and,
after massStatusPolls polls, a complete status. State the fake keeps between requests is in DIR/state.json.
Faults are used up in order, one per request to PATH, before the path answers normally. "always" is a fault every
request gets, never used up: a hung Apple, or one that keeps rate limiting.

At start it writes DIR/ca.pem (trust it), DIR/key.p8 (the API key to sign tokens with, unless one is there already)
and, once listening on 127.0.0.1 at a free port, DIR/port. DIR/connections holds how many connections were accepted.
Every request's bearer token is checked (ES256 signature
against the key's public half, alg/kid/typ, iss, aud, bid, iat if present, exp at most 60 minutes after iat and not
past):
a bad one gets 401 with no body, as Apple does. Each request is appended to DIR/requests.jsonl (method, path,
query, body, token claims; with "capture": true in the fixture also every header, the raw query and body, the
token's header and the time it came) for the tests to compare.
"""
import base64
import http.server
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

DIR = sys.argv[1]
LOCK = threading.Lock()
CONNECTIONS = [0]


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def path_in(name):
    return os.path.join(DIR, name)


def make_pki():
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", path_in("ca.key"), "-out", path_in("ca.pem"), "-days", "2", "-subj", "/CN=receiptd fake Apple test CA")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", path_in("server.key"), "-out", path_in("server.csr"), "-subj", "/CN=localhost")
    with open(path_in("server.ext"), "w") as ext:
        ext.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    run("openssl", "x509", "-req", "-in", path_in("server.csr"), "-CA", path_in("ca.pem"), "-CAkey", path_in("ca.key"),
        "-CAcreateserial", "-out", path_in("server.pem"), "-days", "2", "-extfile", path_in("server.ext"))
    if not os.path.exists(path_in("key.p8")):
        run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path_in("key.p8"))
    run("openssl", "pkey", "-in", path_in("key.p8"), "-pubout", "-out", path_in("key.pub.pem"))


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def der_integer(raw):
    raw = raw.lstrip(b"\x00") or b"\x00"
    if raw[0] & 0x80:
        raw = b"\x00" + raw
    return b"\x02" + bytes([len(raw)]) + raw


def verify_es256(signing_input, signature):
    if len(signature) != 64:
        return False
    body = der_integer(signature[:32]) + der_integer(signature[32:])
    der = b"\x30" + bytes([len(body)]) + body
    sig_path = path_in("sig-%d.der" % threading.get_ident())
    with open(sig_path, "wb") as f:
        f.write(der)
    result = subprocess.run(["openssl", "dgst", "-sha256", "-verify", path_in("key.pub.pem"), "-signature", sig_path],
                            input=signing_input, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return result.returncode == 0


def check_token(fixture, authorization):
    """The token's claims when Apple would accept it, else the reason it would not."""
    if not authorization or not authorization.startswith("Bearer "):
        return None, "no bearer token"
    parts = authorization[len("Bearer "):].split(".")
    if len(parts) != 3:
        return None, "not a compact JWS"
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except Exception:
        return None, "undecodable token"
    if header.get("alg") != "ES256" or header.get("typ") != "JWT" or header.get("kid") != fixture["keyId"]:
        return None, "header %r" % header
    if claims.get("iss") != fixture["issuerId"] or claims.get("aud") != "appstoreconnect-v1" \
            or claims.get("bid") != fixture["bundleId"]:
        return None, "claims %r" % claims
    now = time.time()
    # iat is optional: Apple's Python library (app-store-server-library 3.x) sends none, and Apple accepts it.
    iat, exp = claims.get("iat", int(now)), claims.get("exp")
    if not isinstance(iat, int) or not isinstance(exp, int) or iat > now + 60 or exp <= now or exp - iat > 3600:
        return None, "times iat=%r exp=%r now=%d" % (iat, exp, now)
    if not verify_es256((parts[0] + "." + parts[1]).encode(), signature):
        return None, "signature"
    return claims, None


def page(items, offset, size):
    return items[offset:offset + size], offset + size < len(items)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        with LOCK:
            CONNECTIONS[0] += 1
            with open(path_in("connections.tmp"), "w") as f:
                f.write(str(CONNECTIONS[0]))
            os.rename(path_in("connections.tmp"), path_in("connections"))

    def capture(self, url, raw_body):
        """What a parity test compares with Apple's own library: every header as sent (names in the case sent), the
        raw query (order and encoding), the token's header, and when the request came (seconds)."""
        token_header = None
        authorization = self.headers.get("Authorization") or ""
        if authorization.startswith("Bearer "):
            try:
                token_header = json.loads(b64url_decode(authorization[len("Bearer "):].split(".")[0]))
            except Exception:
                pass
        return {"headers": [[name, value] for name, value in self.headers.items()], "rawQuery": url.query,
                "rawBody": base64.b64encode(raw_body).decode(), "tokenHeader": token_header,
                "receivedAt": time.time()}

    def send_json(self, status, value, headers=()):
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, text in headers:
            self.send_header(name, text)
        self.end_headers()
        self.wfile.write(body)
        # Answered: handle_duty's callers tell an answered duty from a path it does not know (None) by this.
        return True

    def error(self, status, code, message):
        return self.send_json(status, {"errorCode": code, "errorMessage": message})

    def do_GET(self):
        self.handle_api("GET")

    def do_POST(self):
        self.handle_api("POST")

    def do_PUT(self):
        self.handle_api("PUT")

    def send_empty(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()
        return True

    def send_response(self, code, message=None):
        self.answered = True
        super().send_response(code, message)

    def handle_api(self, method):
        self.answered = False
        with open(path_in("fixture.json")) as f:
            fixture = json.load(f)
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        length = int(self.headers.get("Content-Length") or 0)
        raw_body = self.rfile.read(length) if length else b""
        claims, refusal = check_token(fixture, self.headers.get("Authorization"))
        with LOCK:
            with open(path_in("requests.jsonl"), "a") as log:
                log.write(json.dumps({"method": method, "path": url.path, "query": query,
                                      "body": raw_body.decode(errors="replace"),
                                      "contentType": self.headers.get("Content-Type"),
                                      "claims": claims, "refusal": refusal,
                                      **(self.capture(url, raw_body) if fixture.get("capture") else {})}) + "\n")
            faults = fixture.get("faults", {}).get(url.path, [])
            fault = fixture.get("always")
            if fault and not url.path.startswith(fault.get("pathPrefix", "/")):
                fault = None
            if faults:
                fault = faults.pop(0)
                with open(path_in("fixture.json"), "w") as f:
                    json.dump(fixture, f)
        if refusal:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault:
            if "hang" in fault:
                time.sleep(fault["hang"])
                return
            if fault["status"] == 429:
                headers = [("Retry-After", fault["retryAfter"])] if "retryAfter" in fault else []
                return self.send_json(429, {"errorCode": 4290000, "errorMessage": "Rate limit exceeded."}, headers)
            return self.error(fault["status"], fault.get("errorCode", 5000000), "An unknown error occurred.")
        size = fixture.get("pageSize", 20)
        env = fixture.get("environment", "Production")
        segments = url.path.strip("/").split("/")
        if method == "POST" and url.path == "/inApps/v1/notifications/history":
            try:
                request = json.loads(raw_body)
                start, end = request["startDate"], request["endDate"]
            except Exception:
                return self.error(400, 4000000, "Invalid request.")
            if start > end:
                return self.error(400, 4000013, "Invalid start date. The start date needs to precede the end date.")
            token = query.get("paginationToken", ["page-0"])[0]
            if not token.startswith("page-") or not token[5:].isdigit():
                return self.error(400, 4000014, "Invalid pagination token.")
            chosen = [n for n in fixture.get("notifications", []) if start <= n["date"] <= end]
            items, more = page(chosen, int(token[5:]), size)
            answer = {"notificationHistory": [{"signedPayload": n["signedPayload"],
                                               "sendAttempts": n.get("sendAttempts", [])} for n in items],
                      "hasMore": more}
            if more:
                answer["paginationToken"] = "page-%d" % (int(token[5:]) + size)
            return self.send_json(200, answer)
        if method == "POST" and url.path == "/inApps/v1/notifications/test":
            return self.send_json(200, {"testNotificationToken": "test-token-1"})
        if method == "GET" and segments[:4] == ["inApps", "v1", "notifications", "test"] and len(segments) == 5:
            if segments[4] != "test-token-1" or "testNotification" not in fixture:
                return self.error(404, 4040008, "Test notification not found.")
            return self.send_json(200, {"signedPayload": fixture["testNotification"],
                                        "sendAttempts": [{"attemptDate": 1698148900000, "sendAttemptResult": "SUCCESS"}]})
        # Whether handle_duty answered is what send_response saw: its sends return None like every other.
        self.handle_duty(method, segments, query, raw_body, fixture, size)
        if self.answered:
            return
        if method != "GET" or len(segments) != 4:
            return self.error(404, 4040000, "Not found.")
        identifier = urllib.parse.unquote(segments[3])
        transactions = fixture.get("transactions", {})
        if segments[:3] == ["inApps", "v2", "history"]:
            if identifier not in transactions:
                return self.error(404, 4040010, "Transaction id not found.")
            revision = query.get("revision", ["rev-0"])[0]
            if not revision.startswith("rev-") or not revision[4:].isdigit():
                return self.error(400, 4000005, "Invalid revision.")
            items, more = page(transactions[identifier], int(revision[4:]), size)
            return self.send_json(200, {"revision": "rev-%d" % (int(revision[4:]) + len(items)), "hasMore": more,
                                        "bundleId": fixture["bundleId"], "appAppleId": 5454545, "environment": env,
                                        "signedTransactions": items})
        if segments[:3] == ["inApps", "v1", "transactions"]:
            if identifier not in transactions or not transactions[identifier]:
                return self.error(404, 4040010, "Transaction id not found.")
            return self.send_json(200, {"signedTransactionInfo": transactions[identifier][0]})
        if segments[:3] == ["inApps", "v1", "subscriptions"]:
            groups = fixture.get("subscriptions", {}).get(identifier)
            if groups is None:
                return self.error(404, 4040010, "Transaction id not found.")
            return self.send_json(200, {"environment": env, "bundleId": fixture["bundleId"], "appAppleId": 5454545,
                                        "data": groups})
        if segments[:3] == ["inApps", "v1", "lookup"]:
            orders = fixture.get("orders", {})
            if identifier not in orders:
                return self.send_json(200, {"status": 1})
            return self.send_json(200, {"status": 0, "signedTransactions": orders[identifier]})
        return self.error(404, 4040000, "Not found.")


    def handle_duty(self, method, segments, query, raw_body, fixture, size):
        """The calls of a server's duties (consumption, refunds, extensions, tokens, finishing, app transactions);
        None for any other path."""
        ids = [urllib.parse.unquote(s) for s in segments]
        try:
            body = json.loads(raw_body) if raw_body else {}
        except Exception:
            body = None
        if method == "PUT" and ids[:4] == ["inApps", "v2", "transactions", "consumption"] and len(ids) == 5:
            if not isinstance(body, dict):
                return self.error(400, 4000000, "Invalid request.")
            if body.get("customerConsented") is not True:
                return self.error(400, 4000035, "Invalid request. The customer consented field is invalid.")
            if body.get("deliveryStatus") not in ("DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM",
                                                  "UNDELIVERED_SERVER_OUTAGE", "UNDELIVERED_OTHER"):
                return self.error(400, 4000036, "Invalid request. The delivery status field is invalid.")
            if not isinstance(body.get("sampleContentProvided"), bool):
                return self.error(400, 4000041, "Invalid request. The sample content provided field is invalid.")
            preference = body.get("refundPreference")
            if preference not in (None, "DECLINE", "GRANT_FULL", "GRANT_PRORATED"):
                return self.error(400, 4000044, "Invalid request. The refund preference field is invalid.")
            percentage = body.get("consumptionPercentage")
            if percentage is not None and (type(percentage) is not int or not 0 <= percentage <= 100000):
                return self.error(400, 4000042, "Invalid request. The consumption percentage field is invalid.")
            if preference == "GRANT_PRORATED" and not percentage:
                return self.error(400, 4000042, "Invalid request. The consumption percentage field is invalid.")
            return self.send_empty(202)
        if method == "GET" and ids[:4] == ["inApps", "v2", "refund", "lookup"] and len(ids) == 5:
            refunds = fixture.get("refunds", {})
            if ids[4] not in refunds and ids[4] not in fixture.get("transactions", {}):
                return self.error(404, 4040010, "Transaction id not found.")
            revision = query.get("revision", ["rev-0"])[0]
            if not revision.startswith("rev-") or not revision[4:].isdigit():
                return self.error(400, 4000005, "Invalid revision.")
            items, more = page(refunds.get(ids[4], []), int(revision[4:]), size)
            return self.send_json(200, {"signedTransactions": items, "hasMore": more,
                                        "revision": "rev-%d" % (int(revision[4:]) + len(items))})
        if method == "PUT" and ids[:4] == ["inApps", "v1", "subscriptions", "extend"] and len(ids) == 5:
            refusal = self.extension_refusal(body)
            if refusal:
                return refusal
            wanted = fixture.get("extensions", {}).get(ids[4], {})
            if "errorCode" in wanted:
                return self.error(403, wanted["errorCode"], "The subscription cannot be extended.")
            with LOCK:
                state = load_state()
                done = state.setdefault("extensions", {}).setdefault(ids[4], [])
                if len(done) >= 2 and body["requestIdentifier"] not in done:
                    return self.error(403, 4030005, "The subscription has reached the maximum number of extensions.")
                if body["requestIdentifier"] not in done:
                    done.append(body["requestIdentifier"])
                save_state(state)
            effective = wanted.get("effectiveDate", int(time.time() * 1000) + body["extendByDays"] * 86400000)
            return self.send_json(200, {"originalTransactionId": ids[4], "webOrderLineItemId": "wol-" + ids[4],
                                        "success": True, "effectiveDate": effective})
        if method == "POST" and ids[:5] == ["inApps", "v1", "subscriptions", "extend", "mass"] and len(ids) == 5:
            refusal = self.extension_refusal(body)
            if refusal:
                return refusal
            if not isinstance(body.get("productId"), str) or not body["productId"]:
                return self.error(400, 4000023, "Invalid request. The product id parameter is invalid.")
            with LOCK:
                state = load_state()
                state.setdefault("mass", {})[body["requestIdentifier"]] = {"productId": body["productId"], "polls": 0}
                save_state(state)
            return self.send_json(200, {"requestIdentifier": body["requestIdentifier"]})
        if method == "GET" and ids[:5] == ["inApps", "v1", "subscriptions", "extend", "mass"] and len(ids) == 7:
            with LOCK:
                state = load_state()
                request = state.get("mass", {}).get(ids[6])
                if request is None or request["productId"] != ids[5]:
                    return self.error(404, 4040011, "Invalid request identifier.")
                request["polls"] += 1
                save_state(state)
            if request["polls"] < fixture.get("massStatusPolls", 1):
                return self.send_json(200, {"requestIdentifier": ids[6], "complete": False})
            return self.send_json(200, {"requestIdentifier": ids[6], "complete": True,
                                        "completeDate": int(time.time() * 1000), "succeededCount": 30,
                                        "failedCount": 2})
        if method == "PUT" and ids[:3] == ["inApps", "v1", "transactions"] and len(ids) == 5 \
                and ids[4] == "appAccountToken":
            token = body.get("appAccountToken") if isinstance(body, dict) else None
            try:
                import uuid
                uuid.UUID(token)
            except Exception:
                return self.error(400, 4000183, "Invalid request. The app account token field must be a valid UUID.")
            return self.send_empty(200)
        if method == "POST" and ids[:3] == ["inApps", "v1", "transactions"] and len(ids) == 5 and ids[4] == "finish":
            return self.send_empty(200)
        if method == "GET" and ids[:4] == ["inApps", "v1", "transactions", "appTransactions"] and len(ids) == 5:
            signed = fixture.get("appTransactions", {}).get(ids[4])
            if signed is None:
                return self.error(404, 4040019, "No AppTransaction exists for the customer.")
            return self.send_json(200, {"signedAppTransactionInfo": signed})
        return None

    def extension_refusal(self, body):
        if not isinstance(body, dict):
            return self.error(400, 4000000, "Invalid request.")
        days = body.get("extendByDays")
        if type(days) is not int or not 1 <= days <= 90:
            return self.error(400, 4000009, "Invalid request. The extend by days value is invalid.")
        if body.get("extendReasonCode") not in (0, 1, 2, 3):
            return self.error(400, 4000010, "Invalid request. The extend reason code is invalid.")
        if not isinstance(body.get("requestIdentifier"), str) or not body["requestIdentifier"]:
            return self.error(400, 4000011, "Invalid request. The request identifier is invalid.")
        return None


def load_state():
    try:
        with open(path_in("state.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def save_state(state):
    with open(path_in("state.tmp"), "w") as f:
        json.dump(state, f)
    os.rename(path_in("state.tmp"), path_in("state.json"))


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


def exit_with_parent(parent):
    # A test killed before it stops the fake must not leave it running.
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def main():
    # Test runners may start the fake with SIGTERM blocked or ignored; it must stop when told.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    threading.Thread(target=exit_with_parent, args=(os.getppid(),), daemon=True).start()
    make_pki()
    server = Server(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(path_in("server.pem"), path_in("server.key"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    with open(path_in("port.tmp"), "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(path_in("port.tmp"), path_in("port"))
    server.serve_forever()


if __name__ == "__main__":
    main()
