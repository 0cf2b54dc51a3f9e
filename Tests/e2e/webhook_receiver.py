"""The end-to-end tests' webhook receiver, on 127.0.0.1.

webhook_receiver.py LOG MODE PORT_FILE [OPEN [PORT]] records every POST as one JSON line (appended to LOG, so a
restarted receiver goes on with it), writes the port it listens on (PORT, default 0: any) to PORT_FILE, and answers as
the file MODE says: ok (200), 500, hang (no answer while the mode stays hang, at most 20 s: longer than a webhook's
timeout), reset (the connection closed with an RST, no answer) or slow (200 after 1 s). The file OPEN, when given,
lists the client ports of requests held (hang, slow), so a test can tell which server is mid-delivery."""
import base64, http.server, json, os, socket, struct, sys, threading, time

log_path, mode_path, port_path = sys.argv[1:4]
open_path = sys.argv[4] if len(sys.argv) > 4 else None
port = sys.argv[5] if len(sys.argv) > 5 else "0"
lock = threading.Lock()
held = set()

def mode():
    try:
        with open(mode_path) as file:
            return file.read().strip() or "ok"
    except OSError:
        return "ok"

def publish_held():
    if open_path is None:
        return
    with open(open_path + ".tmp", "w") as file:
        file.write("".join(f"{port}\n" for port in sorted(held)))
    os.replace(open_path + ".tmp", open_path)

class Receiver(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        answer = mode()
        status = {"ok": 200, "slow": 200, "500": 500, "hang": None, "reset": "reset"}.get(answer, 200)
        record = {
            "at": time.time(), "path": self.path, "status": status, "mode": answer, "peer": self.client_address[1],
            "signature": self.headers.get("Receiptd-Signature"), "event_id": self.headers.get("Receiptd-Event-Id"),
            "content_type": self.headers.get("Content-Type"), "user_agent": self.headers.get("User-Agent"),
            "body": base64.b64encode(body).decode(),
        }
        # Logged before answering: a 200 the sender never reads (it was killed) still counts as accepted.
        with lock, open(log_path, "a") as log:
            log.write(json.dumps(record) + "\n")
        if answer in ("hang", "slow"):
            with lock:
                held.add(self.client_address[1])
                publish_held()
            try:
                deadline = time.time() + (20 if answer == "hang" else 1)
                while time.time() < deadline and (answer == "slow" or mode() == "hang"):
                    time.sleep(0.1)
            finally:
                with lock:
                    held.discard(self.client_address[1])
                    publish_held()
        if status is None or status == "reset":
            if status == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        reply = b"received" if status == 200 else b"down for maintenance"
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
        except OSError:
            self.close_connection = True

    def log_message(self, *arguments):
        pass

class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        pass  # resets and killed senders make broken pipes: expected here

server = Server(("127.0.0.1", int(port)), Receiver)
publish_held()
with open(port_path + ".tmp", "w") as file:
    file.write(str(server.server_address[1]))
os.replace(port_path + ".tmp", port_path)
server.serve_forever()
