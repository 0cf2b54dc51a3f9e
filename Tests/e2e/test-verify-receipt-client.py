"""Drives receiptd's /verifyReceipt drop-in with three real third-party clients of Apple's endpoint from PyPI:
itunes-iap (itunesiap), inapppy, and iap (educreations' python-iap, whose Django forms are a schema of Apple's
answer). Run by test-verify-receipt-client.sh, which starts the servers, forges the receipts and passes everything
in the environment:

    RECEIPTS             folder of base64 receipts: production, sandbox, second-app (not configured)
    BOTH_URL             a receiptd accepting Production and Sandbox (the lib's test world, secret "s3cret")
    PRODUCTION_ONLY_URL  the same app and CA, environments ["Production"]
    BOTH_LOG, PRODUCTION_ONLY_LOG   the servers' logs, to see which endpoints a client called
    APPLE_URL            a receiptd trusting Apple's root only, any app, environments ["Production"]
    APPLE_FIXTURES       ../shared/fixtures/apple (real App Store receipts); the tests that need it are skipped
                         when it is absent

Each test checks what the client's own objects and exceptions make of our answers, not our raw JSON.
"""

import base64
import datetime
import json
import os
import time
import unittest
import urllib.request
import warnings

import django
from django.conf import settings

# python-iap reads Django settings when imported; only its verifyReceipt client and its forms are used here.
settings.configure(IAP_SETTINGS={"TRUSTED_ROOT_FILE": "", "PRODUCTION_BUNDLE_ID": "com.example.app"}, USE_TZ=True)
django.setup()

import iap.exceptions  # noqa: E402
import iap.forms  # noqa: E402
import iap.utils  # noqa: E402
import itunesiap  # noqa: E402
import itunesiap.exceptions  # noqa: E402
import itunesiap.request  # noqa: E402
from inapppy import AppStoreValidator, InAppPyValidationError  # noqa: E402

RECEIPTS = os.environ["RECEIPTS"]
BOTH_URL = os.environ["BOTH_URL"]
PRODUCTION_ONLY_URL = os.environ["PRODUCTION_ONLY_URL"]
SECRET = "s3cret"
UTC = datetime.timezone.utc


def receipt(name):
    with open(os.path.join(RECEIPTS, name + ".b64")) as file:
        return file.read().strip()


def tampered(name):
    """The receipt with one byte of its signed payload changed (the bundle id): the signature no longer verifies."""
    der = base64.b64decode(receipt(name))
    assert der.count(b"com.example.app") == 1
    return base64.b64encode(der.replace(b"com.example.app", b"com.example.hax")).decode()


def log_lines(variable):
    with open(os.environ[variable]) as file:
        return file.read().splitlines()


def log_mark(variable):
    """The log's length once it has settled (a previous request's line may still be on its way; at most 1 s)."""
    length = len(log_lines(variable))
    for _ in range(10):
        time.sleep(0.1)
        now = len(log_lines(variable))
        if now == length:
            break
        length = now
    return length


def requests_logged(variable, since, expected):
    """`METHOD PATH STATUS` of the requests a server logged after line `since` (health checks left out). The log line
    may be written just after the answer is sent: waits (at most 3 s) until there are as many as `expected`."""
    deadline = time.monotonic() + 3
    while True:
        found = []
        for line in log_lines(variable)[since:]:
            words = line.split()
            if len(words) >= 4 and words[1] in ("GET", "POST") and words[2] != "/healthz":
                found.append(" ".join(words[1:4]))
        if len(found) >= len(expected) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def point_itunesiap_at(production_base, sandbox_base):
    """itunes-iap reads its URLs from class attributes; this is how a user would redirect it to receiptd."""
    itunesiap.request.Request.PRODUCTION_VALIDATION_URL = production_base + "/verifyReceipt"
    itunesiap.request.Request.SANDBOX_VALIDATION_URL = sandbox_base + "/sandbox/verifyReceipt"


class ReceiptdValidator(AppStoreValidator):
    """inapppy's validator pointed at receiptd: the documented extension point is `_change_url_by_sandbox`."""

    def __init__(self, production_base, sandbox_base, **options):
        self.production_url = production_base + "/verifyReceipt"
        self.sandbox_url = sandbox_base + "/sandbox/verifyReceipt"
        super().__init__(http_timeout=10, **options)

    def _change_url_by_sandbox(self):
        self.url = self.sandbox_url if self.sandbox else self.production_url


