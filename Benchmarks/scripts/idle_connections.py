#!/usr/bin/env python3
"""Opens COUNT keep-alive connections to 127.0.0.1:PORT, makes one GET /healthz on each, then holds them all idle
and prints the server's RSS (from /proc/PID/status) before and while they are open. Closes them on exit."""
import argparse
import socket
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--hold", type=float, default=3.0, help="seconds to hold the connections before measuring")
    args = parser.parse_args()

    before = rss_kib(args.pid)
    sockets = []
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    try:
        for _ in range(args.count):
            connection = socket.create_connection(("127.0.0.1", args.port), timeout=10)
            connection.sendall(request)
            response = b""
            while b"\r\n\r\n" not in response or not response.rstrip().endswith(b"}"):
                chunk = connection.recv(4096)
                if not chunk:
                    raise RuntimeError("server closed a connection")
                response += chunk
            if not response.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"unexpected answer: {response[:40]!r}")
            sockets.append(connection)
        time.sleep(args.hold)
        during = rss_kib(args.pid)
        # Every connection must still be open: a read would block (no EOF) on each.
        alive = 0
        for connection in sockets:
            connection.setblocking(False)
            try:
                alive += 0 if connection.recv(1) == b"" else 1
            except BlockingIOError:
                alive += 1
        print(f"idle_connections={len(sockets)} alive={alive} rss_before_kib={before} rss_with_idle_kib={during} "
              f"per_connection_kib={(during - before) / max(1, len(sockets)):.1f}")
    finally:
        for connection in sockets:
            connection.close()


if __name__ == "__main__":
    main()
