#!/usr/bin/env python3
"""Raw-socket cases smuggle_probe.py lacks, each on its own connection with a 3 s timeout (loopback only).
Prints: case, expected answer, what came back (status lines, "close" for a close without a response, TIMEOUT for
a hang), and MISMATCH when it differs. Usage: raw_cases.py PORT"""
import re, socket, sys, time

PORT = int(sys.argv[1])
H = b"Host: a\r\n"
CASES = [
    # (name, bytes, expected status lines in order)
    ("NUL in method", b"G\x00ET /healthz HTTP/1.1\r\n" + H + b"\r\n", ["400"]),
    ("NUL in target", b"GET /health\x00z HTTP/1.1\r\n" + H + b"\r\n", ["400"]),
    ("NUL in header name", b"GET /healthz HTTP/1.1\r\n" + H + b"X-\x00: 1\r\n\r\n", ["400"]),
    ("NUL before request", b"\x00GET /healthz HTTP/1.1\r\n" + H + b"\r\n", ["400"]),
    ("invalid method 'GE T'", b"GE T /healthz HTTP/1.1\r\n" + H + b"\r\n", ["400"]),
    ("invalid method '(GET)'", b"(GET) /healthz HTTP/1.1\r\n" + H + b"\r\n", ["400"]),
    ("unknown method token", b"BREW /healthz HTTP/1.1\r\n" + H + b"\r\n", ["405"]),
    ("absolute-form URI", b"GET http://a/healthz HTTP/1.1\r\n" + H + b"\r\n", ["400"]),
    ("authority-form CONNECT", b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", ["400"]),
    ("asterisk-form OPTIONS", b"OPTIONS * HTTP/1.1\r\n" + H + b"\r\n", ["400"]),
    ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", ["400"]),
    ("HTTP/1.2", b"GET /healthz HTTP/1.2\r\n" + H + b"\r\n", ["505"]),
    ("huge chunk size (15 hex digits)", b"POST /v1/validate HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\nx", ["413"]),
    ("huge chunk size (40 hex digits)", b"POST /v1/validate HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n" + b"f" * 40 + b"\r\nx", ["400"]),
    ("chunk size line of 5000 bytes", b"POST /v1/validate HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n1;" + b"a" * 5000 + b"\r\nx\r\n0\r\n\r\n", ["400"]),
    ("Content-Length over max_body_bytes", b"POST /v1/validate HTTP/1.1\r\n" + H + b"Content-Length: 999999999\r\n\r\n", ["413"]),
    ("Expect 100-continue over the limit", b"POST /v1/validate HTTP/1.1\r\n" + H + b"Expect: 100-continue\r\nContent-Length: 999999999\r\n\r\n", ["413"]),
    ("20 KB header line", b"GET /healthz HTTP/1.1\r\n" + H + b"X-Big: " + b"a" * 20000 + b"\r\n\r\n", ["431"]),
    ("10,000 tiny headers", b"GET /healthz HTTP/1.1\r\n" + H + b"X: 1\r\n" * 10000 + b"\r\n", ["431"]),
    ("duplicate Host", b"GET /healthz HTTP/1.1\r\n" + H + H + b"\r\n", ["400"]),
    ("TE split over two fields", b"POST /v1/validate HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", ["501"]),
    ("CL + TE with CL 0", b"POST /v1/validate HTTP/1.1\r\n" + H + b"Content-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", ["400"]),
    ("request then garbage", b"GET /healthz HTTP/1.1\r\n" + H + b"\r\nGARBAGE\r\n\r\n", ["200", "400"]),
    ("17 pipelined requests", (b"GET /healthz HTTP/1.1\r\n" + H + b"\r\n") * 17, ["200"] * 17),
    ("Connection: close stops the pipeline", b"GET /healthz HTTP/1.1\r\n" + H + b"Connection: close\r\n\r\nGET /healthz HTTP/1.1\r\n" + H + b"\r\n", ["200"]),
    ("binary noise", bytes(range(256)) * 4, ["400"]),
]


def run(data):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=3)
    got = b""
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        return "TIMEOUT " + " ".join(re.findall(r"HTTP/1\.[01] (\d{3})", got.decode("latin-1"))), None
    except OSError as error:
        got += b""
        if not got:
            return f"reset ({error.errno})", []
    finally:
        s.close()
    codes = re.findall(r"HTTP/1\.[01] (\d{3})", got.decode("latin-1"))
    return (" ".join(codes) or "close"), codes


print(f"{'case':40} {'expected':16} server")
for name, data, expected in CASES:
    started = time.monotonic()
    seen, codes = run(data)
    took = time.monotonic() - started
    verdict = "" if codes == expected else "  MISMATCH"
    print(f"{name:40} {' '.join(expected)[:16]:16} {seen[:60]} ({took:.2f}s){verdict}")
