#!/usr/bin/env bash
# StoreKit 2 on the command line: `receiptd testing` forges every kind of signed data with the EC chain init-ca
# writes, `receiptd verify` judges it (valid where jws-root.pem is trusted, certificate_untrusted on the defaults),
# `testing notification --post` delivers to a live receiptd as the App Store does, and docs/testing.md's StoreKit 2
# tour runs as written. Verdicts are compared by code and JSON key, never by prose.
#
# Until the server's JWS intake is merged, /v1/notifications answers 404: then the HTTP steps and the tour (which
# needs them) are skipped, saying so, and everything else still runs.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || { echo "test-storekit-cli: jq is required (scripts/install-deps installs it)" >&2; exit 1; }
work="$(mktemp -d)"
cleanup() {
    stop_server || true
    rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
failures=0
json() { # json DESCRIPTION FILTER [FILE]: the jq filter must hold on FILE (default out.txt)
    local file="${3:-out.txt}"
    jq -e "$2" "$file" >/dev/null 2>&1 || { fail "$1: $2"; head -c 600 "$file" | sed 's/^/    /'; echo; }
}
first_line() { # first_line DESCRIPTION TEXT: out.txt's first line is TEXT
    [ "$(head -n 1 out.txt)" = "$2" ] || fail "$1: '$(head -n 1 out.txt)', expected '$2'"
}

R="$RECEIPTD"
device=6D1A2B3C-0000-4000-8000-0123456789AB
other_device=6D1A2B3C-0000-4000-8000-0123456789AC
nonce=0f6b1a2c-1111-4222-8333-444455556666

# --- the test PKI -------------------------------------------------------------------------------------------------
check "init-ca makes both PKIs" 0 "$R" testing init-ca ca
for file in root.pem jws-root.pem jws-intermediate.pem jws-signing.pem jws-signing.key.pem jws-README.txt; do
    [ -s "ca/$file" ] || fail "init-ca did not write $file"
done
contains "init-ca says how to trust the EC chain" err.txt 'jws-root.pem"]'
contains "README.txt names both roots" ca/README.txt '"ca/root.pem", "ca/jws-root.pem"'
check "init-ca refuses to overwrite" 2 "$R" testing init-ca ca
"$R" testing init-ca old-ca 2>/dev/null && rm old-ca/jws-*
cp old-ca/root.pem old-root.pem
check "init-ca completes a PKI made before StoreKit 2" 0 "$R" testing init-ca old-ca
[ -s old-ca/jws-root.pem ] && cmp -s old-root.pem old-ca/root.pem \
    || fail "init-ca on an old PKI: jws-root.pem missing or root.pem replaced"
"$R" testing init-ca attacker-ca 2>/dev/null

cat >config.json <<'JSON'
{
    "trusted_roots": ["ca/root.pem", "ca/jws-root.pem"],
    "apps": [{"bundle_id": "com.example.app", "versions": ["1.0"], "app_apple_id": 1234}],
    "environments": ["Production", "Sandbox"]
}
JSON

# --- a transaction ------------------------------------------------------------------------------------------------
check "forge a transaction" 0 "$R" testing transaction --ca ca --bundle-id com.example.app --transaction-id 1001 \
    --original-transaction-id 1000 --product-id pro.monthly --purchased 2026-01-01T00:00:00Z \
    --expires 2099-01-01T00:00:00Z --signed 2026-01-01T00:00:05Z --ownership FAMILY_SHARED \
    --device-id "$device" --nonce "$nonce" --out transaction.jws
check "verify --json a transaction on its device" 0 "$R" verify transaction.jws --config config.json \
    --device-id "$device" --json
json "the answer's keys, in order" \
    '[keys_unsorted[]] == ["valid", "kind", "environment", "checks", "signed_date", "payload", "transaction",
        "subscriptions"]'
json "transaction fields" '.valid and .kind == "transaction" and .environment == "Production"
    and .signed_date == "2026-01-01T00:00:05Z" and .transaction.transaction_id == "1001"
    and .transaction.original_transaction_id == "1000" and .transaction.product_id == "pro.monthly"
    and .transaction.purchase_date == "2026-01-01T00:00:00Z" and .transaction.expires_date == "2099-01-01T00:00:00Z"
    and .transaction.in_app_ownership_type == "FAMILY_SHARED" and .transaction.revocation_date == null'
json "every check named" \
    '.checks | keys == ["app_apple_id", "bundle_id", "device_hash", "environment", "signature", "version"]'
