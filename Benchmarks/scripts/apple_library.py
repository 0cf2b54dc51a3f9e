"""Times Apple's own app-store-server-library (PyPI) on the same real JWS receipt-bench verifies.

    python3 -m venv /tmp/asl-venv && /tmp/asl-venv/bin/pip install 'app-store-server-library>=3.1,<3.2'
    /tmp/asl-venv/bin/python Benchmarks/scripts/apple_library.py --fixtures ../shared/fixtures

SignedDataVerifier offline (enable_online_checks=False, so no OCSP), trusting Apple Root CA - G3 only, the
environment and bundle id taken from the JWS itself (the library refuses any other). It verifies the chain on
every call: it keeps no cache of decisions.
"""

import argparse
import base64
import json
import statistics
import time
from importlib.metadata import version

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier


def payload(jws):
    part = jws.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixtures", required=True, help="the folder holding apple/ and apple-jws/")
    parser.add_argument("--jws", default="transaction_5.jws")
    parser.add_argument("--seconds", type=float, default=0.5)
    arguments = parser.parse_args()
    jws = open(f"{arguments.fixtures}/apple-jws/{arguments.jws}").read().strip()
    root = open(f"{arguments.fixtures}/apple/certs/AppleRootCA-G3.cer", "rb").read()
    claims = payload(jws)
    verifier = SignedDataVerifier(
        [root], enable_online_checks=False, environment=Environment(claims["environment"]),
        bundle_id=claims["bundleId"], app_apple_id=claims.get("appAppleId"))
    decoded = verifier.verify_and_decode_signed_transaction(jws)
    assert decoded.transactionId == claims["transactionId"]

    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            verifier.verify_and_decode_signed_transaction(jws)
        if time.perf_counter() - start >= arguments.seconds / 4:
            break
        calls *= 2
    calls = max(1, int(calls * arguments.seconds / (time.perf_counter() - start)))
    samples = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(calls):
            verifier.verify_and_decode_signed_transaction(jws)
        samples.append((time.perf_counter() - start) / calls * 1e6)
    median = statistics.median(samples)
    print(f"app-store-server-library {version('app-store-server-library')} SignedDataVerifier "
          f"verify_and_decode_signed_transaction({arguments.jws}): {median:.1f} µs median of 7 "
          f"(range {min(samples):.1f}-{max(samples):.1f})")
    print(f"apple_library_us={median:.1f}")


if __name__ == "__main__":
    main()
