#!/usr/bin/env python3
"""A stand-in for receiptd to test the browser test itself: serves the support page and canned answers.

    mock_server.py PORT PAGE_HTML

POST /v1/validate answers a receipt containing the bytes VALID-RECEIPT as valid (with purchases whose product
id is an HTML injection attempt, to prove the page escapes), and anything else as certificate_untrusted.
Multipart form posts (the page without JavaScript) get a small HTML answer, as receiptd gives.
"""

import base64
import email.parser
import email.policy
import html
import json
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VALID = {
    "valid": True,
    "environment": "Sandbox",
    "checks": {"signature": "passed", "bundle_id": "skipped", "version": "skipped", "device_hash": "skipped",
               "environment": "passed"},
    "receipt": {
        "receipt_type": "ProductionSandbox", "app_item_id": 0, "bundle_id": "com.example.photos",
        "application_version": "412", "original_application_version": "1.0",
        "creation_date": "2024-05-01T12:00:00Z", "expiration_date": None,
        "original_purchase_date": "2023-01-01T00:00:00Z",
        "in_app": [
            {"quantity": 1, "product_id": "com.example.photos.pro", "transaction_id": "1000000000000001",
             "original_transaction_id": "1000000000000001", "purchase_date": "2024-04-01T12:00:00Z",
             "original_purchase_date": "2024-04-01T12:00:00Z", "expires_date": "2024-05-01T12:00:00Z",
             "cancellation_date": None, "web_order_line_item_id": "2000000000000001", "is_trial_period": True,
             "is_in_intro_offer_period": False, "promotional_offer_id": None},
            {"quantity": 1, "product_id": "<img src=x onerror=alert(1)>", "transaction_id": "1000000000000002",
             "original_transaction_id": "1000000000000002", "purchase_date": "2024-04-02T12:00:00Z",
             "original_purchase_date": "2024-04-02T12:00:00Z", "expires_date": None,
             "cancellation_date": "2024-04-03T12:00:00Z", "web_order_line_item_id": None, "is_trial_period": False,
             "is_in_intro_offer_period": False, "promotional_offer_id": None},
        ],
    },
    "subscriptions": [
        {"product_id": "com.example.photos.pro", "original_transaction_id": "1000000000000001",
         "latest_transaction_id": "1000000000000001", "expires_date": "2024-05-01T12:00:00Z", "active": False,
         "cancelled": False},
    ],
}
INVALID = {
    "valid": False,
    "error": {"code": "certificate_untrusted", "message": "the signing chain does not reach a trusted root"},
    "checks": {"signature": "failed", "bundle_id": "skipped", "version": "skipped", "device_hash": "skipped",
               "environment": "skipped"},
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    page = b""

    def log_message(self, *args):
        pass

    def answer(self, status, content_type, body):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Request-Id", str(uuid.uuid4()))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/":
            self.answer(200, "text/html; charset=utf-8", self.page)
        elif self.path == "/healthz":
            self.answer(200, "application/json", b'{"status":"ok"}')
        else:
            self.answer(404, "application/json", b'{"error":{"code":"not_found","message":"no such route"}}')

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        content_type = self.headers.get("Content-Type", "")
        if self.path.split("?")[0] != "/v1/validate":
            return self.answer(404, "application/json", b'{"error":{"code":"not_found","message":"no such route"}}')
        if content_type.startswith("text/plain"):
            receipt = base64.b64decode(body)
        elif content_type.startswith("multipart/form-data"):
            message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
            receipt = b"".join(part.get_payload(decode=True) or b"" for part in message.iter_parts()
                               if part.get_param("name", header="content-disposition") == "receipt")
        else:
            receipt = body
        result = VALID if b"VALID-RECEIPT" in receipt else INVALID
        if "text/html" in self.headers.get("Accept", ""):
            if result["valid"]:
                items = "".join(f"<li>{html.escape(p['product_id'])}</li>" for p in result["receipt"]["in_app"])
                page = f"<!doctype html><title>Valid</title><h1>Valid receipt</h1><ul>{items}</ul>"
            else:
                page = (f"<!doctype html><title>Invalid</title><h1>Invalid receipt</h1>"
                        f"<p>{html.escape(result['error']['code'])}</p>")
            return self.answer(200 if result["valid"] else 422, "text/html; charset=utf-8", page.encode())
        self.answer(200 if result["valid"] else 422, "application/json", json.dumps(result).encode())


if __name__ == "__main__":
    Handler.page = open(sys.argv[2], "rb").read()
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