json "checks of a transaction" '.checks.signature == "passed" and .checks.bundle_id == "passed"
    and .checks.environment == "passed" and .checks.device_hash == "passed"'
json "the payload as signed" '.payload.transactionId == "1001" and .payload.deviceVerificationNonce == "'"$nonce"'"
    and (.payload.purchaseDate | type) == "number"'
json "an active subscription" '.subscriptions == [{"product_id": "pro.monthly", "original_transaction_id": "1000",
    "latest_transaction_id": "1001", "expires_date": "2099-01-01T00:00:00Z", "active": true, "cancelled": false}]'
check "verify prints a summary" 0 "$R" verify transaction.jws --config config.json --device-id "$device"
contains "the summary says VALID" out.txt "VALID"
contains "the summary names the transaction" out.txt "transaction: 1001"
if grep -qiF "$device" out.txt; then fail "the summary shows the device id"; fi
check "another device" 1 "$R" verify transaction.jws --config config.json --device-id "$other_device" --json
json "another device is device_hash_mismatch" \
    '.error.code == "device_hash_mismatch" and .checks.device_hash == "failed"'
check "no device id" 0 "$R" verify transaction.jws --config config.json --json
json "without a device id the check is skipped" '.checks.device_hash == "skipped"'
RECEIPTD_CONFIG="" check "the defaults trust Apple's root only" 1 "$R" verify transaction.jws --json
json "so the test chain is untrusted" '.error.code == "certificate_untrusted" and .checks.signature == "failed"
    and .kind == null and (has("payload") | not)'
check "--bundle-id accepts another app" 1 "$R" verify transaction.jws --config config.json \
    --bundle-id com.example.other --json
json "another app is bundle_id_mismatch" '.error.code == "bundle_id_mismatch"'
check "standard input" 0 sh -c "\"$R\" verify - --config config.json < transaction.jws"
printf '{"jws": "%s"}' "$(cat transaction.jws)" >request.json
check "an app's request body {\"jws\": …}" 0 "$R" verify request.json --config config.json
jws="$(cat transaction.jws)"
signature="${jws##*.}"
flipped="${signature:0:20}$([ "${signature:20:1}" = A ] && echo B || echo A)${signature:21}"
echo "${jws%.*}.$flipped" >tampered.jws
check "a changed signature" 1 "$R" verify tampered.jws --config config.json --json
json "a changed signature is signature_invalid" '.error.code == "signature_invalid"'
check "a one-time purchase" 0 "$R" testing transaction --ca ca --bundle-id com.example.app --product-id coins \
    --product-type Consumable --revoked 2026-02-01T00:00:00Z --out consumable.jws
check "verify it" 0 "$R" verify consumable.jws --config config.json --json
json "no expiry, a revocation, no subscription" '.transaction.expires_date == null
    and .transaction.revocation_date == "2026-02-01T00:00:00Z" and .transaction.revocation_reason == 0
    and .transaction.type == "Consumable" and .subscriptions == []'
check "a transaction forged by another chain" 0 "$R" testing transaction --ca attacker-ca \
    --bundle-id com.example.app --out rogue.jws
check "is untrusted" 1 "$R" verify rogue.jws --config config.json --json
json "certificate_untrusted" '.error.code == "certificate_untrusted"'

# --- renewal info -------------------------------------------------------------------------------------------------
check "forge renewal info" 0 "$R" testing renewal-info --ca ca --original-transaction-id 1000 --product-id pro.monthly \
    --auto-renew false --billing-retry --expires 2099-01-01T00:00:00Z --grace-period-expires 2099-01-17T00:00:00Z \
    --environment Production --out renewal.jws
check "verify --kind renewal_info" 0 "$R" verify renewal.jws --config config.json --kind renewal_info --json
json "renewal info fields" '.kind == "renewal_info" and .environment == "Production"
    and .renewal_info.original_transaction_id == "1000" and .renewal_info.auto_renew_status == false
    and .renewal_info.is_in_billing_retry_period == true and .renewal_info.renewal_date == "2099-01-01T00:00:00Z"
    and .renewal_info.grace_period_expires_date == "2099-01-17T00:00:00Z" and .checks.bundle_id == "skipped"'
check "--kind transaction on renewal info" 1 "$R" verify renewal.jws --config config.json --kind transaction --json
json "is kind_mismatch" '.error.code == "kind_mismatch"'

