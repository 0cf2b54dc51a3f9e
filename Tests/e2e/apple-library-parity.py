#!/usr/bin/env python3
"""Compares what receiptd sends Apple with what Apple's own Python library (app-store-server-library) sends for the
same call, and receiptd's offer signatures with the library's creators. Run by test-apple-library-parity.sh in the
venv that has the pinned library.

    apple-library-parity.py calls DIR      DIR/receiptd.jsonl: what the capturing fake got from receiptd; the fake
                                           (DIR/port, DIR/ca.pem, DIR/key.p8) is still up and logs the library's
                                           requests to DIR/requests.jsonl.
    apple-library-parity.py offers DIR ANSWERS.json
                                           ANSWERS.json: {"NAME": {"kind", "input", "answer"}} receiptd's offer answers.

Prints one line per call or signature ("same" or "DIFF" and every difference) and exits 1 on any difference. What
differs by design is named, never compared: User-Agent, and transport headers (Accept-Encoding, Connection) that
the library's HTTP client (requests) adds on its own.
"""
import base64
import json
import os
import re
import sys
import time
import uuid

from appstoreserverlibrary.api_client import AppStoreServerAPIClient, GetTransactionHistoryVersion
from appstoreserverlibrary.jws_signature_creator import (IntroductoryOfferEligibilitySignatureCreator,
                                                         PromotionalOfferV2SignatureCreator)
from appstoreserverlibrary.models.ConsumptionRequest import ConsumptionRequest
from appstoreserverlibrary.models.DeliveryStatus import DeliveryStatus
from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.models.ExtendReasonCode import ExtendReasonCode
from appstoreserverlibrary.models.ExtendRenewalDateRequest import ExtendRenewalDateRequest
from appstoreserverlibrary.models.MassExtendRenewalDateRequest import MassExtendRenewalDateRequest
from appstoreserverlibrary.models.NotificationHistoryRequest import NotificationHistoryRequest
from appstoreserverlibrary.models.RefundPreference import RefundPreference
from appstoreserverlibrary.models.TransactionHistoryRequest import TransactionHistoryRequest
from appstoreserverlibrary.models.UpdateAppAccountTokenRequest import UpdateAppAccountTokenRequest
from appstoreserverlibrary.promotional_offer import PromotionalOfferSignatureCreator
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

KEY_ID = "ABC123DEFG"
ISSUER_ID = "57246542-96fe-1a63-e053-0824d011072a"
BUNDLE_ID = "com.example.app"
LOWER_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# Headers whose difference is by design (User-Agent names the client) or belongs to the HTTP client, not the library.
NOT_COMPARED = {"user-agent", "host", "content-length", "accept-encoding", "connection", "authorization"}

# What the e2e script asked receiptd for, so the library is given the same inputs as its users would give it.
CONSUMPTION = ConsumptionRequest(customerConsented=True, deliveryStatus=DeliveryStatus.DELIVERED,
                                 consumptionPercentage=25000, refundPreference=RefundPreference.GRANT_PRORATED,
                                 sampleContentProvided=False)
EXTENSION_DAYS, EXTENSION_REASON = 3, ExtendReasonCode.CUSTOMER_SATISFACTION
MASS_DAYS, MASS_REASON, MASS_PRODUCT, MASS_STOREFRONTS = 5, ExtendReasonCode.SERVICE_ISSUE_OR_OUTAGE, "pro.monthly", \
    ["USA", "CAN"]


def b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jws_parts(token):
    header, payload, signature = token.split(".")
    return json.loads(b64url(header)), json.loads(b64url(payload)), (header + "." + payload).encode(), b64url(signature)


def verify_es256(public_key, signing_input, raw_signature):
    if len(raw_signature) != 64:
        return False
    der = encode_dss_signature(int.from_bytes(raw_signature[:32], "big"), int.from_bytes(raw_signature[32:], "big"))
    try:
        public_key.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))
        return True
    except InvalidSignature:
        return False