class LedgerThroughAClientTests(unittest.TestCase):
    """The drop-in promise with a ledger: a backend re-checking a stored receipt sees what Apple said since, through an
    unchanged itunes-iap: the receipt's subscription expired, Apple delivers DID_RENEW to /v1/notifications, and the
    same receipt now answers with the renewal first in latest_receipt_info and its pending_renewal_info."""

    def setUp(self):
        warnings.simplefilter("ignore")
        self.saved = (itunesiap.request.Request.PRODUCTION_VALIDATION_URL,
                      itunesiap.request.Request.SANDBOX_VALIDATION_URL)
        point_itunesiap_at(os.environ["LEDGER_URL"], os.environ["LEDGER_URL"])

    def tearDown(self):
        (itunesiap.request.Request.PRODUCTION_VALIDATION_URL,
         itunesiap.request.Request.SANDBOX_VALIDATION_URL) = self.saved

    def test_renewal_delivered_by_apple_shows_in_the_same_receipts_answer(self):
        before = itunesiap.verify(receipt("expired-subscription"), SECRET, env=itunesiap.env.production)
        self.assertEqual(before.status, 0)
        self.assertEqual([entry.transaction_id for entry in before.latest_receipt_info], ["5101"])
        self.assertEqual(before["pending_renewal_info"], [])

        with open(os.environ["DID_RENEW"]) as file:
            body = json.dumps({"signedPayload": file.read().strip()}).encode()
        delivery = urllib.request.Request(
            os.environ["LEDGER_URL"] + "/v1/notifications", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(delivery, timeout=10) as answer:
            self.assertEqual(answer.status, 200)
            self.assertEqual(json.load(answer)["notification_type"], "DID_RENEW")

        after = itunesiap.verify(receipt("expired-subscription"), SECRET, env=itunesiap.env.production)
        self.assertEqual(after.status, 0)
        latest = after.latest_receipt_info
        self.assertEqual([entry.transaction_id for entry in latest], ["5102", "5101"])
        self.assertEqual(latest[0].original_transaction_id, "5100")
        self.assertEqual(latest[0].expires_date, datetime.datetime(2099, 3, 1, tzinfo=UTC))
        pending = after["pending_renewal_info"]
        self.assertEqual(len(pending), 1)
        self.assertEqual(pending[0]["original_transaction_id"], "5100")
        self.assertEqual(pending[0]["auto_renew_status"], "1")
        self.assertEqual(pending[0]["product_id"], "pro.monthly")


class ItunesIAPTests(unittest.TestCase):
    """itunes-iap 2.6.1: posts the JSON without a Content-Type; raises InvalidReceipt for a non-zero status."""

    def setUp(self):
        warnings.simplefilter("ignore")  # it warns about every field it has no list entry for
        self.saved = (itunesiap.request.Request.PRODUCTION_VALIDATION_URL,
                      itunesiap.request.Request.SANDBOX_VALIDATION_URL)
        point_itunesiap_at(BOTH_URL, BOTH_URL)

    def tearDown(self):
        (itunesiap.request.Request.PRODUCTION_VALIDATION_URL,
         itunesiap.request.Request.SANDBOX_VALIDATION_URL) = self.saved

    def test_valid_production_receipt_reads_through_the_clients_objects(self):
        response = itunesiap.verify(receipt("production"), SECRET, env=itunesiap.env.production)
        self.assertEqual(response.status, 0)
        self.assertEqual(response["environment"], "Production")
        self.assertEqual(response.receipt.bundle_id, "com.example.app")
        self.assertEqual(response.receipt.application_version, "1.0")
        purchases = {purchase.transaction_id: purchase for purchase in response.receipt.in_app}
        self.assertEqual(set(purchases), {"1000", "1001", "5000"})
        coins = purchases["5000"]
        self.assertEqual(coins.product_id, "coins.100")
        self.assertEqual(coins.quantity, 3)
        self.assertEqual(coins.purchase_date, datetime.datetime(2026, 1, 5, 12, 30, tzinfo=UTC))
        renewal = purchases["1001"]
        self.assertEqual(renewal.product_id, "pro.monthly")
        self.assertEqual(renewal.original_transaction_id, "1000")
        self.assertEqual(renewal.expires_date, datetime.datetime(2026, 3, 1, tzinfo=UTC))
        self.assertEqual(renewal.is_trial_period, False)
        # latest_receipt_info: the subscription's transactions, newest expiry first.
        self.assertEqual([p.transaction_id for p in response.latest_receipt_info], ["1001", "1000"])
        self.assertEqual(response.latest_receipt, receipt("production"))

    def test_sandbox_receipt_retries_to_the_sandbox_url_on_21007(self):
        # Production refuses sandbox receipts (21007); the sandbox URL is a deployment that accepts them.
        point_itunesiap_at(PRODUCTION_ONLY_URL, BOTH_URL)
        production_mark, sandbox_mark = log_mark("PRODUCTION_ONLY_LOG"), log_mark("BOTH_LOG")
        response = itunesiap.verify(receipt("sandbox"), SECRET, env=itunesiap.env.review)
        self.assertEqual(response.status, 0)
        self.assertEqual(response["environment"], "Sandbox")
        self.assertEqual([p.product_id for p in response.receipt.in_app], ["pro.monthly"])
        expected = ["POST /verifyReceipt 200"]
        self.assertEqual(requests_logged("PRODUCTION_ONLY_LOG", production_mark, expected), expected)
        expected = ["POST /sandbox/verifyReceipt 200"]
        self.assertEqual(requests_logged("BOTH_LOG", sandbox_mark, expected), expected)

    def test_sandbox_retry_on_one_production_only_server_is_refused_there_too(self):
        # One server whose environments leave out Sandbox accepts no Sandbox receipt anywhere: /verifyReceipt
        # answers 21007, the client retries at /sandbox/verifyReceipt, and that answers 21003.
        point_itunesiap_at(PRODUCTION_ONLY_URL, PRODUCTION_ONLY_URL)
        mark = log_mark("PRODUCTION_ONLY_LOG")
        with self.assertRaises(itunesiap.exceptions.InvalidReceipt) as refused:
            itunesiap.verify(receipt("sandbox"), SECRET, env=itunesiap.env.review)
        self.assertEqual(refused.exception.status, 21003)
        expected = ["POST /verifyReceipt 200", "POST /sandbox/verifyReceipt 200"]
        self.assertEqual(requests_logged("PRODUCTION_ONLY_LOG", mark, expected), expected)

    def test_sandbox_receipt_on_a_server_accepting_sandbox_is_valid_without_a_retry(self):
        mark = log_mark("BOTH_LOG")
        response = itunesiap.verify(receipt("sandbox"), SECRET, env=itunesiap.env.review)
        self.assertEqual(response.status, 0)
        self.assertEqual(response["environment"], "Sandbox")
        expected = ["POST /verifyReceipt 200"]
        self.assertEqual(requests_logged("BOTH_LOG", mark, expected), expected)

    def test_production_receipt_on_the_sandbox_url_is_21008(self):
        with self.assertRaises(itunesiap.exceptions.InvalidReceipt) as caught:
            itunesiap.verify(receipt("production"), SECRET, env=itunesiap.env.sandbox)
        self.assertEqual(caught.exception.status, 21008)
        self.assertIn("production receipt", caught.exception.description)

    def test_wrong_password_is_21004(self):
        with self.assertRaises(itunesiap.exceptions.InvalidReceipt) as caught:
            itunesiap.verify(receipt("production"), "not-the-secret", env=itunesiap.env.production)
        self.assertEqual(caught.exception.status, 21004)
        self.assertIn("shared secret", caught.exception.description)
        with self.assertRaises(itunesiap.exceptions.InvalidReceipt) as caught:
            itunesiap.verify(receipt("production"), env=itunesiap.env.production)  # no password at all
        self.assertEqual(caught.exception.status, 21004)

    def test_tampered_receipt_is_21003(self):
        with self.assertRaises(itunesiap.exceptions.InvalidReceipt) as caught:
            itunesiap.verify(tampered("production"), SECRET, env=itunesiap.env.production)
        self.assertEqual(caught.exception.status, 21003)
        self.assertEqual(caught.exception.description, "The receipt could not be authenticated.")

    def test_unreadable_receipt_is_21002(self):
        half = base64.b64encode(base64.b64decode(receipt("production"))[:1000]).decode()
        for data in (half, "bm90IGEgcmVjZWlwdA==", "%%% not base64 %%%"):
            with self.assertRaises(itunesiap.exceptions.InvalidReceipt) as caught:
                itunesiap.verify(data, SECRET, env=itunesiap.env.production)
            self.assertEqual(caught.exception.status, 21002, data[:20])

    def test_receipt_of_an_app_not_served_is_21010(self):
        with self.assertRaises(itunesiap.exceptions.InvalidReceipt) as caught:
            itunesiap.verify(receipt("second-app"), SECRET, env=itunesiap.env.production)
        self.assertEqual(caught.exception.status, 21010)


class InAppPyTests(unittest.TestCase):
    """inapppy 2.5.2: posts with requests' json=; maps each status to an InAppPyValidationError."""

    def test_valid_production_receipt(self):
        answer = ReceiptdValidator(BOTH_URL, BOTH_URL).validate(receipt("production"), SECRET)
        self.assertEqual(answer["status"], 0)
        self.assertEqual(answer["receipt"]["bundle_id"], "com.example.app")
        self.assertEqual(sorted((p["product_id"], p["transaction_id"]) for p in answer["receipt"]["in_app"]),
                         [("coins.100", "5000"), ("pro.monthly", "1000"), ("pro.monthly", "1001")])

    def test_exclude_old_transactions_keeps_the_latest_renewal(self):
        answer = ReceiptdValidator(BOTH_URL, BOTH_URL).validate(receipt("production"), SECRET,
                                                                exclude_old_transactions=True)
        self.assertEqual([p["transaction_id"] for p in answer["latest_receipt_info"]], ["1001"])

    def test_sandbox_receipt_auto_retries_on_21007(self):
        validator = ReceiptdValidator(PRODUCTION_ONLY_URL, BOTH_URL, auto_retry_wrong_env_request=True)
        answer = validator.validate(receipt("sandbox"), SECRET)
        self.assertEqual(answer["status"], 0)
        self.assertEqual(answer["environment"], "Sandbox")
        self.assertTrue(validator.sandbox, "the client should have switched itself to the sandbox")

    def test_production_receipt_auto_retries_on_21008(self):
        validator = ReceiptdValidator(BOTH_URL, BOTH_URL, sandbox=True, auto_retry_wrong_env_request=True)
        answer = validator.validate(receipt("production"), SECRET)
        self.assertEqual(answer["status"], 0)
        self.assertEqual(answer["environment"], "Production")
        self.assertFalse(validator.sandbox)

    def test_without_auto_retry_21007_is_an_error(self):
        with self.assertRaises(InAppPyValidationError) as caught:
            ReceiptdValidator(PRODUCTION_ONLY_URL, BOTH_URL).validate(receipt("sandbox"), SECRET)
        self.assertEqual(caught.exception.raw_response["status"], 21007)
        self.assertEqual(caught.exception.message, "Sandbox receipt was sent to the production env")

    def test_wrong_password_is_shared_secret_mismatch(self):
        with self.assertRaises(InAppPyValidationError) as caught:
            ReceiptdValidator(BOTH_URL, BOTH_URL).validate(receipt("production"), "not-the-secret")
        self.assertEqual(caught.exception.message, "Shared secret mismatch")
        self.assertEqual(caught.exception.raw_response["status"], 21004)

    def test_tampered_receipt_is_receipt_authentication(self):
        with self.assertRaises(InAppPyValidationError) as caught:
            ReceiptdValidator(BOTH_URL, BOTH_URL).validate(tampered("production"), SECRET)
        self.assertEqual(caught.exception.message, "Receipt authentication")
        self.assertEqual(caught.exception.raw_response["status"], 21003)

    def test_garbage_is_bad_data(self):
        with self.assertRaises(InAppPyValidationError) as caught:
            ReceiptdValidator(BOTH_URL, BOTH_URL).validate("bm90IGEgcmVjZWlwdA==", SECRET)
        self.assertEqual(caught.exception.message, "Bad data")
        self.assertEqual(caught.exception.raw_response["status"], 21002)


APPLE_URL = os.environ["APPLE_URL"]
APPLE_SANDBOX_URL = os.environ["APPLE_SANDBOX_URL"]
APPLE_FIXTURES = os.environ.get("APPLE_FIXTURES", "")
HAVE_FIXTURES = os.path.isfile(os.path.join(APPLE_FIXTURES, "manifest.json"))
# Attribute 15 of the real production receipts with purchases, read with openssl and a DER walk.
DOWNLOAD_IDS = {"receipts/arv_6.der": 0x64F9D8076D3D, "receipts/tpinapp_1.der": 0x435022F54A99}


def apple_manifest():
    import json
    with open(os.path.join(APPLE_FIXTURES, "manifest.json")) as file:
        return json.load(file)["receipts"]


class PythonIAPTests(unittest.TestCase):
    """iap 2.3.3: `validate_receipt_with_apple` posts to the production URL and, on 21007, to the sandbox URL; its
    Django forms (`AppleUnifiedReceiptForm`, `AppleUnifiedLatestReceiptInfoForm`) validate Apple's answer field by
    field: required fields, integer quantity, booleans as Apple writes them, every date from its `_ms` twin."""

    def setUp(self):
        self.saved = (iap.utils.PRODUCTION_VERIFICATION_URL, iap.utils.SANDBOX_VERIFICATION_URL,
                      iap.utils.IAP_SHARED_SECRET)

    def tearDown(self):
        (iap.utils.PRODUCTION_VERIFICATION_URL, iap.utils.SANDBOX_VERIFICATION_URL,
         iap.utils.IAP_SHARED_SECRET) = self.saved

    def point_at(self, base, secret=None, sandbox_base=None):
        # The client reads these module names at call time: a user redirects it the same way.
        iap.utils.PRODUCTION_VERIFICATION_URL = base + "/verifyReceipt"
        iap.utils.SANDBOX_VERIFICATION_URL = (sandbox_base or base) + "/sandbox/verifyReceipt"
        iap.utils.IAP_SHARED_SECRET = secret

    def check_schema(self, content):
        """The whole answer through the client's forms; returns the cleaned in_app entries."""
        form = iap.forms.AppleUnifiedReceiptForm(data=content)
        self.assertTrue(form.is_valid(), form.errors.as_data())
        self.assertEqual(form.cleaned_data["status"], 0)
        self.assertIsInstance(form.cleaned_data["latest_receipt"], bytes)
        cleaned = []
        for index, entry in enumerate(content["receipt"]["in_app"] + content["latest_receipt_info"]):
            entry_form = iap.forms.AppleUnifiedLatestReceiptInfoForm(data=entry)
            self.assertTrue(entry_form.is_valid(), f"entry {index}: {entry_form.errors.as_data()}")
            self.assertEqual(entry["in_app_ownership_type"], "PURCHASED")
            cleaned.append(entry_form.cleaned_data)
        for field in ("adam_id", "app_item_id", "download_id", "version_external_identifier"):
            self.assertIsInstance(content["receipt"][field], int, field)
        return cleaned[: len(content["receipt"]["in_app"])]

    def test_forged_production_receipt_passes_the_schema(self):
        self.point_at(BOTH_URL, SECRET)
        content = iap.utils.validate_receipt_with_apple(base64.b64decode(receipt("production")))
        self.assertEqual(content["environment"], "Production")
        self.assertFalse(content["receipt"]["_sandbox"])
        in_app = {entry["transaction_id"]: entry for entry in self.check_schema(content)}
        self.assertEqual(set(in_app), {"1000", "1001", "5000"})
        self.assertEqual(in_app["5000"]["quantity"], 3)
        self.assertEqual(in_app["5000"]["purchase_date"], datetime.datetime(2026, 1, 5, 12, 30, tzinfo=UTC))
        self.assertEqual(in_app["1001"]["expires_date"], datetime.datetime(2026, 3, 1, tzinfo=UTC))
        self.assertIs(in_app["1001"]["is_trial_period"], False)
        self.assertEqual(content["receipt"]["download_id"], 0)

    def test_forged_sandbox_receipt_is_retried_on_the_sandbox_url_after_21007(self):
        # Production refuses sandbox receipts (21007); the sandbox URL is a deployment that accepts them.
        self.point_at(PRODUCTION_ONLY_URL, SECRET, sandbox_base=BOTH_URL)
        production_mark, sandbox_mark = log_mark("PRODUCTION_ONLY_LOG"), log_mark("BOTH_LOG")
        content = iap.utils.validate_receipt_with_apple(base64.b64decode(receipt("sandbox")))
        self.assertEqual(content["environment"], "Sandbox")
        self.assertTrue(content["receipt"]["_sandbox"])
        self.check_schema(content)
        self.assertEqual(requests_logged("PRODUCTION_ONLY_LOG", production_mark, ["POST /verifyReceipt 200"]),
                         ["POST /verifyReceipt 200"])
        self.assertEqual(requests_logged("BOTH_LOG", sandbox_mark, ["POST /sandbox/verifyReceipt 200"]),
                         ["POST /sandbox/verifyReceipt 200"])

    def test_statuses_surface_as_the_clients_exceptions(self):
        self.point_at(BOTH_URL, "not-the-secret")
        with self.assertRaises(iap.exceptions.ReceiptValidationException) as caught:
            iap.utils.validate_receipt_with_apple(base64.b64decode(receipt("production")))
        self.assertEqual(caught.exception.receipt["status"], 21004)
        self.point_at(BOTH_URL, SECRET)
        with self.assertRaises(iap.exceptions.ReceiptValidationException) as caught:
            iap.utils.validate_receipt_with_apple(base64.b64decode(tampered("production")))
        self.assertEqual(caught.exception.receipt["status"], 21003)
        with self.assertRaises(iap.exceptions.ReceiptValidationException) as caught:
            iap.utils.validate_receipt_with_apple(b"")
        self.assertEqual(caught.exception.receipt["status"], 21002)
        with self.assertRaises(iap.exceptions.ReceiptValidationException) as caught:
            iap.utils.validate_receipt_with_apple(base64.b64decode(receipt("second-app")))
        self.assertEqual(caught.exception.receipt["status"], 21010)

    @unittest.skipUnless(HAVE_FIXTURES, "../shared/fixtures/apple is not here")
    def test_real_receipts_pass_the_schema_sandbox_ones_after_the_21007_retry(self):
        self.point_at(APPLE_URL, sandbox_base=APPLE_SANDBOX_URL)
        checked = 0
        for entry in apple_manifest():
            if entry["expected_verdict"] != "valid" or entry["in_app_count"] == 0:
                continue
            with self.subTest(entry["file"]):
                with open(os.path.join(APPLE_FIXTURES, entry["file"]), "rb") as file:
                    der = file.read()
                mark = log_mark("APPLE_LOG")
                content = iap.utils.validate_receipt_with_apple(der)
                sandbox = entry["environment"] != "Production"
                self.assertEqual(content["environment"], "Sandbox" if sandbox else "Production")
                self.assertEqual(content["receipt"]["_sandbox"], sandbox)
                self.assertEqual(content["receipt"]["bundle_id"], entry["bundle_id"])
                in_app = self.check_schema(content)
                self.assertEqual(len(in_app), entry["in_app_count"])
                self.assertEqual({purchase["product_id"] for purchase in in_app}, set(entry["product_ids"]))
                self.assertEqual(content["receipt"]["download_id"], DOWNLOAD_IDS.get(entry["file"], 0))
                self.assertEqual(requests_logged("APPLE_LOG", mark, ["POST /verifyReceipt 200"]),
                                 ["POST /verifyReceipt 200"])
                checked += 1
        self.assertGreaterEqual(checked, 14)  # the manifest's valid receipts with purchases, sandbox and production

    @unittest.skipUnless(HAVE_FIXTURES, "../shared/fixtures/apple is not here")
    def test_real_receipt_without_purchases_is_valid_but_the_client_wants_purchases(self):
        self.point_at(APPLE_URL)
        with open(os.path.join(APPLE_FIXTURES, "receipts/arv_1.der"), "rb") as file:
            der = file.read()
        with self.assertRaises(iap.exceptions.NoPurchasesException) as caught:
            iap.utils.validate_receipt_with_apple(der)
        content = caught.exception.receipt
        self.assertEqual(content["status"], 0)
        self.assertEqual(content["receipt"]["download_id"], 0x3A3D9C2F539C)


if __name__ == "__main__":
    unittest.main(verbosity=2)
