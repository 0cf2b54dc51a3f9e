#!/usr/bin/env bash
# The support page in a real headless browser (Debian's chromium): a forged valid receipt and an invalid one, with
# and without JavaScript, and the lookup box on a subscription the ledger learned from forged notifications.
# Screenshots are kept in $SCREENSHOT_DIR (default: a temporary folder) for people to look at.
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
# The config trusts the StoreKit 2 test root too, so a pasted JWS verifies, and keeps a ledger for the lookup box.
sed -i 's|"trusted_roots": \["ca/root.pem"\]|"trusted_roots": ["ca/root.pem", "ca/jws-root.pem"], "store": {"sqlite": "ledger.sqlite"}|' \
    "$work/receiptd.json"
start_server "$work/receiptd.json"
# Four monthly periods, the first renewal three days late (billing retry), the third refunded, then a failed renewal
# whose grace period ended: in billing retry now.
day() { date -u -d "$1 days" +%Y-%m-%dT%H:%M:%SZ; }
notify() {
    "$RECEIPTD" testing notification --ca "$work/ca" --bundle-id com.example.app --product-id pro.monthly \
        --original-transaction-id 5000 --post "$BASE_URL/v1/notifications" "$@" >/dev/null
}
notify --type SUBSCRIBED --subtype INITIAL_BUY --transaction-id 5000 --purchased "$(day -145)" --expires "$(day -115)" \
    --signed "$(day -145)"
# A failed renewal recovered three days later: a past billing-retry period.
notify --type DID_FAIL_TO_RENEW --transaction-id 5000 --purchased "$(day -145)" --expires "$(day -115)" --billing-retry \
    --signed "$(day -115)"
notify --type DID_RENEW --subtype BILLING_RECOVERY --transaction-id 5001 --purchased "$(day -112)" --expires "$(day -85)" \
    --signed "$(day -112)"
notify --type DID_RENEW --transaction-id 5002 --purchased "$(day -85)" --expires "$(day -55)" --signed "$(day -85)"
notify --type DID_RENEW --transaction-id 5003 --purchased "$(day -55)" --expires "$(day -25)" --signed "$(day -55)"
notify --type REFUND --transaction-id 5002 --purchased "$(day -85)" --expires "$(day -55)" --revoked "$(day -70)" \
    --signed "$(day -70)"
notify --type DID_FAIL_TO_RENEW --subtype GRACE_PERIOD --transaction-id 5003 --purchased "$(day -55)" \
    --expires "$(day -25)" --billing-retry --grace-period-expires "$(day -9)" --signed "$(day -25)"
curl -fsS -o /dev/null -H 'Content-Type: application/json' -d '{"account": "customer-42"}' \
    "$BASE_URL/v1/transactions/5000/claim"
RECEIPTD_DEVICE_ID="$device" RECEIPTD_JWS="$work/transaction.jws" RECEIPTD_LOOKUP=5003 \
    RECEIPTD_LOOKUP_PAST_PERIODS=1 RECEIPTD_LOOKUP_NOTIFICATIONS=7 \
    "$E2E_ROOT/Tests/support-page/browser-test.sh" "$PORT" "$work/valid.der" "$work/invalid.der" \
    "${SCREENSHOT_DIR:-$work/screenshots}"
stop_server
# The browser test against canned verdicts, so a browser test that passes everything would show here.
"$E2E_ROOT/Tests/support-page/self-test.sh"
