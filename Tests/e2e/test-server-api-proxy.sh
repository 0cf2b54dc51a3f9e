#!/usr/bin/env bash
# receiptd's calls to Apple honour HTTPS_PROXY and NO_PROXY, as libcurl reads them: through a proxy that is not
# there, nothing reaches the fake App Store Server API and the lookup says server_api_unavailable; with the fake's
# host in NO_PROXY, the request goes straight to it.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"

# Only the variables this test sets count.
unset https_proxy no_proxy all_proxy ALL_PROXY HTTPS_PROXY NO_PROXY

WORK="$(mktemp -d)"
FAKE=""
cleanup() {
    [ -z "$FAKE" ] || kill "$FAKE" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

mkdir "$WORK/apple"
echo '{"keyId": "ABC123DEFG", "issuerId": "57246542-96fe-1a63-e053-0824d011072a", "bundleId": "com.example.app"}' \
    >"$WORK/apple/fixture.json"
python3 "$HERE/fake-app-store-server.py" "$WORK/apple" &
FAKE=$!
for _ in $(seq 100); do [ -f "$WORK/apple/port" ] && break; sleep 0.1; done
[ -f "$WORK/apple/port" ] || { echo "test-server-api-proxy: the fake did not start" >&2; exit 1; }
PORT="$(cat "$WORK/apple/port")"
cat >"$WORK/receiptd.json" <<JSON
{"environments": ["Production"],
 "apps": [{"bundle_id": "com.example.app", "server_api": {"key_id": "ABC123DEFG",
           "issuer_id": "57246542-96fe-1a63-e053-0824d011072a", "private_key_file": "apple/key.p8"}}],
 "server_api": {"production_url": "https://localhost:$PORT", "ca_file": "apple/ca.pem", "timeout": 3}}
JSON

# Port 9 (discard) has no proxy listening: the connection to the proxy fails.
status=0
HTTPS_PROXY=http://127.0.0.1:9 "$RECEIPTD" lookup order NOSUCHORDER --config "$WORK/receiptd.json" \
    >/dev/null 2>"$WORK/proxied.err" || status=$?
[ "$status" -eq 1 ] && grep -q 'server_api_unavailable' "$WORK/proxied.err" \
    || { cat "$WORK/proxied.err" >&2; echo "test-server-api-proxy: HTTPS_PROXY was not used" >&2; exit 1; }
[ ! -s "$WORK/apple/requests.jsonl" ] \
    || { echo "test-server-api-proxy: a request bypassed HTTPS_PROXY" >&2; exit 1; }

status=0
HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY=localhost "$RECEIPTD" lookup order NOSUCHORDER --config "$WORK/receiptd.json" \
    >/dev/null 2>"$WORK/direct.err" || status=$?
[ "$status" -eq 1 ] && grep -q 'order_not_found' "$WORK/direct.err" \
    || { cat "$WORK/direct.err" >&2; echo "test-server-api-proxy: NO_PROXY was not honoured" >&2; exit 1; }
[ "$(wc -l <"$WORK/apple/requests.jsonl")" -eq 1 ] \
    || { echo "test-server-api-proxy: expected one request at the fake" >&2; exit 1; }
echo "test-server-api-proxy: ok"