def same_json(a, b, where="body"):
    """Every difference between two JSON values, types included (Python's True == 1 is not JSON's)."""
    if type(a) is not type(b):
        return ["%s: %s %r vs %s %r" % (where, type(a).__name__, a, type(b).__name__, b)]
    if isinstance(a, dict):
        problems = []
        for name in sorted(set(a) | set(b)):
            if name not in a:
                problems.append("%s.%s: only the library sends it (%r)" % (where, name, b[name]))
            elif name not in b:
                problems.append("%s.%s: only receiptd sends it (%r)" % (where, name, a[name]))
            else:
                problems += same_json(a[name], b[name], where + "." + name)
        return problems
    if isinstance(a, list):
        if len(a) != len(b):
            return ["%s: %d items vs %d" % (where, len(a), len(b))]
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in same_json(x, y, "%s[%d]" % (where, i))]
    return [] if a == b else ["%s: %r vs %r" % (where, a, b)]


def parsed_body(request):
    raw = base64.b64decode(request.get("rawBody") or "")
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return "<not JSON: %r>" % raw[:80]


def headers_of(request):
    return {name.lower(): value for name, value in request["headers"]}


# Each call receiptd makes: its name, its request line (method and a path pattern) and how a user of Apple's library
# makes the same call, given receiptd's request for what only receiptd chose (ids, revisions, request identifiers,
# the window of a notification history, the account's token).
def calls():
    def body(request):
        return json.loads(base64.b64decode(request["rawBody"]))

    def query(request, name):
        values = request["query"].get(name)
        return values[0] if values else None

    return [
        ("Send Consumption Information", "PUT", r"/inApps/v2/transactions/consumption/([^/]+)",
         lambda c, m, r: c.send_consumption_information(m[0], CONSUMPTION)),
        ("Get Refund History", "GET", r"/inApps/v2/refund/lookup/([^/]+)",
         lambda c, m, r: c.get_refund_history(m[0], query(r, "revision"))),
        ("Extend a Subscription Renewal Date", "PUT", r"/inApps/v1/subscriptions/extend/(3001)",
         lambda c, m, r: c.extend_subscription_renewal_date(m[0], ExtendRenewalDateRequest(
             extendByDays=EXTENSION_DAYS, extendReasonCode=EXTENSION_REASON,
             requestIdentifier=body(r)["requestIdentifier"]))),
        ("Extend Subscription Renewal Dates for All Active Subscribers", "POST", r"/inApps/v1/subscriptions/extend/mass",
         lambda c, m, r: c.extend_renewal_date_for_all_active_subscribers(MassExtendRenewalDateRequest(
             extendByDays=MASS_DAYS, extendReasonCode=MASS_REASON, requestIdentifier=body(r)["requestIdentifier"],
             storefrontCountryCodes=MASS_STOREFRONTS, productId=MASS_PRODUCT))),
        ("Get Status of Subscription Renewal Date Extensions", "GET", r"/inApps/v1/subscriptions/extend/mass/([^/]+)/([^/]+)",
         lambda c, m, r: c.get_status_of_subscription_renewal_date_extensions(m[1], m[0])),
        ("Set App Account Token", "PUT", r"/inApps/v1/transactions/([^/]+)/appAccountToken",
         # The account's token as a Python backend holds it: a uuid.UUID, written with str().
         lambda c, m, r: c.set_app_account_token(m[0], UpdateAppAccountTokenRequest(
             appAccountToken=str(uuid.UUID(body(r)["appAccountToken"]))))),
        ("Finish Transaction", "POST", r"/inApps/v1/transactions/([^/]+)/finish",
         lambda c, m, r: c.finish_transaction(m[0])),
        ("Get App Transaction Info", "GET", r"/inApps/v1/transactions/appTransactions/([^/]+)",
         lambda c, m, r: c.get_app_transaction_info(m[0])),
        ("Get Transaction Info", "GET", r"/inApps/v1/transactions/([0-9]+)",
         lambda c, m, r: c.get_transaction_info(m[0])),
        ("Get All Subscription Statuses", "GET", r"/inApps/v1/subscriptions/([0-9]+)",
         lambda c, m, r: c.get_all_subscription_statuses(m[0])),
        ("Get Notification History", "POST", r"/inApps/v1/notifications/history",
         lambda c, m, r: c.get_notification_history(query(r, "paginationToken"), NotificationHistoryRequest(
             startDate=body(r)["startDate"], endDate=body(r)["endDate"]))),
        ("Look Up Order ID", "GET", r"/inApps/v1/lookup/([^/]+)", lambda c, m, r: c.look_up_order_id(m[0])),
        ("Get Transaction History", "GET", r"/inApps/v2/history/([^/]+)",
         lambda c, m, r: c.get_transaction_history(m[0], query(r, "revision"), TransactionHistoryRequest(),
                                                   GetTransactionHistoryVersion.V2)),
        ("Request a Test Notification", "POST", r"/inApps/v1/notifications/test",
         lambda c, m, r: c.request_test_notification()),
        ("Get Test Notification Status", "GET", r"/inApps/v1/notifications/test/([^/]+)",
         lambda c, m, r: c.get_test_notification_status(m[0])),
    ]


