#!/usr/bin/env bash
# The support page in a real headless browser (Debian's chromium): a forged valid receipt and an invalid one, with
# and without JavaScript. Screenshots are kept in $SCREENSHOT_DIR (default: a temporary folder) for people to look at.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
work="$(mktemp -d)"
trap 'stop_server || true; rm -rf "$work"' EXIT
make_test_world "$work"
device=3B76A7BD-8F5B-46A4-BCB1-CCE8DBD1B3CD
"$RECEIPTD" testing receipt --ca "$work/ca" --bundle-id com.example.app --app-version 1.0 --device-id "$device" \
    --purchase product=pro.monthly,transaction=1001,original=1000,purchased=2026-01-01T00:00:00Z,expires=2099-01-01T00:00:00Z \
    --purchase product=coins.100,transaction=1002 --out "$work/valid.der"
"$RECEIPTD" testing init-ca "$work/rogue-ca" 2>/dev/null
"$RECEIPTD" testing receipt --ca "$work/rogue-ca" --bundle-id com.example.app --app-version 1.0 --out "$work/invalid.der" 2>/dev/null
"$RECEIPTD" testing transaction --ca "$work/ca" --bundle-id com.example.app --transaction-id 2001 \
    --original-transaction-id 2000 --expires 2099-01-01T00:00:00Z --out "$work/transaction.jws"
# The config trusts the StoreKit 2 test root too, so a pasted JWS verifies.
sed -i 's|"trusted_roots": \["ca/root.pem"\]|"trusted_roots": ["ca/root.pem", "ca/jws-root.pem"]|' "$work/receiptd.json"
start_server "$work/receiptd.json"
RECEIPTD_DEVICE_ID="$device" RECEIPTD_JWS="$work/transaction.jws" \
    "$E2E_ROOT/Tests/support-page/browser-test.sh" "$PORT" "$work/valid.der" "$work/invalid.der" \
    "${SCREENSHOT_DIR:-$work/screenshots}"
stop_server
# The browser test against canned verdicts, so a browser test that passes everything would show here.
"$E2E_ROOT/Tests/support-page/self-test.sh"
