#!/usr/bin/env bash
# Does receiptd send Apple what Apple's own library sends? Drives every App Store Server API call receiptd makes
# (its commands and routes, against the capturing fake), then the same calls through Apple's Python library
# (app-store-server-library, pinned) with the same key and inputs, and compares each request: method, path, query,
# headers, body JSON (names, types, members left out), the bearer token's header, claims and lifetime (both verified
# by the fake with the key's public half). Then the offer signatures (POST /v1/offers/… and `receiptd offers sign`)
# against the library's creators, and Apple's extension refusals (4030004/4030005/4030007) as receiptd answers them.
# Needs python3 (venv), PyPI or E2E_VENV with the pins, curl and jq.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
. "$HERE/python-env.sh"
command -v jq >/dev/null || { echo "test-apple-library-parity: jq is required (scripts/install-deps installs it)" >&2; exit 1; }

WORK="$(mktemp -d)"
FAKE=""
trap 'stop_server >/dev/null 2>&1 || true; [ -z "$FAKE" ] || kill "$FAKE" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
fail() { echo "test-apple-library-parity: FAIL: $*" >&2; exit 1; }

# Apple's library and what it needs, pinned: a new release is compared on purpose, not by chance.
e2e_python_venv "$WORK/venv" app-store-server-library==3.1.2 PyJWT==2.15.1 cryptography==50.0.2 requests==2.34.2 \
    cattrs==26.2.1 attrs==26.1.0 >/dev/null || fail "could not install Apple's Python library"

R="$RECEIPTD"
T="$WORK/t"
mkdir -p "$T/apple"
"$R" testing init-ca "$T/ca" >/dev/null 2>&1
sub() { # sub ID OUT [flags…]: a monthly subscription transaction signed by the test PKI
    local id="$1" out="$2"
    shift 2
    "$R" testing transaction --ca "$T/ca" --bundle-id com.example.app --environment Production --transaction-id "$id" \
        --product-id pro.monthly --members '{"subscriptionGroupIdentifier": "21000001"}' "$@" --out "$T/$out"
}
sub 3001 bought.jws --purchased 2026-01-01T00:00:00Z --expires 2099-01-01T00:00:00Z
sub 3001 extended.jws --purchased 2026-01-01T00:00:00Z --expires 2099-01-08T00:00:00Z
for id in 3002 3003 3004 3005 3006 3007; do sub "$id" "bought-$id.jws" --purchased 2026-01-01T00:00:00Z --expires 2099-01-01T00:00:00Z; done
"$R" testing renewal-info --ca "$T/ca" --original-transaction-id 3001 --out "$T/renewal.jws"
"$R" testing transaction --ca "$T/ca" --bundle-id com.example.app --environment Production --transaction-id 4001 \
    --product-id coins.100 --product-type Consumable --out "$T/coins.jws"
"$R" testing app-transaction --ca "$T/ca" --bundle-id com.example.app --app-apple-id 1234 --out "$T/app-transaction.jws"
"$R" testing notification --ca "$T/ca" --type TEST --bundle-id com.example.app --app-apple-id 1234 \
    --environment Production --out "$T/test-notification.jws"

python3 - "$T" <<'PY'
import json, sys
t = sys.argv[1]
read = lambda name: open(t + "/" + name).read().strip()
status = {"status": 1, "originalTransactionId": "3001", "signedTransactionInfo": read("extended.jws"),
          "signedRenewalInfo": read("renewal.jws")}
json.dump({"keyId": "ABC123DEFG", "issuerId": "57246542-96fe-1a63-e053-0824d011072a", "bundleId": "com.example.app",
           "capture": True,
           "transactions": {"3001": [read("bought.jws")], "4001": [read("coins.jws")]},
           "subscriptions": {"3001": [{"subscriptionGroupIdentifier": "21000001", "lastTransactions": [status]}]},
           "orders": {"MQR7Z2JTKS": [read("bought.jws")]}, "refunds": {"3001": []},
           "appTransactions": {"3001": read("app-transaction.jws")}, "testNotification": read("test-notification.jws"),
           # Apple's refusals of an extension: not eligible, the yearly limit, Family Sharing.
           "extensions": {"3001": {"effectiveDate": 4071513600000}, "3002": {"errorCode": 4030004},
                          "3003": {"errorCode": 4030005}, "3004": {"errorCode": 4030007}},
           # Apple's other answers: a wrong day count, an original transaction it does not know, and down for good.
           "faults": {"/inApps/v1/subscriptions/extend/3005": [{"status": 400, "errorCode": 4000009}],
                      "/inApps/v1/subscriptions/extend/3006": [{"status": 404, "errorCode": 4040005}],
                      "/inApps/v1/subscriptions/extend/3007": [{"status": 500, "errorCode": 5000000}] * 8},
           "massStatusPolls": 2},
          open(t + "/apple/fixture.json", "w"))
