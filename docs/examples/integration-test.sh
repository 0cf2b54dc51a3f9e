#!/usr/bin/env bash
# An integration test of the purchase flow against a real receiptd, with receipts forged per scenario.
# See docs/testing.md. Run from a clone after `swift build`:
#
#     docs/examples/integration-test.sh
#
# Needs bash, curl and jq. Takes the binary from $RECEIPTD, else .build/debug/receiptd of this clone.
# Starts its own server on a free port of 127.0.0.1 and stops it on exit; prints "ok" lines, exits non-zero on the
# first scenario that does not answer as expected.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RECEIPTD="${RECEIPTD:-$ROOT/.build/debug/receiptd}"
[ -x "$RECEIPTD" ] || { echo "no receiptd at $RECEIPTD: run swift build, or set RECEIPTD" >&2; exit 1; }

WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill -TERM "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# 1. A test PKI the server trusts, and a second one it does not (an attacker's).
"$RECEIPTD" testing init-ca "$WORK/ca" 2>/dev/null
"$RECEIPTD" testing init-ca "$WORK/attacker-ca" 2>/dev/null

# 2. A test config: trusts the test root (NEVER put a test root in a production config), knows one app.
cat >"$WORK/receiptd.json" <<'JSON'
{
    "trusted_roots": ["ca/root.pem"],
    "apps": [{"bundle_id": "com.example.app", "versions": ["1.0"], "shared_secret": null}],
    "environments": ["Production", "Sandbox"]
}
JSON

# 3. Start receiptd on a free port and wait (at most 10 s) until it answers.
"$RECEIPTD" serve --config "$WORK/receiptd.json" --port 0 >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
URL=""
for _ in $(seq 1 100); do
    URL="$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$WORK/server.log" | head -n 1 || true)"
    if [ -n "$URL" ] && curl -fsS --max-time 1 "$URL/healthz" >/dev/null 2>&1; then break; fi
    URL=""
    sleep 0.1
done
[ -n "$URL" ] || { echo "receiptd did not start:" >&2; cat "$WORK/server.log" >&2; exit 1; }

DEVICE="6D1A2B3C-0000-4000-8000-0123456789AB"      # the identifierForVendor your app would send
OTHER_DEVICE="0B5E9C7A-1111-4222-8333-444455556666"

# A date N days from now (GNU date, else BSD date).
days() { date -u -d "$1 days" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -v"$1"d +%Y-%m-%dT%H:%M:%SZ; }

# forge NAME [receiptd testing receipt flags…]: writes $WORK/NAME.der, a receipt for com.example.app 1.0 on $DEVICE.
forge() {
    local name="$1"
    shift
    "$RECEIPTD" testing receipt --ca "$WORK/ca" --bundle-id com.example.app --app-version 1.0 \
        --device-id "$DEVICE" --out "$WORK/$name.der" "$@"
}

# validate NAME [DEVICE]: POSTs the receipt as raw DER and prints "HTTP_STATUS JSON".
validate() {
    local body status
    body="$(curl -sS --max-time 10 -o - -w '\n%{http_code}' -H 'Content-Type: application/octet-stream' \
        -H "X-Device-Id: ${2:-$DEVICE}" --data-binary "@$WORK/$1.der" "$URL/v1/validate")"
    status="${body##*$'\n'}"
    printf '%s %s\n' "$status" "${body%$'\n'*}"
}

# expect NAME ANSWER JQ_FILTER: the filter must be true on the answer's JSON, and the HTTP status must match.
expect() {
    local name="$1" answer="$2" filter="$3" want_status="$4"
    local status="${answer%% *}" json="${answer#* }"
    if [ "$status" = "$want_status" ] && jq -e "$filter" >/dev/null <<<"$json"; then
        echo "ok   $name"
    else
        echo "FAIL $name: HTTP $status, wanted $want_status and $filter" >&2
        jq . <<<"$json" >&2 || echo "$json" >&2
        exit 1
    fi
}

# First purchase of a monthly subscription: valid, one active subscription.
forge first-purchase --purchase "product=pro.monthly,transaction=1000,purchased=$(days -1),expires=$(days +29)"
expect "first purchase" "$(validate first-purchase)" \
    '.valid and .subscriptions[0].active and .subscriptions[0].latest_transaction_id == "1000"' 200

# Renewal: the receipt carries both transactions of the chain; the subscription reads the newest one.
forge renewal \
    --purchase "product=pro.monthly,transaction=1000,purchased=$(days -31),expires=$(days -1)" \
    --purchase "product=pro.monthly,transaction=1001,original=1000,purchased=$(days -1),expires=$(days +29)"
expect "renewal" "$(validate renewal)" \
    '.valid and (.receipt.in_app | length) == 2 and .subscriptions[0].original_transaction_id == "1000"
     and .subscriptions[0].latest_transaction_id == "1001" and .subscriptions[0].active' 200

# Expired: the receipt is still genuine (200, valid), but the subscription is not active.
forge expired --purchase "product=pro.monthly,transaction=2000,purchased=$(days -60),expires=$(days -30)"
expect "expired subscription" "$(validate expired)" \
    '.valid and .subscriptions[0].active == false and .subscriptions[0].cancelled == false' 200

# Cancelled (refunded by Apple): genuine, but cancelled and not active.
forge cancelled \
    --purchase "product=pro.monthly,transaction=3000,purchased=$(days -5),expires=$(days +25),cancelled=$(days -2)"
expect "cancelled subscription" "$(validate cancelled)" \
    '.valid and .subscriptions[0].cancelled and .subscriptions[0].active == false
     and .receipt.in_app[0].cancellation_date != null' 200

# Wrong device: a receipt copied from another device is refused (422).
expect "wrong device" "$(validate first-purchase "$OTHER_DEVICE")" \
    '.valid == false and .error.code == "device_hash_mismatch" and .checks.device_hash == "failed"' 422

# Forged: signed by a CA the server does not trust. Refused (422), and its contents are not trusted either.
"$RECEIPTD" testing receipt --ca "$WORK/attacker-ca" --bundle-id com.example.app --app-version 1.0 \
    --device-id "$DEVICE" --purchase "product=pro.monthly,transaction=9000,expires=$(days +365)" --out "$WORK/forged.der"
expect "forged by an untrusted CA" "$(validate forged)" \
    '.valid == false and .error.code == "certificate_untrusted" and .checks.signature == "failed"' 422

echo "all scenarios answered as expected"