def read_log(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def compare_request(ours, theirs):
    problems = []
    for field in ("method", "path", "rawQuery"):
        if ours[field] != theirs[field]:
            problems.append("%s: %r vs %r" % (field, ours[field], theirs[field]))
    our_headers, their_headers = headers_of(ours), headers_of(theirs)
    for name in sorted((set(our_headers) | set(their_headers)) - NOT_COMPARED):
        if our_headers.get(name) != their_headers.get(name):
            problems.append("header %s: %r vs %r" % (name, our_headers.get(name), their_headers.get(name)))
    problems += same_json(parsed_body(ours), parsed_body(theirs))
    for request, who in ((ours, "receiptd"), (theirs, "the library")):
        if request["refusal"]:
            problems.append("the fake refused %s's token: %s" % (who, request["refusal"]))
    if ours["refusal"] or theirs["refusal"]:
        return problems
    problems += same_json(ours["tokenHeader"], theirs["tokenHeader"], "token header")
    our_claims, their_claims = dict(ours["claims"]), dict(theirs["claims"])
    # Apple documents iat as required and its Swift library sends it; its Python library leaves it out. Only its
    # value's form is checked: seconds, not after the request came.
    iat = our_claims.pop("iat", None)
    their_claims.pop("iat", None)
    if not isinstance(iat, int) or iat > ours["receivedAt"] + 1:
        problems.append("token iat: %r" % iat)
    our_lifetime = our_claims.pop("exp") - iat
    their_lifetime = their_claims.pop("exp") - theirs["receivedAt"]
    # The library signs a token per request, exp 300 s ahead; receiptd signs exp 300 s after iat and reuses it.
    if abs(our_lifetime - their_lifetime) > 5:
        problems.append("token lifetime: exp - iat = %d s vs %.0f s" % (our_lifetime, their_lifetime))
    problems += same_json(our_claims, their_claims, "token claims")
    return problems


def check_calls(directory):
    ours = read_log(os.path.join(directory, "receiptd.jsonl"))
    port = open(os.path.join(directory, "port")).read().strip()
    client = AppStoreServerAPIClient(open(os.path.join(directory, "key.p8"), "rb").read(), KEY_ID, ISSUER_ID,
                                     BUNDLE_ID, Environment.PRODUCTION)
    # The library has no setting for its host: a test points it at the fake (its CA trusted by REQUESTS_CA_BUNDLE).
    client._base_url = "https://localhost:" + port
    differences = 0
    for name, method, pattern, call in calls():
        made = [r for r in ours if r["method"] == method and re.fullmatch(pattern, r["path"])]
        if not made:
            print("DIFF  %s: receiptd never made this call" % name)
            differences += 1
            continue
        request = made[0]
        before = len(read_log(os.path.join(directory, "requests.jsonl")))
        try:
            call(client, re.fullmatch(pattern, request["path"]).groups(), request)
        except Exception as error:  # Apple's answer (an APIException for 4xx) does not matter here, the request does.
            if type(error).__name__ != "APIException":
                print("DIFF  %s: the library failed before sending: %r" % (name, error))
                differences += 1
                continue
        theirs = read_log(os.path.join(directory, "requests.jsonl"))[before:]
        if len(theirs) != 1:
            print("DIFF  %s: the library sent %d requests" % (name, len(theirs)))
            differences += 1
            continue
        problems = compare_request(request, theirs[0])
        if problems:
            differences += 1
            print("DIFF  %s (%s %s)" % (name, method, request["path"]))
            for problem in problems:
                print("        receiptd vs library: " + problem)
        else:
            print("same  %s (%s %s%s)" % (name, method, request["path"],
                                          "?" + request["rawQuery"] if request["rawQuery"] else ""))
    return differences


def check_offers(directory, answers_path):
    private_pem = open(os.path.join(directory, "key.p8"), "rb").read()
    public_key = serialization.load_pem_private_key(private_pem, password=None).public_key()
    answers = json.load(open(answers_path))
    differences = 0
    for name, entry in answers.items():
        kind, given, answer = entry["kind"], entry["input"], entry["answer"]
        problems = []
        if kind == "promotional-v1":
            problems += check_v1(private_pem, public_key, given, answer)
        else:
            if kind == "promotional-v2":
                creator = PromotionalOfferV2SignatureCreator(private_pem, KEY_ID, ISSUER_ID, BUNDLE_ID)
                theirs = creator.create_signature(given["product_id"], given["offer_identifier"],
                                                  given.get("transaction_id"))
            else:
                creator = IntroductoryOfferEligibilitySignatureCreator(private_pem, KEY_ID, ISSUER_ID, BUNDLE_ID)
                theirs = creator.create_signature(given["product_id"], given["allow_introductory_offer"],
                                                  given["transaction_id"])
            our_header, our_claims, signing_input, signature = jws_parts(answer["signature"])
            their_header, their_claims, _, _ = jws_parts(theirs)
            if not verify_es256(public_key, signing_input, signature):
                problems.append("the signature does not verify with the key's public half")
            problems += same_json(our_header, their_header, "header")
            for claims in (our_claims, their_claims):
                claims["nonce form"] = bool(LOWER_UUID.match(str(claims.pop("nonce", None))))
                iat = claims.pop("iat", None)
                claims["iat form"] = isinstance(iat, int) and abs(iat - time.time()) < 300
            problems += same_json(our_claims, their_claims, "claims")
            if answer.get("nonce") is not None and not LOWER_UUID.match(answer["nonce"]):
                problems.append("the answer's nonce %r is not a lowercase UUID" % answer["nonce"])
        if problems:
            differences += 1
            print("DIFF  %s" % name)
            for problem in problems:
                print("        receiptd vs library: " + problem)
        else:
            print("same  %s" % name)
    return differences


def check_v1(private_pem, public_key, given, answer):
    """The library's creator is handed receiptd's nonce and timestamp; its payload (captured, since ECDSA signatures
    differ on every signing) must be the one receiptd's signature verifies over."""
    problems = []
    if answer.get("key_identifier") != KEY_ID:
        problems.append("key_identifier %r" % answer.get("key_identifier"))
    if not LOWER_UUID.match(str(answer.get("nonce"))):
        problems.append("nonce %r is not a lowercase UUID (the library lowercases it)" % answer.get("nonce"))
    timestamp = answer.get("timestamp")
    if not isinstance(timestamp, int) or abs(timestamp / 1000 - time.time()) > 300:
        problems.append("timestamp %r is not now in milliseconds" % timestamp)
    if problems:
        return problems
    creator = PromotionalOfferSignatureCreator(private_pem, KEY_ID, BUNDLE_ID)
    signed = []
    real_key = creator._signing_key

    class Recording:
        def sign(self, data, algorithm):
            signed.append(data)
            return real_key.sign(data, algorithm)

    creator._signing_key = Recording()
    creator.create_signature(given["product_id"], given["offer_identifier"], given.get("app_account_token") or "",
                             uuid.UUID(answer["nonce"]), timestamp)
    try:
        public_key.verify(base64.b64decode(answer["signature"]), signed[0], ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        problems.append("the signature does not verify over the library's payload %r" % signed[0])
    return problems


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "calls":
        differences = check_calls(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "offers":
        differences = check_offers(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
    sys.exit(1 if differences else 0)


if __name__ == "__main__":
    main()