# --- issue 18: any field forged, the caller's kind, fail-closed claims, damaged JWS ---------------------------------
check "--members and --omit" 0 "$R" testing transaction --ca ca --bundle-id com.example.app \
    --members '{"isUpgraded": true, "price": 9990, "purchaseDate": 1697679936049, "commitmentInfo": {"totalBillingPeriods": 12}}' \
    --omit storefront --out upgraded.jws
check "verify an upgraded transaction" 0 "$R" verify upgraded.jws --config config.json --json
json "every field, as Apple sends it" '.transaction.price == 9990 and .transaction.is_upgraded == true
    and .transaction.purchase_date == "2023-10-19T01:45:36.049Z" and .transaction.storefront == null
    and .transaction.commitment_info == {"total_billing_periods": 12}'
json "an upgraded subscription is not active" '.subscriptions[0].active == false and .subscriptions[0].upgraded == true'
check "a payload of no kind" 0 "$R" testing renewal-info --ca ca --omit originalTransactionId --omit autoRenewProductId \
    --omit productId --omit autoRenewStatus --omit recentSubscriptionStartDate --omit renewalDate --out nokind.jws
check "verify a payload of no kind" 1 "$R" verify nokind.jws --config config.json --json
json "is unknown_kind" '.error.code == "unknown_kind" and .checks.signature == "passed"'
check "verify it --kind renewal_info" 0 "$R" verify nokind.jws --config config.json --kind renewal_info --json
json "read as renewal info" '.valid and .kind == "renewal_info"'
check "a transaction naming no environment" 0 "$R" testing transaction --ca ca --bundle-id com.example.app \
    --omit environment --out noenv.jws
check "verify it" 1 "$R" verify noenv.jws --config config.json --json
json "is environment_not_accepted, missing" '.error.code == "environment_not_accepted" and .error.reason == "missing"'
check "a TEST notification naming no app" 0 "$R" testing notification --ca ca --type TEST --bundle-id com.example.app \
    --omit data.bundleId --out noapp.jws
check "verify it" 1 "$R" verify noapp.jws --config config.json --json
json "is bundle_id_mismatch, missing" '.error.code == "bundle_id_mismatch" and .error.reason == "missing"'
cut -d. -f1,2 upgraded.jws >two-segments.jws
check "a JWS cut to two segments" 1 "$R" verify two-segments.jws --config config.json --json
json "is malformed_jws, segment_count" '.error.code == "malformed_jws" and .error.detail == "segment_count"'

# --- an app transaction, bound to a device ------------------------------------------------------------------------
check "forge an app transaction" 0 "$R" testing app-transaction --ca ca --bundle-id com.example.app \
    --app-apple-id 1234 --app-version 1.0 --original-version 0.9 --environment Production --device-id "$device" \
    --out app.jws
check "on its device" 0 "$R" verify app.jws --config config.json --device-id "$device" --json
json "app transaction fields" '.kind == "app_transaction" and .app_transaction.app_apple_id == 1234
    and .app_transaction.original_application_version == "0.9" and .app_transaction.receipt_type == "Production"
    and .checks.device_hash == "passed" and .checks.app_apple_id == "passed" and .checks.version == "passed"
    and (.payload.deviceVerificationNonce | test("^[0-9a-f-]{36}$"))'
check "on another device" 1 "$R" verify app.jws --config config.json --device-id "$other_device" --json
json "device_hash_mismatch" '.error.code == "device_hash_mismatch"'
check "an app transaction of another app id" 0 "$R" testing app-transaction --ca ca --bundle-id com.example.app \
    --app-apple-id 999 --environment Production --out other-app.jws
check "is refused" 1 "$R" verify other-app.jws --config config.json --json
json "app_apple_id_mismatch" '.error.code == "app_apple_id_mismatch"'
check "a version not accepted" 0 "$R" testing app-transaction --ca ca --bundle-id com.example.app \
    --app-version 2.0 --app-apple-id 1234 --out v2.jws
check "is refused" 1 "$R" verify v2.jws --config config.json --json
json "version_not_accepted" '.error.code == "version_not_accepted"'

# --- notifications ------------------------------------------------------------------------------------------------
uuid=8f1e4b6a-2c3d-4e5f-9a0b-1c2d3e4f5a6b
check "forge a notification" 0 "$R" testing notification --ca ca --type DID_RENEW --subtype BILLING_RECOVERY \
    --bundle-id com.example.app --app-apple-id 1234 --uuid "$uuid" --transaction-id 1002 \
    --original-transaction-id 1000 --expires 2099-02-01T00:00:00Z --out notification.jws
