#!/usr/bin/env bash
# /verifyReceipt through real third-party clients of Apple's endpoint (itunes-iap, inapppy and iap from PyPI,
# installed into a throwaway venv): forged and real receipts (../shared/fixtures/apple, when present) read through
# the clients' objects and iap's Django forms of Apple's answer, their sandbox retry paths, and 21002, 21003, 21004,
# 21008, 21010 surfacing as their error types. The checks are in test-verify-receipt-client.py.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
. "$HERE/python-env.sh"

WORK="$(mktemp -d)"
BOTH_PID="" BOTH_LOG="" PRODUCTION_ONLY_PID="" PRODUCTION_ONLY_LOG="" APPLE_PID="" APPLE_LOG=""
APPLE_SANDBOX_PID="" APPLE_SANDBOX_LOG="" LEDGER_PID="" LEDGER_LOG=""
cleanup() {
    local status=$?
    set +e
    RECEIPTD_PID="$BOTH_PID" SERVER_LOG="$BOTH_LOG"
    stop_server || status=1
    RECEIPTD_PID="$PRODUCTION_ONLY_PID" SERVER_LOG="$PRODUCTION_ONLY_LOG"
    stop_server || status=1
    RECEIPTD_PID="$APPLE_PID" SERVER_LOG="$APPLE_LOG"
    stop_server || status=1
    RECEIPTD_PID="$APPLE_SANDBOX_PID" SERVER_LOG="$APPLE_SANDBOX_LOG"
    stop_server || status=1
    RECEIPTD_PID="$LEDGER_PID" SERVER_LOG="$LEDGER_LOG"
    stop_server || status=1
    rm -rf "$WORK" "$BOTH_LOG" "$PRODUCTION_ONLY_LOG" "$APPLE_LOG" "$APPLE_SANDBOX_LOG" "$LEDGER_LOG"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

e2e_python_venv "$WORK/venv" itunes-iap==2.6.1 inapppy==2.5.2 iap==2.3.3 Django==5.2.19

# Two servers over one test PKI: the lib's world (Production and Sandbox, secret "s3cret"), and the same with
# Production only, which answers 21007 to sandbox receipts.
make_test_world "$WORK"
sed 's/"environments": \["Production", "Sandbox"\]/"environments": ["Production"]/' "$WORK/receiptd.json" \
    >"$WORK/production-only.json"
grep -q '"environments": \["Production"\]' "$WORK/production-only.json"

start_server "$WORK/receiptd.json"
BOTH_PID="$RECEIPTD_PID" BOTH_LOG="$SERVER_LOG" BOTH_URL="$BASE_URL"
start_server "$WORK/production-only.json"
PRODUCTION_ONLY_PID="$RECEIPTD_PID" PRODUCTION_ONLY_LOG="$SERVER_LOG" PRODUCTION_ONLY_URL="$BASE_URL"
# Real receipts: Apple's pinned root only, any app, and Production only, so sandbox receipts take the 21007 retry.
echo '{"environments": ["Production"]}' >"$WORK/apple.json"
start_server "$WORK/apple.json"
APPLE_PID="$RECEIPTD_PID" APPLE_LOG="$SERVER_LOG" APPLE_URL="$BASE_URL"
# Its sandbox URL: a deployment that accepts Sandbox (a production-only server accepts no Sandbox receipt anywhere).
echo '{}' >"$WORK/apple-sandbox.json"
start_server "$WORK/apple-sandbox.json"
APPLE_SANDBOX_PID="$RECEIPTD_PID" APPLE_SANDBOX_LOG="$SERVER_LOG" APPLE_SANDBOX_URL="$BASE_URL"
# The test world with a ledger, trusting the StoreKit 2 test root too: renewals that Apple's notifications bring show
# in the same receipt's answer, as Apple's verifyReceipt showed them.
jq '.store = {"sqlite": "ledger.sqlite"} | .trusted_roots += ["ca/jws-root.pem"]' "$WORK/receiptd.json" \
    >"$WORK/ledger.json"
start_server "$WORK/ledger.json"
LEDGER_PID="$RECEIPTD_PID" LEDGER_LOG="$SERVER_LOG" LEDGER_URL="$BASE_URL"

mkdir "$WORK/receipts"
forge() {
    local name="$1"
    shift
    "$RECEIPTD" testing receipt --ca "$WORK/ca" --device-id 6D1A2B3C-0000-4000-8000-0123456789AB \
        --format base64 --out "$WORK/receipts/$name.b64" "$@"
}
forge production --bundle-id com.example.app --app-version 1.0 \
    --purchase product=pro.monthly,transaction=1000,purchased=2026-01-01T00:00:00Z,expires=2026-02-01T00:00:00Z \
    --purchase product=pro.monthly,transaction=1001,original=1000,purchased=2026-02-01T00:00:00Z,expires=2026-03-01T00:00:00Z \
    --purchase product=coins.100,transaction=5000,quantity=3,purchased=2026-01-05T12:30:00Z
forge sandbox --bundle-id com.example.app --app-version 1.1 --environment Sandbox \
    --purchase product=pro.monthly,transaction=7000,purchased=2026-01-01T00:00:00Z,expires=2026-02-01T00:00:00Z
forge second-app --bundle-id com.example.other --app-version 1.0 --purchase product=x,transaction=1
# January's receipt of a monthly subscription (expired on 2026-02-01), and Apple's DID_RENEW of 2026-02-01 for it.
forge expired-subscription --bundle-id com.example.app --app-version 1.0 --created 2026-01-15T00:00:00Z \
    --purchase product=pro.monthly,transaction=5101,original=5100,purchased=2026-01-01T00:00:00Z,expires=2026-02-01T00:00:00Z
"$RECEIPTD" testing notification --ca "$WORK/ca" --type DID_RENEW --bundle-id com.example.app \
    --transaction-id 5102 --original-transaction-id 5100 --product-id pro.monthly \
    --purchased 2026-02-01T00:00:00Z --expires 2099-03-01T00:00:00Z --signed 2026-02-01T00:00:05Z \
    --environment Production --out "$WORK/did-renew.jws"

RECEIPTS="$WORK/receipts" BOTH_URL="$BOTH_URL" BOTH_LOG="$BOTH_LOG" LEDGER_URL="$LEDGER_URL" \
    DID_RENEW="$WORK/did-renew.jws" \
    PRODUCTION_ONLY_URL="$PRODUCTION_ONLY_URL" PRODUCTION_ONLY_LOG="$PRODUCTION_ONLY_LOG" \
    APPLE_URL="$APPLE_URL" APPLE_LOG="$APPLE_LOG" APPLE_SANDBOX_URL="$APPLE_SANDBOX_URL" \
    APPLE_SANDBOX_LOG="$APPLE_SANDBOX_LOG" APPLE_FIXTURES="$E2E_ROOT/../shared/fixtures/apple" \
    timeout 120 "$E2E_PYTHON" "$HERE/test-verify-receipt-client.py"
