#!/usr/bin/env python3
"""Clients for receiptd's attack scripts (loopback only, bounded in time and count; standard library only).

  load.py validate PORT RECEIPT SECONDS [--clients N]
      N keep-alive clients post RECEIPT (DER) to /v1/validate until SECONDS pass; every answer must be 200 with
      "valid": true. Prints one JSON line: requests, successes, failures (with reasons), latency p50/p99/max (ms).
  load.py flood PORT CONNECTIONS [--hold SECONDS]
      Opens CONNECTIONS sockets at once, sends GET /healthz on each, and records per socket what came back within
      5 s: a status line, a close/reset without a response, or nothing (hung). Then holds for --hold seconds.
  load.py declare PORT CONNECTIONS LENGTH SECONDS
      Opens CONNECTIONS connections that each send a POST head declaring Content-Length LENGTH and one body byte,
      holds them SECONDS, then reports how many the server still held open (a greedy client that promises much).
  load.py signal PORT RECEIPT PID SIG [--clients N] [--after SECONDS]
      Runs the validate load, sends SIG (TERM or KILL) to PID after --after seconds, and sorts the requests:
      those fully sent before the signal must all have a 200 (for TERM); those after may be refused.
"""
import argparse, json, os, signal, socket, sys, threading, time

HOST = "127.0.0.1"


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * p))], 2)


def read_response(sock, buffer=b""):
    """Reads one HTTP/1.1 response with Content-Length; returns (status, body, rest) or raises."""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a response" if not buffer else "closed mid-head")
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ")[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-body")
        rest += chunk
    return status, rest[:length], rest[length:]


class Client:
    """One keep-alive connection that reconnects after an error (each error is counted by the caller)."""

    def __init__(self, port, receipt):
        self.port, self.sock = port, None
        self.request = (b"POST /v1/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
                        b"Content-Length: %d\r\n\r\n" % len(receipt)) + receipt

    def post(self, on_sent=None):
        if self.sock is None:
            self.sock = socket.create_connection((HOST, self.port), timeout=30)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.sock.sendall(self.request)
            if on_sent:
                on_sent()
            status, body, _ = read_response(self.sock)
            return status, body
        except Exception:
            self.close()
            raise

    def close(self):
        if self.sock:
            self.sock.close()
            self.sock = None


def run_validate(port, receipt, seconds, clients, stop_at=None, records=None):
    deadline = time.monotonic() + seconds
    results = []  # (started, latency ms, ok, failure reason, request fully sent at), monotonic seconds
    lock = threading.Lock()

    def worker():
        client = Client(port, receipt)
        while time.monotonic() < deadline:
            started = time.monotonic()
            sent = [None]
            try:
                status, body = client.post(on_sent=lambda: sent.__setitem__(0, time.monotonic()))
                ok = status == 200 and b'"valid":true' in body.replace(b" ", b"")
                reason = None if ok else f"status {status}: {body[:120]!r}"
            except Exception as error:  # noqa: BLE001 - every failure is data here
                ok, reason, status = False, f"{type(error).__name__}: {error}", None
                time.sleep(0.05)
            with lock:
                results.append((started, (time.monotonic() - started) * 1000, ok, reason, sent[0]))
        client.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def summarize(results):
    latencies = [r[1] for r in results if r[2]]
    failures = [r[3] for r in results if not r[2]]
    reasons = {}
    for reason in failures:
        reasons[reason] = reasons.get(reason, 0) + 1
    return {
        "requests": len(results), "successes": len(latencies), "failures": len(failures),
        "success_rate": round(len(latencies) / len(results), 6) if results else None,
        "p50_ms": percentile(latencies, 0.50), "p99_ms": percentile(latencies, 0.99),
        "max_ms": round(max(latencies), 2) if latencies else None,
        "failure_reasons": reasons,
    }


