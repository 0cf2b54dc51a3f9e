#!/usr/bin/env bash
# Tests the browser test itself against mock_server.py, which answers with canned verdicts, serving the page a real
# receiptd serves (built with `swift build`). Usage: Tests/support-page/self-test.sh [SCREENSHOT_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../e2e/lib.sh"
work="$(mktemp -d)"
mock_pid=""
cleanup() {
    [ -z "$mock_pid" ] || kill "$mock_pid" 2>/dev/null || true
    stop_server || true
    rm -rf "$work"
}
trap cleanup EXIT

echo '{"port": 0}' > "$work/receiptd.json"
start_server "$work/receiptd.json"
curl -fsS "$BASE_URL/" -o "$work/page.html"
stop_server

printf '\x30\x82VALID-RECEIPT' > "$work/valid.der"
printf '\x30\x82forged' > "$work/invalid.der"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 "$here/mock_server.py" "$port" "$work/page.html" &
mock_pid=$!
for _ in $(seq 50); do
    curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null && break
    sleep 0.1
done
"$here/browser-test.sh" "$port" "$work/valid.der" "$work/invalid.der" "${1:-$work/screenshots}"