PY
python3 "$HERE/fake-app-store-server.py" "$T/apple" &
FAKE=$!
for _ in $(seq 150); do [ -f "$T/apple/port" ] && break; sleep 0.1; done
[ -f "$T/apple/port" ] || fail "the fake App Store Server API did not start"
APPLE="https://localhost:$(cat "$T/apple/port")"
cat >"$T/receiptd.json" <<JSON
{"trusted_roots": ["ca/jws-root.pem"], "store": {"sqlite": "ledger.sqlite"},
 "apps": [{"bundle_id": "com.example.app", "app_apple_id": 1234, "finish_on_claim": true,
           "write_app_account_tokens": true,
           "server_api": {"key_id": "ABC123DEFG", "issuer_id": "57246542-96fe-1a63-e053-0824d011072a",
                          "private_key_file": "apple/key.p8"}}],
 "server_api": {"production_url": "$APPLE", "sandbox_url": "$APPLE", "ca_file": "apple/ca.pem"}}
JSON
start_server "$T/receiptd.json"
URL="$BASE_URL"
post() { curl -sS --max-time 30 -H 'Content-Type: application/json' "$@"; }

# 1. receiptd makes every call it makes, through its routes and commands.
for jws in bought.jws bought-3002.jws bought-3003.jws bought-3004.jws bought-3005.jws bought-3006.jws bought-3007.jws \
    coins.jws; do  # backfill: history, statuses
    post -d "{\"jws\": \"$(cat "$T/$jws")\"}" "$URL/v1/validate" | jq -e .valid >/dev/null || fail "$jws did not validate"
done
post -d '{"account": "user-42"}' "$URL/v1/transactions/4001/claim" >/dev/null  # Finish Transaction, Set App Account Token
"$R" testing notification --ca "$T/ca" --type CONSUMPTION_REQUEST --bundle-id com.example.app --app-apple-id 1234 \
    --environment Production --transaction-id 4001 --product-id coins.100 --product-type Consumable \
    --members '{"data": {"consumptionRequestReason": "UNINTENDED_PURCHASE"}}' --post "$URL/v1/notifications" >/dev/null
curl -sS --max-time 30 -X PUT -H 'Content-Type: application/json' "$URL/v1/transactions/4001/consumption" \
    -d '{"customer_consented": true, "delivery_status": "DELIVERED", "consumption_percentage": 25000, "refund_preference": "GRANT_PRORATED", "sample_content_provided": false}' >/dev/null
post -d '{"days": 3, "reason": "customer_satisfaction"}' "$URL/v1/subscriptions/3001/extend" | jq -e .effective_date >/dev/null \
    || fail "the extension of 3001 failed"
# Apple's error bodies as receiptd answers them: ID APPLE-CODE STATUS CODE (a refusal's message names Apple's code).
while read -r id code want_status want_code; do
    status="$(post -o "$WORK/refusal.json" -w '%{http_code}' -d '{"days": 3, "reason": "other"}' "$URL/v1/subscriptions/$id/extend")"
    answer="$(jq -c '.error | [.code, .apple_error_code]' "$WORK/refusal.json")"
    [ "$status $answer" = "$want_status [\"$want_code\",$code]" ] \
        || fail "Apple's $code for $id: receiptd answered $status $(cat "$WORK/refusal.json"), not $want_status $want_code"
    [ "$want_code" != extension_refused ] || jq -r .error.message "$WORK/refusal.json" | grep -q "Apple: $code" \
        || fail "the answer to Apple's $code does not explain it"
    echo "same  Apple's $code to Extend a Subscription Renewal Date: receiptd answers $status $want_code"
done <<'CASES'
3002 4030004 422 extension_refused
3003 4030005 422 extension_refused
3004 4030007 422 extension_refused
3005 4000009 422 extension_refused
3006 4040005 422 extension_refused
3007 5000000 503 server_api_unavailable
CASES
"$R" lookup transaction 3001 --config "$T/receiptd.json" >/dev/null
"$R" lookup order MQR7Z2JTKS --config "$T/receiptd.json" >/dev/null
"$R" lookup app-transaction 3001 --config "$T/receiptd.json" >/dev/null
"$R" store sync --refunds --environment Production --config "$T/receiptd.json" >/dev/null
"$R" subscriptions extend-all --product pro.monthly --days 5 --reason service_issue_or_outage --storefront USA \
    --storefront CAN --environment Production --poll-interval 0.2 --config "$T/receiptd.json" >/dev/null