def flood(port, count, hold):
    sockets, outcome = [], {}
    started = time.monotonic()
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex((HOST, port))
        sockets.append(s)
    connected_in = time.monotonic() - started
    import selectors
    selector = selectors.DefaultSelector()
    pending_write = {}
    for s in sockets:
        pending_write[s] = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        selector.register(s, selectors.EVENT_WRITE)
    answered_at, received = {}, {s: b"" for s in sockets}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(answered_at) < count:
        for key, events in selector.select(timeout=0.2):
            s = key.fileobj
            if events & selectors.EVENT_WRITE and s in pending_write:
                try:
                    s.send(pending_write.pop(s))
                    selector.modify(s, selectors.EVENT_READ)
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError as error:
                    outcome[s] = f"refused/reset before sending ({error.errno})"
                    answered_at[s] = time.monotonic() - started
                    selector.unregister(s)
                continue
            try:
                chunk = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError as error:
                chunk, outcome[s] = b"", f"reset ({error.errno})"
            received[s] += chunk
            if b"\r\n" in received[s] or not chunk:
                line = received[s].split(b"\r\n")[0]
                if line.startswith(b"HTTP/1.1 "):
                    outcome[s] = "status " + line.split(b" ")[1].decode()
                else:
                    outcome.setdefault(s, "closed without a response")
                answered_at[s] = time.monotonic() - started
                selector.unregister(s)
    counts = {}
    for s in sockets:
        result = outcome.get(s, "no answer within 5 s (hung)")
        counts[result] = counts.get(result, 0) + 1
    times = sorted(answered_at.values())
    summary = {
        "connections": count, "connect_phase_s": round(connected_in, 3), "outcomes": counts,
        "answered": len(times), "p50_answer_s": percentile(times, 0.5), "p99_answer_s": percentile(times, 0.99),
        "last_answer_s": round(times[-1], 3) if times else None,
    }
    time.sleep(hold)
    for s in sockets:
        s.close()
    return summary


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate")
    v.add_argument("port", type=int); v.add_argument("receipt"); v.add_argument("seconds", type=float)
    v.add_argument("--clients", type=int, default=1)
    f = sub.add_parser("flood")
    f.add_argument("port", type=int); f.add_argument("connections", type=int)
    f.add_argument("--hold", type=float, default=0)
    d = sub.add_parser("declare")
    d.add_argument("port", type=int); d.add_argument("connections", type=int); d.add_argument("length", type=int)
    d.add_argument("seconds", type=float)
    g = sub.add_parser("signal")
    g.add_argument("port", type=int); g.add_argument("receipt"); g.add_argument("pid", type=int)
    g.add_argument("sig", choices=["TERM", "KILL"])
    g.add_argument("--clients", type=int, default=8); g.add_argument("--after", type=float, default=2)
    args = parser.parse_args()

    if args.command == "validate":
        receipt = open(args.receipt, "rb").read()
        print(json.dumps(summarize(run_validate(args.port, receipt, args.seconds, args.clients))))
    elif args.command == "declare":
        sockets, refused = [], 0
        head = b"POST /v1/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\nx" % args.length
        for _ in range(args.connections):
            try:
                s = socket.create_connection((HOST, args.port), timeout=5)
                s.sendall(head)
                sockets.append(s)
            except OSError:
                refused += 1
        time.sleep(args.seconds)
        still_open = 0
        for s in sockets:
            s.setblocking(False)
            try:
                s.recv(1)  # data (an answer) or b"" (closed): the server let go of this connection
            except BlockingIOError:
                still_open += 1
            except OSError:
                pass
            s.close()
        print(json.dumps({"connections": args.connections, "declared_bytes_each": args.length, "refused": refused,
                          "held_open_by_server_after_s": args.seconds, "still_open": still_open}))
    elif args.command == "flood":
        print(json.dumps(flood(args.port, args.connections, args.hold)))
    else:
        receipt = open(args.receipt, "rb").read()
        fired = {}

        def fire():
            time.sleep(args.after)
            fired["at"] = time.monotonic()
            os.kill(args.pid, signal.SIGTERM if args.sig == "TERM" else signal.SIGKILL)

        threading.Thread(target=fire, daemon=True).start()
        results = run_validate(args.port, receipt, args.after + 3, args.clients)
        at = fired["at"]
        before = [r for r in results if r[4] is not None and r[4] < at]
        after = [r for r in results if r[4] is None or r[4] >= at]
        in_flight = [r for r in before if r[0] + r[1] / 1000 > at]
        print(json.dumps({
            "signal": args.sig, "clients": args.clients, "signal_after_s": args.after,
            "sent_before_signal": len(before), "sent_before_signal_ok": sum(1 for r in before if r[2]),
            "sent_before_signal_failures": [r[3] for r in before if not r[2]][:10],
            "in_flight_at_signal": len(in_flight), "in_flight_at_signal_ok": sum(1 for r in in_flight if r[2]),
            "attempts_after_signal": len(after), "attempts_after_signal_ok": sum(1 for r in after if r[2]),
        }))


if __name__ == "__main__":
    main()
