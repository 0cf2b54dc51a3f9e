#!/usr/bin/env python3
"""An integration test of the purchase flow against a real receiptd, with receipts forged per scenario.

See docs/testing.md. Run from a clone after `swift build`:

    python3 docs/examples/test_purchase_flow.py

Python 3.8+, standard library only. Takes the binary from $RECEIPTD, else .build/debug/receiptd of this clone.
Starts its own server on a free port of 127.0.0.1 for the test class and stops it afterwards.
"""

import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECEIPTD = os.environ.get("RECEIPTD") or os.path.join(ROOT, ".build", "debug", "receiptd")

BUNDLE_ID = "com.example.app"
DEVICE = "6D1A2B3C-0000-4000-8000-0123456789AB"  # the identifierForVendor your app would send
OTHER_DEVICE = "0B5E9C7A-1111-4222-8333-444455556666"

CONFIG = {
    # A test root: NEVER list one in a production config.
    "trusted_roots": ["ca/root.pem"],
    "apps": [{"bundle_id": BUNDLE_ID, "versions": ["1.0"], "shared_secret": None}],
    "environments": ["Production", "Sandbox"],
}


def days(n):
    """An RFC 3339 date n days from now, as `--purchase` wants it."""
    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=n)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class PurchaseFlowTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(RECEIPTD, os.X_OK):
            raise RuntimeError(f"no receiptd at {RECEIPTD}: run swift build, or set RECEIPTD")
        cls.work = tempfile.mkdtemp()
        cls.addClassCleanup(shutil.rmtree, cls.work, ignore_errors=True)
        # A test PKI the server trusts, and a second one it does not (an attacker's).
        for name in ("ca", "attacker-ca"):
            subprocess.run([RECEIPTD, "testing", "init-ca", os.path.join(cls.work, name)],
                           check=True, capture_output=True, timeout=30)
        config = os.path.join(cls.work, "receiptd.json")
        with open(config, "w") as file:
            json.dump(CONFIG, file)
        cls.log = open(os.path.join(cls.work, "server.log"), "w+")
        cls.addClassCleanup(cls.log.close)
        cls.server = subprocess.Popen([RECEIPTD, "serve", "--config", config, "--port", "0"],
                                      stdout=cls.log, stderr=subprocess.STDOUT)
        cls.addClassCleanup(cls.stop_server)
        cls.url = cls.wait_for_server()

    @classmethod
    def stop_server(cls):
        cls.server.send_signal(signal.SIGTERM)
        try:
            cls.server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            cls.server.kill()
            cls.server.wait(timeout=5)

    @classmethod
    def wait_for_server(cls, seconds=10):
        """Reads the port from the `listening address=…` log line and waits until /healthz answers."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if cls.server.poll() is not None:
                break
            cls.log.seek(0)
            found = re.search(r"listening address=(http://127\.0\.0\.1:\d+)", cls.log.read())
            if found:
                try:
                    with urllib.request.urlopen(found.group(1) + "/healthz", timeout=1):
                        return found.group(1)
                except OSError:
                    pass
            time.sleep(0.1)
        cls.log.seek(0)
        raise RuntimeError("receiptd did not start:\n" + cls.log.read())

    def forge(self, *purchases, ca="ca", device=DEVICE):
        """A receipt for com.example.app 1.0 on `device` with the given `--purchase` specs, as DER bytes."""
        command = [RECEIPTD, "testing", "receipt", "--ca", os.path.join(self.work, ca), "--bundle-id", BUNDLE_ID,
                   "--app-version", "1.0", "--device-id", device]
        for spec in purchases:
            command += ["--purchase", spec]
        return subprocess.run(command, check=True, capture_output=True, timeout=30).stdout

    def validate(self, receipt, device=DEVICE):
        """POSTs the receipt as raw DER; returns (HTTP status, parsed JSON). 422 is an answer, not an error."""
        request = urllib.request.Request(
            self.url + "/v1/validate", data=receipt, method="POST",
            headers={"Content-Type": "application/octet-stream", "X-Device-Id": device})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as error:
            with error:
                return error.code, json.load(error)

    def test_first_purchase(self):
        status, answer = self.validate(self.forge(f"product=pro.monthly,transaction=1000,purchased={days(-1)},expires={days(29)}"))
        self.assertEqual(status, 200)
        self.assertTrue(answer["valid"])
        [subscription] = answer["subscriptions"]
        self.assertEqual(subscription["product_id"], "pro.monthly")
        self.assertEqual(subscription["latest_transaction_id"], "1000")
        self.assertTrue(subscription["active"])

    def test_renewal(self):
        status, answer = self.validate(self.forge(
            f"product=pro.monthly,transaction=1000,purchased={days(-31)},expires={days(-1)}",
            f"product=pro.monthly,transaction=1001,original=1000,purchased={days(-1)},expires={days(29)}"))
        self.assertEqual(status, 200)
        self.assertEqual(len(answer["receipt"]["in_app"]), 2)
        [subscription] = answer["subscriptions"]
        self.assertEqual(subscription["original_transaction_id"], "1000")
        self.assertEqual(subscription["latest_transaction_id"], "1001")
        self.assertTrue(subscription["active"])

    def test_expired_subscription(self):
        status, answer = self.validate(self.forge(f"product=pro.monthly,transaction=2000,purchased={days(-60)},expires={days(-30)}"))
        self.assertEqual(status, 200)  # the receipt is genuine...
        self.assertTrue(answer["valid"])
        self.assertFalse(answer["subscriptions"][0]["active"])  # ...but grants nothing now
        self.assertFalse(answer["subscriptions"][0]["cancelled"])

    def test_cancelled_subscription(self):
        status, answer = self.validate(self.forge(
            f"product=pro.monthly,transaction=3000,purchased={days(-5)},expires={days(25)},cancelled={days(-2)}"))
        self.assertEqual(status, 200)
        self.assertTrue(answer["valid"])
        self.assertTrue(answer["subscriptions"][0]["cancelled"])
        self.assertFalse(answer["subscriptions"][0]["active"])
        self.assertIsNotNone(answer["receipt"]["in_app"][0]["cancellation_date"])

    def test_wrong_device(self):
        receipt = self.forge(f"product=pro.monthly,transaction=1000,expires={days(29)}")
        status, answer = self.validate(receipt, device=OTHER_DEVICE)
        self.assertEqual(status, 422)
        self.assertFalse(answer["valid"])
        self.assertEqual(answer["error"]["code"], "device_hash_mismatch")
        self.assertEqual(answer["checks"]["device_hash"], "failed")

    def test_forged_by_untrusted_ca(self):
        status, answer = self.validate(self.forge(f"product=pro.monthly,transaction=9000,expires={days(365)}", ca="attacker-ca"))
        self.assertEqual(status, 422)
        self.assertFalse(answer["valid"])
        self.assertEqual(answer["error"]["code"], "certificate_untrusted")
        self.assertEqual(answer["checks"]["signature"], "failed")


if __name__ == "__main__":
    unittest.main()