check "verify --kind notification" 0 "$R" verify notification.jws --config config.json --kind notification --json
json "notification fields" '.kind == "notification" and .notification.notification_type == "DID_RENEW"
    and .notification.subtype == "BILLING_RECOVERY" and .notification.notification_uuid == "'"$uuid"'"
    and .notification.bundle_id == "com.example.app" and .notification.status == 1'
json "its nested transaction and renewal info, verified" '.transaction.transaction_id == "1002"
    and .renewal_info.original_transaction_id == "1000" and .renewal_info.renewal_date == "2099-02-01T00:00:00Z"
    and (.payload.data.signedTransactionInfo | split(".") | length) == 3
    and (.payload.data.signedRenewalInfo | split(".") | length) == 3'
json "keys of a notification" '[keys_unsorted[]] == ["valid", "kind", "environment", "checks", "signed_date",
    "payload", "transaction", "renewal_info", "notification", "subscriptions"]'
printf '{"signedPayload": "%s"}' "$(cat notification.jws)" >delivery-body.json
check "Apple's delivery body as copied from a log" 0 "$R" verify delivery-body.json --config config.json --json
json "reads the notification in it" '.notification.notification_uuid == "'"$uuid"'"'
check "a refund notification" 0 "$R" testing notification --ca ca --type REFUND --bundle-id com.example.app \
    --app-apple-id 1234 --revoked 2026-03-01T00:00:00Z --out refund.jws
check "verify it" 0 "$R" verify refund.jws --config config.json --json
json "status revoked, subscription cancelled" '.notification.status == 5 and .subscriptions[0].cancelled == true'
check "a TEST notification" 0 "$R" testing notification --ca ca --type TEST --bundle-id com.example.app \
    --app-apple-id 1234 --out test.jws
check "verify it" 0 "$R" verify test.jws --config config.json --json
json "carries no transaction" '.notification.notification_type == "TEST" and (has("transaction") | not)
    and (.payload.data | has("signedTransactionInfo") | not)'
check "a type Apple has not invented yet" 0 "$R" testing notification --ca ca --type SOMETHING_NEW --subtype ALSO_NEW \
    --bundle-id com.example.app --app-apple-id 1234 --out future.jws
check "is valid" 0 "$R" verify future.jws --config config.json
check "a notification by another chain" 0 "$R" testing notification --ca attacker-ca --type DID_RENEW \
    --bundle-id com.example.app --out rogue-notification.jws
check "is untrusted" 1 "$R" verify rogue-notification.jws --config config.json --json
json "certificate_untrusted" '.error.code == "certificate_untrusted"'
check "a notification for another app" 0 "$R" testing notification --ca ca --type DID_RENEW \
    --bundle-id com.example.other --out other-notification.jws
check "is refused" 1 "$R" verify other-notification.jws --config config.json --json
json "bundle_id_mismatch" '.error.code == "bundle_id_mismatch"'

# --- many files, receipts beside signed data ----------------------------------------------------------------------
"$R" testing receipt --ca ca --bundle-id com.example.app --app-version 1.0 --out receipt.der 2>/dev/null
check "a receipt, unchanged" 0 "$R" verify receipt.der --config config.json --json
json "is a receipt" '.kind == "receipt" and .valid'
check "a receipt under --kind" 1 "$R" verify receipt.der --config config.json --kind transaction --json
json "is kind_mismatch" '.kind == "receipt" and .error.code == "kind_mismatch"'
check "many files as JSON lines" 1 "$R" verify receipt.der transaction.jws rogue.jws --config config.json --json
lines="$(jq -r '"\(.file) \(.kind) \(.valid)"' out.txt | tr '\n' ,)"
[ "$lines" = "receipt.der receipt true,transaction.jws transaction true,rogue.jws null false," ] \
    || fail "JSON lines of many files: $lines"
check "many files end with a summary" 1 "$R" verify receipt.der transaction.jws rogue.jws --config config.json
contains "summary counts valid" out.txt "valid                  2"
contains "summary counts each code" out.txt "certificate_untrusted  1"
check "an unreadable file among them" 2 "$R" verify transaction.jws missing.jws --config config.json

