#!/usr/bin/env python3
"""Time from exec of `receiptd serve` to its first `GET /healthz` 200, polling every 0.5 ms. Prints each run and
the median. Each server is started on a free port and stopped with SIGTERM (only the process started here)."""
import argparse
import os
import signal
import socket
import statistics
import subprocess
import time


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def healthz_ok(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
            connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return connection.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    times = []
    for _ in range(args.runs):
        port = free_port()
        start = time.monotonic()
        server = subprocess.Popen(
            [args.binary, "serve", "--config", args.config, "--port", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not healthz_ok(port):
                if server.poll() is not None:
                    raise RuntimeError("receiptd exited during start")
                if time.monotonic() - start > 10:
                    raise RuntimeError("no /healthz 200 within 10 s")
                time.sleep(0.0005)
            times.append((time.monotonic() - start) * 1000)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=15)
    print("cold_start_ms runs=" + " ".join(f"{t:.1f}" for t in times) + f" median={statistics.median(times):.1f}")


if __name__ == "__main__":
    main()
