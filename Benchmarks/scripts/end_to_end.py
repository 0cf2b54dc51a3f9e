"""End to end, side by side on one JWS: a caller asking a running receiptd over HTTP against the same caller
verifying with Apple's own app-store-server-library (PyPI) in process.

    python3 -m venv /tmp/asl-venv && /tmp/asl-venv/bin/pip install 'app-store-server-library>=3.1,<3.2'
    /tmp/asl-venv/bin/python Benchmarks/scripts/end_to_end.py --url http://127.0.0.1:PORT --jws FILE --root FILE

receiptd's side is everything a Python caller pays: `POST /v1/validate` on a keep-alive connection (http.client),
the server's whole work (read, detection, verification, checks, JSON answer, access log, write), reading the answer
and `json.loads` of it. Apple's side is `SignedDataVerifier.verify_and_decode_signed_transaction`, offline
(enable_online_checks=False, so no OCSP), trusting only `--root`, with the environment and bundle id taken from the
JWS (it refuses any other); it decodes the payload into its model and verifies the chain on every call (it keeps no
cache of decisions). Both run in this one process and take turns in every round, so a busy moment on the machine
touches both alike. A third side, the same caller asking `GET /healthz`, is what the caller and loopback HTTP cost
without any validation: the part of receiptd's figure that no server can take away.

With `--server-pid`, the CPU each side spends is reported too (receiptd: this process's CPU in its turns plus the
server's, read from /proc; Apple: this process's CPU): on a machine other work keeps busy, a round trip waits for
the scheduler twice (server woken, caller woken), which wall-clock charges to receiptd but costs no work.
"""

import argparse
import base64
import http.client
import json
import os
import ssl
import statistics
import time
from importlib.metadata import version
from urllib.parse import urlparse

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier


def claims_of(jws):
    part = jws.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def der(path):
    data = open(path, "rb").read()
    if data.lstrip().startswith(b"-----BEGIN"):
        return ssl.PEM_cert_to_DER_cert(data.decode())
    return data


def calibrated(body, seconds):
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            body()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds / 4:
            return max(1, int(calls * seconds / elapsed))
        calls *= 2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True, help="a running receiptd, e.g. http://127.0.0.1:8080")
    parser.add_argument("--jws", required=True, help="a file holding one signed transaction")
    parser.add_argument("--root", required=True, help="the root that anchors it (DER or PEM), for Apple's library")
    parser.add_argument("--seconds", type=float, default=0.5, help="per sample; 7 samples per side")
    parser.add_argument("--server-pid", type=int, help="receiptd's pid, to add its CPU time to receiptd's side")
    arguments = parser.parse_args()

    jws = open(arguments.jws).read().strip()
    body = jws.encode()
    claims = claims_of(jws)
    verifier = SignedDataVerifier(
        [der(arguments.root)], enable_online_checks=False, environment=Environment(claims["environment"]),
        bundle_id=claims["bundleId"], app_apple_id=claims.get("appAppleId", 1))
    url = urlparse(arguments.url)
    connection = http.client.HTTPConnection(url.hostname, url.port)

    def receiptd():
        connection.request("POST", "/v1/validate", body=body, headers={"Content-Type": "text/plain"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        if response.status != 200:
            raise SystemExit(f"receiptd answered {response.status}: {answer}")
        return answer

    def apple():
        return verifier.verify_and_decode_signed_transaction(jws)

    # What any HTTP service costs this caller: the same connection, request and json.loads, on a route that does
    # no work. receiptd's time minus this is what validating adds to a round trip.
    def transport():
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        answer = json.loads(response.read())
        if response.status != 200:
            raise SystemExit(f"receiptd answered {response.status} to /healthz")
        return answer

    assert receiptd()["transaction"]["transaction_id"] == claims["transactionId"]
    assert apple().transactionId == claims["transactionId"]

    sides = [receiptd, apple, transport]
    calls = [calibrated(side, arguments.seconds) for side in sides]
    def server_cpu():
        if not arguments.server_pid:
            return 0.0
        fields = open(f"/proc/{arguments.server_pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    samples = [[], [], []]
    cpu = [[], [], []]
    for _ in range(7):
        for index, side in enumerate(sides):
            start, cpu_start, server_start = time.perf_counter(), time.process_time(), server_cpu()
            for _ in range(calls[index]):
                side()
            samples[index].append((time.perf_counter() - start) / calls[index] * 1e6)
            server_used = server_cpu() - server_start if side is not apple else 0.0
            cpu[index].append((time.process_time() - cpu_start + server_used) / calls[index] * 1e6)
    ours, theirs, floor = (statistics.median(s) for s in samples)
    print(f"JWS: {arguments.jws} ({len(body)} bytes)")
    print(f"receiptd over HTTP (POST /v1/validate, keep-alive, answer parsed): {ours:9.1f} µs median of 7 "
          f"(range {min(samples[0]):.1f}-{max(samples[0]):.1f})")
    print(f"app-store-server-library {version('app-store-server-library')} SignedDataVerifier, offline: "
          f"{theirs:9.1f} µs median of 7 (range {min(samples[1]):.1f}-{max(samples[1]):.1f})")
    print(f"the same caller, GET /healthz (its HTTP round trip and json.loads, no validation): {floor:9.1f} µs median"
          f" of 7 (range {min(samples[2]):.1f}-{max(samples[2]):.1f})")
    print(f"Apple's library / receiptd end to end: {theirs / ours:.1f}x (goal >= 20x: "
          f"{'met' if theirs >= 20 * ours else 'NOT met'})")
    print(f"  bound set by the caller: Apple's library / the caller's bare round trip = {theirs / floor:.1f}x"
          f" (what a server answering in no time would reach); validating adds {ours - floor:.1f} µs to a round trip")
    if arguments.server_pid:
        ours_cpu, theirs_cpu, floor_cpu = (statistics.median(c) for c in cpu)
        print(f"CPU per verification: receiptd {ours_cpu:.1f} µs (caller + server), Apple's library {theirs_cpu:.1f} µs:"
              f" {theirs_cpu / ours_cpu:.1f}x; GET /healthz {floor_cpu:.1f} µs (caller + server)")
        print(f"end_to_end_cpu_ratio={theirs_cpu / ours_cpu:.1f}")
    print(f"end_to_end_receiptd_us={ours:.1f} end_to_end_apple_us={theirs:.1f} end_to_end_ratio={theirs / ours:.1f}"
          f" end_to_end_transport_us={floor:.1f}")


if __name__ == "__main__":
    main()