# --- usage errors -------------------------------------------------------------------------------------------------
check "unknown --kind" 2 "$R" verify transaction.jws --kind receipts
contains "the kinds are named" err.txt "renewal_info"
check "--kind receipt of a transaction, as ?kind=receipt" 1 "$R" verify transaction.jws --kind receipt
check "transaction without --ca" 2 "$R" testing transaction --bundle-id com.example.app
check "transaction without --bundle-id" 2 "$R" testing transaction --ca ca
check "a --ca without the EC chain" 2 "$R" testing transaction --ca no-such-ca --bundle-id com.example.app
check "bad environment" 2 "$R" testing transaction --ca ca --bundle-id b --environment Staging
check "bad date" 2 "$R" testing transaction --ca ca --bundle-id b --expires tomorrow
contains "the flag is named" err.txt "--expires"
check "bad ownership" 2 "$R" testing transaction --ca ca --bundle-id b --ownership STOLEN
check "--nonce without --device-id" 2 "$R" testing app-transaction --ca ca --bundle-id b --nonce "$nonce"
check "bad --auto-renew" 2 "$R" testing renewal-info --ca ca --auto-renew maybe
check "renewal info names no app" 2 "$R" testing renewal-info --ca ca --bundle-id b
check "notification without --type" 2 "$R" testing notification --ca ca --bundle-id b
check "bad --uuid" 2 "$R" testing notification --ca ca --type TEST --bundle-id b --uuid 42
check "--post to ftp" 2 "$R" testing notification --ca ca --type TEST --bundle-id b --post ftp://example.com/
check "--post where nothing listens" 1 "$R" testing notification --ca ca --type TEST --bundle-id b \
    --post http://127.0.0.1:9/
check "unknown testing command" 2 "$R" testing subscription
for command in transaction renewal-info app-transaction notification; do
    check "testing $command --help" 0 "$R" testing "$command" --help
    contains "testing $command --help prints its usage" out.txt "USAGE: receiptd testing $command"
done
check "verify --help names --kind" 0 "$R" verify --help
contains "verify --help" out.txt "--kind"

# --- over HTTP ----------------------------------------------------------------------------------------------------
cat >server.json <<'JSON'
{
    "trusted_roots": ["ca/root.pem", "ca/jws-root.pem"],
    "apps": [{"bundle_id": "com.example.app", "versions": ["1.0"]}],
    "store": {"sqlite": "ledger.sqlite"}
}
JSON
start_server "$work/server.json"
route_status="$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
    -d '{}' "$BASE_URL/v1/notifications")"
if [ "$route_status" = 404 ]; then
    echo "SKIP: /v1/notifications answers 404 (the server's JWS intake is not merged): HTTP steps and the docs tour"
else
    status="$(curl -s --max-time 10 -o out.txt -w '%{http_code}' -H 'Content-Type: text/plain' \
        --data-binary @transaction.jws "$BASE_URL/v1/validate")"
    [ "$status" = 200 ] || fail "/v1/validate text/plain JWS: $status"
    json "/v1/validate reads a JWS" '.valid and .kind == "transaction" and .transaction.transaction_id == "1001"'
    status="$(curl -s --max-time 10 -o out.txt -w '%{http_code}' -H 'Content-Type: application/json' \
        -d "{\"jws\": \"$(cat app.jws)\", \"device_id\": \"$other_device\"}" "$BASE_URL/v1/validate")"
    [ "$status" = 422 ] || fail "/v1/validate {jws, device_id} of another device: $status"
    json "another device over HTTP" '.error.code == "device_hash_mismatch"'

    check "--post a notification" 0 "$R" testing notification --ca ca --type DID_RENEW --bundle-id com.example.app \
        --app-apple-id 1234 --uuid "$uuid" --post "$BASE_URL/v1/notifications"
    first_line "--post prints the status" "HTTP 200"
    sed 1d out.txt >answer.json
    json "received" \
        '.received == true and .notification_uuid == "'"$uuid"'" and .notification_type == "DID_RENEW"' answer.json
    check "--post a forged notification" 1 "$R" testing notification --ca attacker-ca --type DID_RENEW \
        --bundle-id com.example.app --post "$BASE_URL/v1/notifications"
    first_line "--post of a forgery prints the status" "HTTP 422"
    sed 1d out.txt >answer.json
    json "refused with the verdict" '.valid == false and .error.code == "certificate_untrusted"' answer.json
fi
stop_server

# --- docs/testing.md's StoreKit 2 tour, as written ----------------------------------------------------------------
if [ "$route_status" != 404 ]; then
    mkdir tour
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    python3 "$E2E_ROOT/Tests/e2e/readme_examples.py" "$E2E_ROOT/docs/testing.md" "$port" "$work/tour" \
        || fail "docs/testing.md's console blocks"
fi

[ "$failures" -eq 0 ] || { echo "test-storekit-cli: $failures failures"; exit 1; }
echo "test-storekit-cli: all checks passed"