# The fake never posts the TEST notification: the command gives up after a second, having asked for its status.
"$R" notifications test --app com.example.app --timeout 1 --config "$T/receiptd.json" >/dev/null 2>&1 || true
for _ in $(seq 100); do  # the claim's calls and the consumption answer go out in the background
    grep -q '/finish"' "$T/apple/requests.jsonl" && grep -q '/appAccountToken"' "$T/apple/requests.jsonl" \
        && grep -q '/inApps/v2/transactions/consumption/' "$T/apple/requests.jsonl" && break
    sleep 0.1
done

# 2. The offers, through the routes and the command line.
offer() { post -d "$2" "$URL/v1/offers/$1"; }
python3 - "$WORK/offers.json" \
    "$(offer promotional '{"bundle_id": "com.example.app", "product_id": "pro.monthly", "offer_identifier": "WINBACK", "transaction_id": "3001"}')" \
    "$(offer promotional '{"bundle_id": "com.example.app", "product_id": "pro.monthly", "offer_identifier": "WINBACK"}')" \
    "$(offer promotional '{"bundle_id": "com.example.app", "product_id": "pro.monthly", "offer_identifier": "WINBACK", "version": 1, "app_account_token": "7E3FB20B-4CDB-47CC-936D-99D65F608138"}')" \
    "$(offer promotional '{"bundle_id": "com.example.app", "product_id": "pro.monthly", "offer_identifier": "WINBACK", "version": 1}')" \
    "$(offer introductory-eligibility '{"bundle_id": "com.example.app", "product_id": "pro.monthly", "transaction_id": "3001", "allow_introductory_offer": true}')" \
    "$(offer introductory-eligibility '{"bundle_id": "com.example.app", "product_id": "pro.monthly", "transaction_id": "3001"}')" \
    "$("$R" offers sign promotional --config "$T/receiptd.json" --bundle-id com.example.app --product-id pro.monthly --offer-id WINBACK --transaction-id 3001)" \
    "$("$R" offers sign promotional --config "$T/receiptd.json" --bundle-id com.example.app --product-id pro.monthly --offer-id WINBACK --version 1 --app-account-token 7e3fb20b-4cdb-47cc-936d-99d65f608138)" \
    "$("$R" offers sign introductory-eligibility --config "$T/receiptd.json" --bundle-id com.example.app --product-id pro.monthly --transaction-id 9999)" \
    <<'PY'
import json, sys
promo = {"product_id": "pro.monthly", "offer_identifier": "WINBACK"}
token = {"app_account_token": "7e3fb20b-4cdb-47cc-936d-99d65f608138"}
inputs = [("POST /v1/offers/promotional v2", "promotional-v2", dict(promo, transaction_id="3001")),
          ("POST /v1/offers/promotional v2 without transaction", "promotional-v2", promo),
          ("POST /v1/offers/promotional v1", "promotional-v1", dict(promo, **token)),
          ("POST /v1/offers/promotional v1 without token", "promotional-v1", promo),
          ("POST /v1/offers/introductory-eligibility", "eligibility", {"product_id": "pro.monthly", "transaction_id": "3001"}),
          ("POST /v1/offers/introductory-eligibility decided by the ledger", "eligibility",
           {"product_id": "pro.monthly", "transaction_id": "3001"}),
          ("receiptd offers sign promotional", "promotional-v2", dict(promo, transaction_id="3001")),
          ("receiptd offers sign promotional --version 1", "promotional-v1", dict(promo, **token)),
          ("receiptd offers sign introductory-eligibility", "eligibility", {"product_id": "pro.monthly", "transaction_id": "9999"})]
answers = {}
for (name, kind, given), text in zip(inputs, sys.argv[2:]):
    answer = json.loads(text)
    if kind == "eligibility":
        given = dict(given, allow_introductory_offer=answer["allow_introductory_offer"])
    answers[name] = {"kind": kind, "input": given, "answer": answer}
json.dump(answers, open(sys.argv[1], "w"))
PY
stop_server

# 3. The same calls through Apple's library, compared.
mv "$T/apple/requests.jsonl" "$T/apple/receiptd.jsonl"
rm -f "$T/apple/state.json"
status=0
REQUESTS_CA_BUNDLE="$T/apple/ca.pem" timeout 120 "$E2E_PYTHON" "$HERE/apple-library-parity.py" calls "$T/apple" || status=1
timeout 60 "$E2E_PYTHON" "$HERE/apple-library-parity.py" offers "$T/apple" "$WORK/offers.json" || status=1
[ "$status" -eq 0 ] || fail "receiptd and Apple's library differ (above: receiptd's value, then the library's)"
echo "test-apple-library-parity: ok (User-Agent differs by design: receiptd vs app-store-server-library/python/3.1.2)"
