"""Hand-written conformance checks of live receiptd answers against docs/openapi.yaml, for what a fuzzer cannot reach:
genuine (forged) receipts, every status of every endpoint, and the HTTP layer's limits. Run by test-openapi.sh,
which starts the servers and passes:

    SPEC              docs/openapi.yaml
    RECEIPTD, CA, UNTRUSTED_CA   the binary and two test PKIs (the servers trust CA only)
    MAIN_URL          the test world plus small limits (max_body_bytes 65536, max_header_bytes 8192,
                      header_read_timeout 1)
    PRODUCTION_ONLY_URL   the same with environments ["Production"]
    SMALL_URL         the test world with max_connections 2 and max_receipt_bytes 1024
    STORE_URL         the test world with a SQLite store and CA's EC chain (CA/jws-root.pem) trusted for StoreKit 2
    LEDGER            that store's SQLite file (the test locks it to make the ledger unreachable for writes)

Every answer must have a status the spec lists for its operation (or the spec's NotFound/MethodNotAllowed for
paths/methods it does not list), a documented Content-Type, the documented headers, and a body valid against the
schema for that status and media type. Each spec example must be valid against its own schema too.
"""

import base64
import http.client
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.parse

import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_PATH = os.environ["SPEC"]
RECEIPTD = os.environ["RECEIPTD"]
DEVICE = "6D1A2B3C-0000-4000-8000-0123456789AB"
OTHER_DEVICE = "0B5E9C7A-1111-4222-8333-444455556666"

with open(SPEC_PATH) as file:
    SPEC = yaml.safe_load(file)
SPEC_URI = "urn:receiptd:openapi"
REGISTRY = Registry().with_resource(SPEC_URI, Resource.from_contents(SPEC, default_specification=DRAFT202012))

failures = []
checked = 0


def resolve(node):
    """Follows a `$ref` to a response/parameter object inside the spec (schemas are left to the validator)."""
    while isinstance(node, dict) and "$ref" in node:
        target = SPEC
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


def schema_errors(pointer, instance):
    """Errors of `instance` against the schema at JSON pointer `pointer` in the spec (so its refs resolve)."""
    validator = Draft202012Validator({"$ref": SPEC_URI + "#" + pointer}, registry=REGISTRY)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(instance)]


def escape(segment):
    return segment.replace("~", "~0").replace("/", "~1")


def response_object(path, method, status):
    """(spec response object, JSON pointer to it, where it came from) for an answer, or raises with the reason."""
    operation = SPEC["paths"].get(path, {}).get(method.lower())
    if path not in SPEC["paths"]:
        name = "NotFound"
    elif operation is None:
        name = "MethodNotAllowed"
    else:
        responses = operation["responses"]
        if str(status) not in responses:
            raise LookupError(f"{method} {path}: status {status} is not documented (documented: {sorted(responses)})")
        entry = responses[str(status)]
        if "$ref" in entry:
            return resolve(entry), entry["$ref"].lstrip("#"), entry["$ref"]
        return entry, f"/paths/{escape(path)}/{method.lower()}/responses/{status}", f"{method} {path} {status}"
    pointer = f"/components/responses/{name}"
    expected = {"NotFound": 404, "MethodNotAllowed": 405}[name]
    if status != expected:
        raise LookupError(f"{method} {path}: undocumented {'path' if name == 'NotFound' else 'method'} answered "
                          f"{status}, the spec says {expected} ({name})")
    return SPEC["components"]["responses"][name], pointer, pointer


def check(label, method, path, status, headers, body, *, expect=None, as_operation=None):
    """Checks one answer against the spec; `expect` is the status this scenario must produce."""
    global checked
    checked += 1
    problems = []
    if expect is not None and status != expect:
        problems.append(f"expected HTTP {expect}, got {status}")
    try:
        spec_path, spec_method = as_operation or (path.split("?")[0], method)
        response, pointer, origin = response_object(spec_path, spec_method, status)
        for name, header in (response.get("headers") or {}).items():
            if name.lower() not in headers:
                problems.append(f"documented header {name} missing")
        content_type = headers.get("content-type", "")
        essence = content_type.split(";")[0].strip().lower()
        content = response.get("content") or {}
        if essence not in content:
            problems.append(f"Content-Type {content_type!r} not documented for {origin} (documented: {sorted(content)})")
        elif essence == "application/json":
            try:
                document = json.loads(body)
            except ValueError as error:
                problems.append(f"body is not JSON: {error}: {body[:200]!r}")
            else:
                media_pointer = f"{pointer}/content/{escape(essence)}/schema"
                for error in schema_errors(media_pointer, document):
                    problems.append(f"schema ({origin}): {error}")
    except LookupError as error:
        problems.append(str(error))
    if problems:
        failures.append(f"{label}: " + "; ".join(problems))
        print(f"FAIL {label}")
        for problem in problems:
            print(f"       {problem}")
        if body:
            print(f"       body: {body[:600]!r}")
    else:
        print(f"ok   {label} ({status})")


def request(base, method, path, body=b"", headers=None, label=None, expect=None, as_operation=None, code=None):
    """Sends one request with exactly the given headers (http.client adds no Content-Type) and checks the answer;
    `code`: the `error.code` the JSON answer must carry."""
    url = urllib.parse.urlsplit(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        connection.request(method, path, body=body if body or method != "GET" else None, headers=headers or {})
        response = connection.getresponse()
        payload = response.read()
        answer = (response.status, {k.lower(): v for k, v in response.getheaders()}, payload)
    finally:
        connection.close()
    check(label or f"{method} {path}", method, path, *answer, expect=expect, as_operation=as_operation)
    if code:
        expect_member(answer[2], ("error", "code"), code, label or f"{method} {path}")
    return answer


def raw_exchange(base, data, wait_for_close=5.0):
    """Sends raw bytes on a fresh connection, reads until the server closes it (bounded); returns the parsed answer."""
    url = urllib.parse.urlsplit(base)
    with socket.create_connection((url.hostname, url.port), timeout=wait_for_close) as sock:
        if data:
            sock.sendall(data)
        received = b""
        deadline = time.monotonic() + wait_for_close
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            received += chunk
    return parse_raw(received)


def parse_raw(received):
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not lines or not lines[0].startswith("HTTP/1.1 "):
        raise AssertionError(f"not an HTTP answer: {received[:200]!r}")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", len(body)))
    return status, headers, body[:length]


def expect_member(payload, keys, want, label):
    """A scenario check beyond the schema: the member at `keys` of the JSON answer must equal `want`."""
    global checked
    checked += 1
    try:
        value = json.loads(payload)
        for key in keys:
            value = value[key]
    except (ValueError, KeyError, TypeError, IndexError):
        value = "(absent)"
    if value != want:
        failures.append(f"{label}: {'.'.join(map(str, keys))} is {value!r}, wanted {want!r}")
        print(f"FAIL {label}: {'.'.join(map(str, keys))} is {value!r}, wanted {want!r}")
    else:
        print(f"ok   {label}: {'.'.join(map(str, keys))} = {want!r}")


def expect_keys(payload, keys, want, label):
    """A scenario check beyond the schema: the object at `keys` of the JSON answer has exactly the members `want`."""
    global checked
    checked += 1
    try:
        value = json.loads(payload)
        for key in keys:
            value = value[key]
        got = set(value)
    except (ValueError, KeyError, TypeError, IndexError):
        got = "(absent)"
    where = ".".join(map(str, keys)) or "(root)"
    if got != set(want):
        extra, missing = (sorted(got - set(want)), sorted(set(want) - got)) if got != "(absent)" else ([], want)
        failures.append(f"{label}: {where} members: extra {extra}, missing {missing}")
        print(f"FAIL {label}: {where} members: extra {extra}, missing {missing}")
    else:
        print(f"ok   {label}: {where} has exactly its documented members")


def member(payload, *keys):
    value = json.loads(payload)
    for key in keys:
        value = value[key]
    return value


def forge_jws(command, *args, ca=None):
    """`receiptd testing COMMAND --ca CA ARGS…`: a forged StoreKit 2 JWS (text, stripped)."""
    argv = [RECEIPTD, "testing", command, "--ca", ca or os.environ["CA"], *args]
    return subprocess.run(argv, check=True, capture_output=True, timeout=30).stdout.strip()


def forge(*args, ca=None, environment="Production", bundle="com.example.app", version="1.0", device=DEVICE,
          created=None):
    command = [RECEIPTD, "testing", "receipt", "--ca", ca or os.environ["CA"], "--bundle-id", bundle,
               "--app-version", version, "--environment", environment, "--device-id", device]
    if created:
        command += ["--created", created]
    for spec in args:
        command += ["--purchase", spec]
    return subprocess.run(command, check=True, capture_output=True, timeout=30).stdout


def apple(receipt, password="s3cret", **extra):
    body = {"receipt-data": base64.b64encode(receipt).decode()}
    if password is not None:
        body["password"] = password
    body.update(extra)
    return json.dumps(body).encode()


def multipart(fields, boundary="e2e-boundary-1f3a"):
    parts = []
    for name, (value, filename) in fields.items():
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        head = f"--{boundary}\r\nContent-Disposition: {disposition}\r\n"
        if filename:
            head += "Content-Type: application/octet-stream\r\n"
        parts.append(head.encode() + b"\r\n" + value + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def check_examples():
    """Every `example` under a media type must satisfy that media type's schema."""
    global checked
    for path, item in SPEC["paths"].items():
        for method, operation in item.items():
            for status, response in operation.get("responses", {}).items():
                pointer = f"/paths/{escape(path)}/{method}/responses/{status}"
                if "$ref" in response:
                    pointer = response["$ref"].lstrip("#")
                    response = resolve(response)
                for media, content in (response.get("content") or {}).items():
                    if "example" in content and media == "application/json":
                        checked += 1
                        errors = schema_errors(f"{pointer}/content/{escape(media)}/schema", content["example"])
                        label = f"example {method.upper()} {path} {status}"
                        if errors:
                            failures.append(f"{label}: {errors}")
                            print(f"FAIL {label}: {errors}")
                        else:
                            print(f"ok   {label}")


def main():
    main_url = os.environ["MAIN_URL"]
    strict_url = os.environ["PRODUCTION_ONLY_URL"]
    small_url = os.environ["SMALL_URL"]

    check_examples()

    # Receipts with every optional field set, so nullable fields are seen both ways.
    full = forge("product=pro.monthly,transaction=1000,purchased=2026-01-01T00:00:00Z,expires=2026-02-01T00:00:00Z,"
                 "web_order=2000000000000001,trial=true",
                 "product=pro.monthly,transaction=1001,original=1000,purchased=2026-02-01T00:00:00Z,"
                 "original_purchased=2026-01-01T00:00:00Z,expires=2099-03-01T00:00:00Z,web_order=2000000000000002,"
                 "intro=true,offer=WINBACK",
                 "product=pro.yearly,transaction=3000,purchased=2026-01-10T00:00:00Z,expires=2099-01-10T00:00:00Z,"
                 "cancelled=2026-01-12T00:00:00Z",
                 "product=coins.100,transaction=5000,quantity=3")
    plain = forge("product=coins.100,transaction=6000")
    sandbox = forge("product=pro.monthly,transaction=7000,expires=2099-01-01T00:00:00Z", environment="Sandbox")
    untrusted = forge("product=pro.monthly,transaction=9000", ca=os.environ["UNTRUSTED_CA"])
    other_app = forge(bundle="com.example.other")
    old_version = forge(version="0.9")
    garbage = b"\x30\x03\x02\x01\x00 this is not a receipt"

    v = "/v1/validate"
    der = {"Content-Type": "application/octet-stream"}
    # 200
    request(main_url, "POST", v, full, {**der, "X-Device-Id": DEVICE}, label="validate DER, every field", expect=200)
    request(main_url, "POST", v, full, {"Content-Type": "application/pkcs7-mime"}, label="validate pkcs7-mime, no device", expect=200)
    request(main_url, "POST", v, base64.b64encode(plain) + b"\n", {"Content-Type": "text/plain"}, label="validate base64 text", expect=200)
    request(main_url, "POST", v, json.dumps({"receipt": base64.b64encode(plain).decode(), "device_id": DEVICE}).encode(),
            {"Content-Type": "application/json"}, label="validate JSON", expect=200)
    body, content_type = multipart({"receipt": (plain, "receipt"), "device_id": (DEVICE.encode(), None)})
    request(main_url, "POST", v, body, {"Content-Type": content_type}, label="validate multipart", expect=200)
    request(main_url, "POST", f"{v}?device_id={DEVICE}", plain, der, label="validate ?device_id=", expect=200)
    request(main_url, "POST", v, plain, {**der, "Accept": "text/html"}, label="validate, HTML wanted", expect=200)
    request(main_url, "POST", v, sandbox, der, label="validate sandbox receipt", expect=200)
    # 422
    request(main_url, "POST", v, full, {**der, "X-Device-Id": OTHER_DEVICE}, label="validate wrong device", expect=422, code="device_hash_mismatch")
    request(main_url, "POST", v, untrusted, der, label="validate untrusted CA", expect=422, code="certificate_untrusted")
    request(main_url, "POST", v, garbage, der, label="validate unreadable receipt", expect=422, code="malformed_receipt")
    request(main_url, "POST", v, other_app, der, label="validate other bundle id", expect=422, code="bundle_id_mismatch")
    request(main_url, "POST", v, old_version, der, label="validate version not accepted", expect=422, code="version_not_accepted")
    request(strict_url, "POST", v, sandbox, der, label="validate environment not accepted", expect=422, code="environment_not_accepted")
    request(main_url, "POST", v, untrusted, {**der, "Accept": "text/html"}, label="validate invalid, HTML wanted", expect=422)
    # 400
    request(main_url, "POST", v, b"", der, label="validate empty body", expect=400, code="bad_request")
    request(main_url, "POST", v, b'{"device_id": null}', {"Content-Type": "application/json"}, label="validate JSON without receipt", expect=400, code="bad_request")
    request(main_url, "POST", v, b"{not json", {"Content-Type": "application/json"}, label="validate broken JSON", expect=400, code="bad_request")
    request(main_url, "POST", v, b"***", {"Content-Type": "text/plain"}, label="validate bad base64", expect=400, code="bad_request")
    request(main_url, "POST", v, plain, {**der, "X-Device-Id": "not-a-device"}, label="validate bad device id", expect=400, code="bad_request")
    request(main_url, "POST", v, b"x", {"Content-Type": "multipart/form-data"}, label="validate multipart, no boundary", expect=400, code="bad_request")
    request(main_url, "POST", v, b"", {**der, "Accept": "text/html"}, label="validate empty body, HTML wanted", expect=400)
    # 413, 415, 431, 408, 503
    request(main_url, "POST", v, b"\x30" * 70000, der, label="validate body over max_body_bytes", expect=413, code="payload_too_large")
    request(main_url, "POST", v, plain, {"Content-Type": "image/png"}, label="validate unsupported type", expect=415, code="unsupported_media_type")
    request(main_url, "POST", v, plain, {"Content-Type": "not a type"}, label="validate unparsable type", expect=415, code="unsupported_media_type")
    request(main_url, "POST", v, plain, {"Content-Type": "image/png", "Accept": "text/html"},
            label="validate unsupported type, HTML wanted", expect=415)
    status, headers, payload = raw_exchange(
        main_url, f"POST {v} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: {'a' * 10000}\r\nContent-Length: 0\r\n\r\n".encode())
    check("validate headers over max_header_bytes", "POST", v, status, headers, payload, expect=431)
    expect_member(payload, ("error", "code"), "header_too_large", "validate headers over max_header_bytes")
    status, headers, payload = raw_exchange(main_url, f"POST {v} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode())
    check("validate headers too slow", "POST", v, status, headers, payload, expect=408)
    expect_member(payload, ("error", "code"), "request_timeout", "validate headers too slow")
    check_crowded(small_url)
    _, _, payload = request(small_url, "POST", v, plain, der, label="validate receipt over max_receipt_bytes",
                            expect=422)
    expect_member(payload, ("error", "code"), "malformed_receipt", "validate receipt over max_receipt_bytes")
    _, _, payload = request(small_url, "POST", "/verifyReceipt", apple(plain),
                            label="/verifyReceipt receipt over max_receipt_bytes", expect=200)
    expect_member(payload, ("status",), 21002, "/verifyReceipt receipt over max_receipt_bytes")
    # 404, 405
    request(main_url, "GET", "/no/such/path", label="unknown path", expect=404, code="not_found")
    request(main_url, "GET", v, label="GET /v1/validate", expect=405, code="method_not_allowed")
    request(main_url, "POST", "/healthz", b"", der, label="POST /healthz", expect=405, code="method_not_allowed")

    # verifyReceipt: always 200; the status is in the body.
    for path, base, receipt, extra, want, label in [
        ("/verifyReceipt", main_url, full, {}, 0, "production receipt"),
        ("/verifyReceipt", main_url, full, {"exclude-old-transactions": True}, 0, "exclude-old-transactions"),
        ("/verifyReceipt", main_url, None, {}, 21002, "receipt-data not base64"),
        ("/verifyReceipt", main_url, garbage, {}, 21002, "unreadable receipt"),
        ("/verifyReceipt", main_url, untrusted, {}, 21003, "untrusted CA"),
        ("/verifyReceipt", main_url, full, {"password": "wrong"}, 21004, "wrong password"),
        ("/verifyReceipt", strict_url, sandbox, {}, 21007, "sandbox receipt, production only"),
        ("/verifyReceipt", main_url, other_app, {}, 21010, "other app"),
        ("/sandbox/verifyReceipt", main_url, sandbox, {}, 0, "sandbox receipt"),
        ("/sandbox/verifyReceipt", main_url, full, {}, 21008, "production receipt"),
        ("/sandbox/verifyReceipt", main_url, untrusted, {}, 21003, "untrusted CA"),
    ]:
        body = apple(receipt, **extra) if receipt is not None else b'{"receipt-data": "@@@", "password": "s3cret"}'
        _, _, payload = request(base, "POST", path, body, label=f"{path} {label}", expect=200)
        expect_member(payload, ("status",), want, f"{path} {label}")
    # Apple: 21000 for a body it cannot read as a JSON object, 21002 for receipt-data "malformed or missing".
    for body, label, want in [(b"", "no body", 21000), (b"[1]", "not an object", 21000),
                              (b'{"password": "s3cret"}', "no receipt-data", 21002),
                              (b'{"receipt-data": ""}', "empty receipt-data", 21002)]:
        _, _, payload = request(main_url, "POST", "/verifyReceipt", body, {"Content-Type": "application/json"},
                                label=f"/verifyReceipt {label}", expect=200)
        expect_member(payload, ("status",), want, f"/verifyReceipt {label}")
    # Apple answered 21000 to any other method with HTTP 200, and so does receiptd: same schema as the POST.
    _, _, payload = request(main_url, "GET", "/verifyReceipt", label="GET /verifyReceipt", expect=200,
                            as_operation=("/verifyReceipt", "POST"))
    expect_member(payload, ("status",), 21000, "GET /verifyReceipt")

    check_storekit_and_ledger(os.environ["STORE_URL"], main_url)
    check_accounts(os.environ["STORE_URL"], main_url)

    # Operations
    request(main_url, "GET", "/healthz", expect=200)
    request(main_url, "GET", "/readyz", expect=200)
    request(main_url, "GET", "/metrics", expect=200)
    request(main_url, "GET", "/", expect=200)

    check_who_may_call(os.environ["AUTH_URL"], os.environ["AUTH_TOKEN"], os.environ["METRICS_TOKEN"])

    print(f"{checked - len(failures)} of {checked} answers conform to {SPEC_PATH}")
    return 1 if failures else 0


def check_who_may_call(auth_url, token, metrics_token):
    """401 and 403 as documented, on a server with api_tokens."""
    guarded = [("GET", "/", "/"), ("POST", "/v1/validate", "/v1/validate"),
               ("GET", "/v1/subscriptions/1000000001", "/v1/subscriptions/{original_transaction_id}"),
               ("GET", "/v1/transactions/1000000001", "/v1/transactions/{transaction_id}"),
               ("POST", "/v1/transactions/1000000001/claim", "/v1/transactions/{transaction_id}/claim"),
               ("GET", "/lookup?id=1000000001", "/lookup")]
    for method, path, operation in guarded + [("GET", "/metrics", "/metrics")]:
        status, headers, _ = request(auth_url, method, path, body=b"{}" if method == "POST" else b"",
                                     label=f"{method} {path} without a token", expect=401, code="unauthorized",
                                     as_operation=(operation, method))
        if headers.get("www-authenticate") != 'Bearer realm="receiptd", Basic realm="receiptd"':
            failures.append(f"{method} {path}: WWW-Authenticate is {headers.get('www-authenticate')!r}")
    for method, path, operation in guarded:
        request(auth_url, method, path, body=b"{}" if method == "POST" else b"",
                headers={"Authorization": f"Bearer {metrics_token}"}, label=f"{method} {path} without the scope",
                expect=403, code="forbidden", as_operation=(operation, method))
    basic = "Basic " + base64.b64encode(f":{token}".encode()).decode()
    request(auth_url, "GET", "/metrics", headers={"Authorization": basic}, label="GET /metrics as Basic", expect=200)
    request(auth_url, "GET", "/v1/transactions/" + "x" * 65, headers={"Authorization": f"Bearer {token}"},
            label="a 65-character transaction id", expect=400, code="bad_request",
            as_operation=("/v1/transactions/{transaction_id}", "GET"))


TRANSACTION_KEYS = ["transaction_id", "original_transaction_id", "web_order_line_item_id", "product_id", "bundle_id",
                    "type", "quantity", "purchase_date", "original_purchase_date", "expires_date", "revocation_date",
                    "revocation_reason", "in_app_ownership_type", "app_account_token", "offer_type", "environment",
                    "signed_date", "price", "currency", "storefront", "storefront_id", "transaction_reason",
                    "is_upgraded", "subscription_group_identifier", "offer_identifier", "offer_discount_type",
                    "offer_period", "app_transaction_id", "revocation_type", "revocation_percentage",
                    "billing_plan_type", "commitment_info", "advanced_commerce_info", "device_verification",
                    "device_verification_nonce"]
RENEWAL_KEYS = ["original_transaction_id", "product_id", "auto_renew_product_id", "auto_renew_status",
                "expiration_intent", "is_in_billing_retry_period", "grace_period_expires_date", "renewal_date",
                "environment", "signed_date", "price_increase_status", "offer_type", "offer_identifier",
                "recent_subscription_start_date", "renewal_price", "currency", "offer_discount_type",
                "eligible_win_back_offer_ids", "app_account_token", "app_transaction_id", "offer_period",
                "advanced_commerce_info", "commitment_info", "renewal_billing_plan_type"]
CHECK_KEYS = ["signature", "bundle_id", "environment", "app_apple_id", "version", "device_hash"]
SUBSCRIPTION_KEYS = ["product_id", "original_transaction_id", "latest_transaction_id", "expires_date", "active",
                     "cancelled", "source", "as_of"]
# The ledger's transactions say, besides, whether it counts them as upgraded.
LEDGER_TRANSACTION_KEYS = TRANSACTION_KEYS + ["upgraded"]


def check_storekit_and_ledger(store_url, stateless_url):
    """StoreKit 2 on /v1/validate, /v1/notifications and the ledger's endpoints, on a server with a SQLite store (and
    503 store_not_configured on one without)."""
    v, n = "/v1/validate", "/v1/notifications"
    text = {"Content-Type": "text/plain"}
    as_json = {"Content-Type": "application/json"}
    # A subscription bought 2026-01-01 (expired), renewed 2026-02-01 by a notification until 2099, then in billing
    # retry with a grace period: ids of their own, so that schemathesis' requests cannot collide with them.
    transaction = forge_jws("transaction", "--bundle-id", "com.example.app", "--transaction-id", "870001",
                            "--original-transaction-id", "870000", "--product-id", "pro.monthly",
                            "--purchased", "2026-01-01T00:00:00Z", "--expires", "2026-02-01T00:00:00Z",
                            "--signed", "2026-01-01T00:00:05Z", "--environment", "Production")
    rogue = forge_jws("transaction", "--bundle-id", "com.example.app", "--transaction-id", "870009",
                      ca=os.environ["UNTRUSTED_CA"])
    renewal = forge_jws("renewal-info", "--original-transaction-id", "870000", "--product-id", "pro.monthly",
                        "--auto-renew", "false", "--billing-retry", "--expires", "2099-01-01T00:00:00Z",
                        "--grace-period-expires", "2099-01-17T00:00:00Z", "--signed", "2026-01-15T00:00:00Z")
    uuid = "4b0e6f1c-8a2d-4c3e-9f5a-6b7c8d9e0f10"
    notification = forge_jws("notification", "--type", "DID_RENEW", "--subtype", "BILLING_RECOVERY",
                             "--bundle-id", "com.example.app", "--uuid", uuid, "--transaction-id", "870002",
                             "--original-transaction-id", "870000", "--product-id", "pro.monthly",
                             "--purchased", "2026-02-01T00:00:00Z", "--expires", "2099-03-01T00:00:00Z",
                             "--signed", "2026-02-01T00:00:05Z", "--billing-retry",
                             "--grace-period-expires", "2099-01-01T00:00:00Z", "--environment", "Production")
    rogue_notification = forge_jws("notification", "--type", "DID_RENEW", "--bundle-id", "com.example.app",
                                   ca=os.environ["UNTRUSTED_CA"])
    delivery = json.dumps({"signedPayload": notification.decode()}).encode()

    # /v1/validate with a JWS: 200, 422, 400
    _, _, payload = request(store_url, "POST", v, transaction, text, label="validate a transaction JWS", expect=200)
    expect_keys(payload, (), ["valid", "kind", "environment", "checks", "signed_date", "payload", "transaction",
                              "subscriptions", "ledger"], "validate a transaction JWS")
    expect_keys(payload, ("checks",), CHECK_KEYS, "validate a transaction JWS")
    expect_keys(payload, ("transaction",), TRANSACTION_KEYS, "validate a transaction JWS")
    expect_keys(payload, ("subscriptions", 0), SUBSCRIPTION_KEYS, "validate a transaction JWS")
    expect_member(payload, ("kind",), "transaction", "validate a transaction JWS")
    expect_member(payload, ("ledger",), "available", "validate a transaction JWS")
    expect_member(payload, ("subscriptions", 0, "source"), "jws", "validate a transaction JWS")
    request(store_url, "POST", f"{v}?kind=transaction", json.dumps({"jws": transaction.decode()}).encode(), as_json,
            label="validate {\"jws\"} ?kind=transaction", expect=200)
    _, _, payload = request(store_url, "POST", v, renewal, text, label="validate renewal info", expect=200)
    expect_keys(payload, ("renewal_info",), RENEWAL_KEYS, "validate renewal info")
    _, _, payload = request(store_url, "POST", f"{v}?kind=renewal_info", transaction, text,
                            label="validate ?kind=renewal_info, a transaction", expect=422, code="kind_mismatch")
    _, _, payload = request(store_url, "POST", v, rogue, text, label="validate a rogue-chain JWS", expect=422,
                            code="certificate_untrusted")
    expect_member(payload, ("kind",), None, "validate a rogue-chain JWS")
    request(store_url, "POST", f"{v}?kind=coupon", transaction, text, label="validate ?kind= unknown", expect=400,
            code="bad_request")
    request(store_url, "POST", v, b'{"jws": "not a jws"}', as_json, label="validate {\"jws\"} not a JWS",
            expect=400, code="bad_request")
    # Issue 18: a damaged JWS is malformed_jws with a detail; a well-signed payload of no kind is unknown_kind.
    header, body, _ = transaction.decode().strip().split(".")
    _, _, payload = request(store_url, "POST", v, f"{header}.{body}".encode(), text,
                            label="validate a JWS cut to two segments", expect=422, code="malformed_jws")
    expect_member(payload, ("error", "detail"), "segment_count", "validate a JWS cut to two segments")
    mock_renewal = forge_jws("renewal-info", "--omit", "originalTransactionId", "--omit", "autoRenewProductId",
                             "--omit", "productId", "--omit", "autoRenewStatus", "--omit", "recentSubscriptionStartDate",
                             "--omit", "renewalDate")
    request(store_url, "POST", v, mock_renewal, text, label="validate a payload of no kind", expect=422,
            code="unknown_kind")
    _, _, payload = request(store_url, "POST", f"{v}?kind=renewal_info", mock_renewal, text,
                            label="validate a payload of no kind, ?kind=renewal_info", expect=200)
    expect_member(payload, ("ledger",), "not_stored", "validate a payload of no kind, ?kind=renewal_info")
    expect_member(payload, ("ledger_reason", "missing"), ["originalTransactionId"],
                  "validate a payload of no kind, ?kind=renewal_info")

    # /v1/notifications: 200, duplicate 200, 422, 400; 503 without a store
    _, _, payload = request(store_url, "POST", n, delivery, as_json, label="notification delivered", expect=200)
    expect_keys(payload, (), ["received", "notification_uuid", "notification_type", "subtype", "duplicate"],
                "notification delivered")
    expect_member(payload, ("notification_uuid",), uuid, "notification delivered")
    expect_member(payload, ("subtype",), "BILLING_RECOVERY", "notification delivered")
    expect_member(payload, ("duplicate",), False, "notification delivered")
    _, _, payload = request(store_url, "POST", n, delivery, as_json, label="notification delivered again", expect=200)
    expect_member(payload, ("duplicate",), True, "notification delivered again")
    request(store_url, "POST", n, json.dumps({"signedPayload": rogue_notification.decode()}).encode(), as_json,
            label="notification from a rogue chain", expect=422, code="certificate_untrusted")
    request(store_url, "POST", n, json.dumps({"signedPayload": transaction.decode()}).encode(), as_json,
            label="notification that is a transaction", expect=422, code="kind_mismatch")
    request(store_url, "POST", n, b"[]", as_json, label="notification body not an object", expect=400,
            code="bad_request")
    request(store_url, "POST", n, b'{"signedPayload": 42}', as_json, label="notification signedPayload not a string",
            expect=400, code="bad_request")
    request(stateless_url, "POST", n, delivery, as_json, label="notification without a store", expect=503,
            code="store_not_configured")
    _, _, payload = request(store_url, "POST", v, delivery, as_json, label="validate {\"signedPayload\"}",
                            expect=200)
    expect_keys(payload, ("notification",), ["notification_type", "subtype", "notification_uuid", "version",
                                             "signed_date", "bundle_id", "app_apple_id", "environment", "status",
                                             "bundle_version", "consumption_request_reason", "request_identifier",
                                             "succeeded_count", "failed_count", "product_id",
                                             "storefront_country_codes", "external_purchase_id",
                                             "token_creation_date"],
                "validate {\"signedPayload\"}")
    expect_member(payload, ("subscriptions", 0, "source"), "jws", "validate {\"signedPayload\"}")

    # GET /v1/subscriptions/{original_transaction_id}
    _, _, payload = request(store_url, "GET", "/v1/subscriptions/870000", label="subscription", expect=200,
                            as_operation=("/v1/subscriptions/{original_transaction_id}", "GET"))
    expect_keys(payload, (), ["original_transaction_id", "product_id", "status", "expires_date", "auto_renew_status",
                              "auto_renew_product_id", "is_in_billing_retry_period", "grace_period_expires_date",
                              "expiration_intent", "revocation_date", "environment", "latest_transaction",
                              "transactions", "last_notification", "updated_at", "extensions"], "subscription")
    expect_member(payload, ("extensions",), [], "subscription")
    expect_keys(payload, ("latest_transaction",), LEDGER_TRANSACTION_KEYS, "subscription")
    expect_keys(payload, ("last_notification",), ["notification_type", "subtype", "notification_uuid", "signed_date"],
                "subscription")
    expect_member(payload, ("status",), "active", "subscription")
    expect_member(payload, ("expires_date",), "2099-03-01T00:00:00Z", "subscription")
    expect_member(payload, ("latest_transaction", "transaction_id"), "870002", "subscription")
    expect_member(payload, ("last_notification", "notification_uuid"), uuid, "subscription")
    ids = json.dumps({"ids": [entry.get("transaction_id") for entry in member(payload, "transactions")]}).encode()
    expect_member(ids, ("ids",), ["870002", "870001"], "subscription: transactions, newest first")
    request(store_url, "GET", "/v1/subscriptions/870999", label="subscription unknown", expect=404,
            as_operation=("/v1/subscriptions/{original_transaction_id}", "GET"), code="not_found")
    request(stateless_url, "GET", "/v1/subscriptions/870000", label="subscription without a store", expect=503,
            as_operation=("/v1/subscriptions/{original_transaction_id}", "GET"), code="store_not_configured")

    # GET /v1/transactions/{transaction_id} and POST …/claim
    tx = ("/v1/transactions/{transaction_id}", "GET")
    claim_op = ("/v1/transactions/{transaction_id}/claim", "POST")
    _, _, payload = request(store_url, "GET", "/v1/transactions/870001", label="transaction", expect=200,
                            as_operation=tx)
    expect_keys(payload, (), ["transaction", "first_seen", "sources", "claim", "finished_at", "apple_calls",
                              "consumption_request"], "transaction")
    expect_keys(payload, ("transaction",), LEDGER_TRANSACTION_KEYS, "transaction")
    expect_member(payload, ("sources",), ["jws"], "transaction")
    expect_member(payload, ("claim",), None, "transaction")
    request(store_url, "GET", "/v1/transactions/870999", label="transaction unknown", expect=404, as_operation=tx,
            code="not_found")
    request(stateless_url, "GET", "/v1/transactions/870001", label="transaction without a store", expect=503,
            as_operation=tx, code="store_not_configured")
    claim = "/v1/transactions/870001/claim"
    account = lambda name: json.dumps({"account": name}).encode()
    _, _, payload = request(store_url, "POST", claim, account("user-1"), as_json, label="claim first",
                            expect=200, as_operation=claim_op)
    expect_keys(payload, (), ["transaction_id", "account", "claimed_at", "first_claim", "product_id", "environment",
                              "finished_at", "apple_calls"], "claim first")
    expect_member(payload, ("first_claim",), True, "claim first")
    _, _, payload = request(store_url, "POST", claim, account("user-1"), as_json, label="claim again, same account",
                            expect=200, as_operation=claim_op)
    expect_member(payload, ("first_claim",), False, "claim again, same account")
    _, _, payload = request(store_url, "POST", claim, account("user-2"), as_json, label="claim by another account",
                            expect=409, as_operation=claim_op, code="already_claimed")
    expect_keys(payload, (), ["error", "claim", "transaction_id", "product_id", "environment"],
                "claim by another account")
    expect_keys(payload, ("claim",), ["account", "claimed_at"], "claim by another account")
    expect_member(payload, ("claim", "account"), "user-1", "claim by another account")
    _, _, payload = request(store_url, "GET", "/v1/transactions/870001", label="transaction, claimed", expect=200,
                            as_operation=tx)
    expect_member(payload, ("claim", "account"), "user-1", "transaction, claimed")

    # GET /lookup: the support page's lookup box, a page for every answer.
    lookup = ("/lookup", "GET")
    _, _, page = request(store_url, "GET", "/lookup?id=870001", label="lookup", expect=200, as_operation=lookup)
    if b'<svg class="timeline"' not in page or b"user-1" not in page:
        failures.append("lookup: the page has no timeline, or not the account that claimed")
    request(store_url, "GET", "/lookup?id=870999", label="lookup unknown", expect=404, as_operation=lookup)
    request(store_url, "GET", "/lookup?id=a%2Fb", label="lookup, not an id", expect=400, as_operation=lookup)
    request(store_url, "GET", "/lookup", label="lookup without an id", expect=400, as_operation=lookup)
    request(store_url, "GET", "/lookup?id=MK5TTTVWJH", label="lookup of an order", expect=503, as_operation=lookup)
    request(stateless_url, "GET", "/lookup?id=870001", label="lookup without a store", expect=503, as_operation=lookup)
    request(store_url, "POST", "/v1/transactions/870999/claim", account("user-1"), as_json, label="claim unknown",
            expect=404, as_operation=claim_op, code="not_found")
    request(store_url, "POST", claim, b'{"account": ""}', as_json, label="claim, empty account", expect=400,
            as_operation=claim_op, code="bad_request")
    request(stateless_url, "POST", claim, account("user-1"), as_json, label="claim without a store", expect=503,
            as_operation=claim_op, code="store_not_configured")
    request(store_url, "POST", claim, json.dumps({"account": "user\u0000"}).encode(), as_json,
            label="claim, account with NUL", expect=400, as_operation=claim_op, code="bad_request")
    refunded = forge_jws("transaction", "--bundle-id", "com.example.app", "--transaction-id", "870031",
                         "--product-id", "pro.monthly", "--purchased", "2026-01-01T00:00:00Z",
                         "--revoked", "2026-01-05T00:00:00Z", "--signed", "2026-01-05T00:00:05Z",
                         "--environment", "Production")
    request(store_url, "POST", v, refunded, text, label="validate a refunded transaction", expect=200)
    _, _, payload = request(store_url, "POST", "/v1/transactions/870031/claim", account("user-1"), as_json,
                            label="claim, refunded", expect=409, as_operation=claim_op, code="revoked")
    expect_keys(payload, (), ["error", "transaction_id", "product_id", "environment", "revocation_date",
                              "revocation_reason", "claim"], "claim, refunded")
    expect_member(payload, ("revocation_date",), "2026-01-05T00:00:00Z", "claim, refunded")
    consumable = forge_jws("transaction", "--bundle-id", "com.example.app", "--transaction-id", "870041",
                           "--product-id", "coins.100", "--product-type", "Consumable",
                           "--signed", "2026-01-05T00:00:05Z", "--environment", "Production")
    request(store_url, "POST", v, consumable, text, label="validate a consumable", expect=200)
    request(store_url, "GET", "/v1/subscriptions/870041", label="subscription of a consumable", expect=404,
            as_operation=("/v1/subscriptions/{original_transaction_id}", "GET"), code="not_a_subscription")

    # A receipt made before the renewal: /v1/validate says the ledger knows better, /verifyReceipt shows the renewal
    # and the pending renewal info the notification brought.
    receipt = forge("product=pro.monthly,transaction=870001,original=870000,purchased=2026-01-01T00:00:00Z,"
                    "expires=2026-02-01T00:00:00Z", created="2026-01-01T00:00:10Z")
    _, _, payload = request(store_url, "POST", v, receipt, {"Content-Type": "application/octet-stream"},
                            label="validate a receipt, store configured", expect=200)
    expect_keys(payload, ("subscriptions", 0), SUBSCRIPTION_KEYS, "validate a receipt, store configured")
    expect_member(payload, ("ledger",), "available", "validate a receipt, store configured")
    expect_member(payload, ("subscriptions", 0, "source"), "ledger", "validate a receipt, store configured")
    expect_member(payload, ("subscriptions", 0, "latest_transaction_id"), "870002",
                  "validate a receipt, store configured")
    _, _, payload = request(store_url, "POST", "/verifyReceipt", apple(receipt),
                            label="/verifyReceipt after a notification", expect=200)
    expect_member(payload, ("status",), 0, "/verifyReceipt after a notification")
    expect_member(payload, ("latest_receipt_info", 0, "transaction_id"), "870002",
                  "/verifyReceipt after a notification")
    expect_keys(payload, ("pending_renewal_info", 0), [
        "auto_renew_product_id", "auto_renew_status", "is_in_billing_retry_period", "grace_period_expires_date",
        "grace_period_expires_date_ms", "grace_period_expires_date_pst", "original_transaction_id", "product_id"],
        "/verifyReceipt after a notification")
    expect_member(payload, ("pending_renewal_info", 0, "is_in_billing_retry_period"), "1",
                  "/verifyReceipt after a notification")
    request(store_url, "GET", "/readyz", label="readyz, store reachable", expect=200)

    # The ledger unreachable: another process holds the SQLite file's write lock, so every write waits out the busy
    # timeout (store_timeout, 2 s) and fails. Notifications and claims are 503 store_unavailable (Apple and clients retry); a verdict
    # with something new to record is the input's alone with "ledger": "unavailable", and /verifyReceipt of such a
    # receipt is Apple's retryable 21005 (what the server already recorded needs no write, and is answered). Once the
    # lock is gone the server takes writes again by itself.
    unrecorded = forge_jws("transaction", "--bundle-id", "com.example.app", "--transaction-id", "870011",
                           "--original-transaction-id", "870010", "--product-id", "pro.monthly",
                           "--purchased", "2026-01-01T00:00:00Z", "--expires", "2099-02-01T00:00:00Z",
                           "--signed", "2026-01-01T00:00:05Z", "--environment", "Production")
    unrecorded_receipt = forge("product=pro.monthly,transaction=870021,original=870020,purchased=2026-01-01T00:00:00Z,"
                               "expires=2099-02-01T00:00:00Z", created="2026-01-01T00:00:10Z")
    later = forge_jws("notification", "--type", "DID_CHANGE_RENEWAL_STATUS", "--subtype", "AUTO_RENEW_DISABLED",
                      "--bundle-id", "com.example.app", "--uuid", "4b0e6f1c-8a2d-4c3e-9f5a-6b7c8d9e0f11",
                      "--transaction-id", "870002", "--original-transaction-id", "870000", "--product-id",
                      "pro.monthly", "--purchased", "2026-02-01T00:00:00Z", "--expires", "2099-03-01T00:00:00Z",
                      "--auto-renew", "false", "--signed", "2026-02-10T00:00:00Z", "--environment", "Production")
    later_delivery = json.dumps({"signedPayload": later.decode()}).encode()
    lock = sqlite3.connect(os.environ["LEDGER"], timeout=15, isolation_level=None)
    try:
        lock.execute("BEGIN EXCLUSIVE")
        request(store_url, "POST", n, later_delivery, as_json, label="notification, ledger locked", expect=503,
                code="store_unavailable")
        # The failed write turns readiness away, with the reason, until a write succeeds.
        _, _, payload = request(store_url, "GET", "/readyz", label="readyz, ledger locked", expect=503)
        expect_member(payload, ("reason",), "locked", "readyz, ledger locked")
        request(store_url, "POST", "/v1/transactions/870002/claim", account("user-3"), as_json,
                label="claim, ledger locked", expect=503, as_operation=claim_op, code="store_unavailable")
        _, _, payload = request(store_url, "POST", v, unrecorded, text, label="validate, ledger locked", expect=200)
        expect_member(payload, ("ledger",), "unavailable", "validate, ledger locked")
        expect_member(payload, ("subscriptions", 0, "source"), "jws", "validate, ledger locked")
        _, _, payload = request(store_url, "POST", "/verifyReceipt", apple(unrecorded_receipt),
                                label="/verifyReceipt, ledger locked", expect=200)
        expect_member(payload, ("status",), 21005, "/verifyReceipt, ledger locked")
        expect_member(payload, ("is-retryable",), True, "/verifyReceipt, ledger locked")
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    _, _, payload = request(store_url, "POST", n, later_delivery, as_json, label="notification, ledger back",
                            expect=200)
    expect_member(payload, ("duplicate",), False, "notification, ledger back")
    # Readiness comes back with the server's own heartbeat write, which a client's successful write hastens.
    ready_at = urllib.parse.urlsplit(store_url)
    for _ in range(50):
        probe = http.client.HTTPConnection(ready_at.hostname, ready_at.port, timeout=5)
        probe.request("GET", "/readyz")
        status = probe.getresponse().status
        probe.close()
        if status == 200:
            break
        time.sleep(0.1)
    request(store_url, "GET", "/readyz", label="readyz, ledger back", expect=200)


def check_accounts(store_url, stateless_url):
    """The account routes (docs/accounts.md): every documented status, each answer against its schema."""
    as_json = {"Content-Type": "application/json"}
    ACCOUNT_GET = ("/v1/accounts/{account}", "GET")
    TOKEN_PUT = ("/v1/accounts/{account}/app_account_tokens/{app_account_token}", "PUT")
    token = "5d1c7e2a-9b3f-4a6d-8e0c-1f2a3b4c5d6e"
    account = "/v1/accounts/openapi%20user"
    tokens = f"{account}/app_account_tokens/{token.upper()}"
    request(store_url, "GET", account, label="account unknown", expect=404, code="account_not_found",
            as_operation=ACCOUNT_GET)
    request(store_url, "DELETE", account, label="delete an unknown account", expect=404, code="account_not_found",
            as_operation=("/v1/accounts/{account}", "DELETE"))
    request(store_url, "PUT", tokens, label="register a token", expect=200, as_operation=TOKEN_PUT)
    request(store_url, "PUT", "/v1/accounts/someone%20else/app_account_tokens/" + token,
            label="register another's token", expect=409, code="token_owned_by_another_account", as_operation=TOKEN_PUT)
    request(store_url, "PUT", f"{account}/app_account_tokens/not-a-uuid", label="register a non-UUID token",
            expect=400, code="bad_request", as_operation=TOKEN_PUT)
    request(store_url, "GET", "/v1/accounts/a%00b", label="account with a NUL", expect=400, code="bad_request",
            as_operation=("/v1/accounts/{account}", "GET"))
    pro = forge_jws("transaction", "--bundle-id", "com.example.app", "--transaction-id", "880001",
                    "--purchased", "2026-01-01T00:00:00Z", "--expires", "2099-01-01T00:00:00Z",
                    "--members", json.dumps({"appAccountToken": token}))
    request(store_url, "POST", "/v1/validate", pro, {"Content-Type": "text/plain"}, label="validate a token's JWS",
            expect=200)
    purchases = f"{account}/purchases"
    once = forge_jws("transaction", "--bundle-id", "com.example.app", "--transaction-id", "880002",
                     "--product-id", "coins.100", "--product-type", "Consumable", "--purchased", "2026-02-01T00:00:00Z")
    _, _, payload = request(store_url, "POST", purchases, json.dumps({"jws": once.decode()}).encode(), as_json,
                            label="post a purchase", expect=200, as_operation=("/v1/accounts/{account}/purchases", "POST"))
    expect_member(payload, ("validation", "valid"), True, "post a purchase")
    request(store_url, "POST", purchases, b'{"jws": "not a jws"}', as_json, label="post a body that is no JWS",
            expect=400, code="bad_request", as_operation=("/v1/accounts/{account}/purchases", "POST"))
    rogue = forge_jws("transaction", "--bundle-id", "com.example.app", "--transaction-id", "880009",
                      ca=os.environ["UNTRUSTED_CA"])
    request(store_url, "POST", purchases, rogue, {"Content-Type": "text/plain"}, label="post a rogue JWS",
            expect=422, as_operation=("/v1/accounts/{account}/purchases", "POST"))
    request(store_url, "POST", purchases, b"x", {"Content-Type": "image/png"}, label="post an image", expect=415,
            as_operation=("/v1/accounts/{account}/purchases", "POST"))
    for at in ("", "?at=2026-01-15T00:00:00Z"):
        _, _, payload = request(store_url, "GET", account + at, label=f"account{at}", expect=200,
                                as_operation=("/v1/accounts/{account}", "GET"))
        expect_keys(payload, (), ["account", "entitlements", "subscriptions", "purchases", "app_account_tokens",
                                  "first_seen", "updated_at", "at"], f"account{at}")
    request(store_url, "GET", account + "?at=soon", label="account ?at= not a date", expect=400, code="bad_request",
            as_operation=("/v1/accounts/{account}", "GET"))
    request(store_url, "GET", "/v1/subscriptions/880001?at=2026-06-01T00:00:00Z", label="subscription ?at=",
            expect=200, as_operation=("/v1/subscriptions/{original_transaction_id}", "GET"))
    request(store_url, "PATCH", account, label="PATCH an account", expect=405,
            as_operation=("/v1/accounts/{account}", "PATCH"))
    request(store_url, "DELETE", account, label="delete the account", expect=200,
            as_operation=("/v1/accounts/{account}", "DELETE"))
    request(stateless_url, "GET", account, label="account without a store", expect=503, code="store_not_configured",
            as_operation=("/v1/accounts/{account}", "GET"))


def check_crowded(base):
    """With max_connections 2 and two idle connections open, a third gets 503 and is closed."""
    url = urllib.parse.urlsplit(base)
    idle = [socket.create_connection((url.hostname, url.port), timeout=5) for _ in range(2)]
    try:
        for _ in range(50):
            status, headers, payload = raw_exchange(
                base, b"POST /v1/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
            if status == 503:
                break
            time.sleep(0.1)  # the idle connections may not be registered yet
        check("validate over max_connections", "POST", "/v1/validate", status, headers, payload, expect=503)
        expect_member(payload, ("error", "code"), "service_unavailable", "validate over max_connections")
    finally:
        for sock in idle:
            sock.close()
    # Once they are closed the server takes connections again (it notices the closes asynchronously: wait, bounded).
    for _ in range(50):
        status, _, _ = raw_exchange(base, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        if status == 200:
            break
        time.sleep(0.1)
    expect_member(json.dumps({"status": status}).encode(), ("status",), 200,
                  "takes connections again once the idle ones are closed")


if __name__ == "__main__":
    sys.exit(main())
