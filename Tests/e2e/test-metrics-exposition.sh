#!/usr/bin/env bash
# GET /metrics after requests of every kind (receipts valid and not, a StoreKit 2 JWS, /verifyReceipt, a notification,
# the ledger's lookups, Apple's Server API through the fake, a path that does not exist) parses with Prometheus' own
# text parser (promtool; its naming advice is shown, not failed on), and every metric receiptd has exposed keeps its
# name, type and label names.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
command -v promtool >/dev/null || { echo "test-metrics-exposition: promtool is missing (scripts/install-deps --test)" >&2; exit 1; }
unset https_proxy no_proxy all_proxy ALL_PROXY HTTPS_PROXY NO_PROXY

work="$(mktemp -d)"
FAKE=""
cleanup() {
    stop_server >/dev/null 2>&1 || true
    [ -z "$FAKE" ] || kill "$FAKE" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
failures=0
R="$RECEIPTD"

mkdir apple
echo '{"keyId": "ABC123DEFG", "issuerId": "57246542-96fe-1a63-e053-0824d011072a", "bundleId": "com.example.app"}' \
    >apple/fixture.json
python3 "$HERE/fake-app-store-server.py" apple &
FAKE=$!
for _ in $(seq 100); do [ -f apple/port ] && break; sleep 0.1; done
[ -f apple/port ] || { echo "test-metrics-exposition: the fake App Store Server API did not start" >&2; exit 1; }

"$R" testing init-ca ca 2>/dev/null
cat >receiptd.json <<JSON
{
    "trusted_roots": ["ca/root.pem", "ca/jws-root.pem"],
    "apps": [{"bundle_id": "com.example.app", "versions": ["1.0"], "shared_secret": "s3cret",
              "server_api": {"key_id": "ABC123DEFG", "issuer_id": "57246542-96fe-1a63-e053-0824d011072a",
                             "private_key_file": "apple/key.p8"}}],
    "environments": ["Production"],
    "store": {"sqlite": "ledger.sqlite"},
    "server_api": {"production_url": "https://localhost:$(cat apple/port)", "ca_file": "apple/ca.pem", "timeout": 3}
}
JSON
"$R" testing receipt --ca ca --bundle-id com.example.app --app-version 1.0 --out good.der 2>/dev/null
"$R" testing receipt --ca ca --bundle-id com.example.other --app-version 1.0 --out other.der 2>/dev/null
"$R" testing transaction --ca ca --bundle-id com.example.app --transaction-id 1001 --original-transaction-id 1000 \
    --out transaction.jws 2>/dev/null

start_server "$work/receiptd.json"
request() { # request EXPECTED-STATUS CURL-ARGS...
    local expected="$1"
    shift
    local status
    status="$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$@")"
    [ "$status" = "$expected" ] || fail "curl $*: status $status, expected $expected"
}
request 200 "$BASE_URL/healthz"
request 200 "$BASE_URL/readyz"
request 200 -H 'Content-Type: application/octet-stream' --data-binary @good.der "$BASE_URL/v1/validate"
request 422 -H 'Content-Type: application/octet-stream' --data-binary @other.der "$BASE_URL/v1/validate"
request 200 -H 'Content-Type: text/plain' --data-binary @transaction.jws "$BASE_URL/v1/validate"
request 200 -H 'Content-Type: application/json' \
    -d "{\"receipt-data\": \"$(base64 -w0 good.der)\", \"password\": \"s3cret\"}" "$BASE_URL/verifyReceipt"
"$R" testing notification --ca ca --type DID_RENEW --bundle-id com.example.app --original-transaction-id 1000 \
    --post "$BASE_URL/v1/notifications" >/dev/null 2>&1 || fail "posting a notification"
request 200 "$BASE_URL/v1/subscriptions/1000"
request 200 "$BASE_URL/v1/transactions/1001"
request 404 "$BASE_URL/v1/orders/NOSUCHORDER"
request 404 "$BASE_URL/no/such/path"
# The sync of Apple's notification history starts with the server; its gauge appears once it has finished.
for _ in $(seq 100); do
    curl -s --max-time 10 "$BASE_URL/metrics" >exposition.txt
    grep -q '^receiptd_server_api_last_sync_age_seconds{' exposition.txt && break
    sleep 0.1
done
request 200 "$BASE_URL/metrics"
curl -s --max-time 10 "$BASE_URL/metrics" >exposition.txt

# promtool exits 1 when the text does not parse, 3 when it parses but lints (names, missing HELP): advice only.
status=0
promtool check metrics <exposition.txt >promtool.txt 2>&1 || status=$?
if [ "$status" -ne 0 ] && [ "$status" -ne 3 ] || grep -q 'error while linting' promtool.txt; then
    fail "promtool cannot parse /metrics (exit $status):"
    head -n 10 promtool.txt | sed 's/^/    /'
elif [ -s promtool.txt ]; then
    echo "promtool's advice (not a failure):"
    sed 's/^/    /' promtool.txt
fi

# Every family: its TYPE, and the label names of its series (le aside) in order, from Prometheus' text format.
expect_family() { # expect_family NAME TYPE LABEL-NAMES
    local name="$1" type="$2" labels="$3"
    grep -qx "# TYPE $name $type" exposition.txt || fail "$name: no '# TYPE $name $type'"
    grep -q "^# HELP $name " exposition.txt || fail "$name: no HELP line"
    local series
    series="$(grep -E "^${name}(_bucket|_sum|_count)?[{ ]" exposition.txt || true)"
    [ -n "$series" ] || { fail "$name: no series"; return; }
    local seen
    seen="$(sed -E 's/^[^{ ]*//; s/ [^ ]*$//; s/="([^"\\]|\\.)*"//g; s/[{}]//g; s/(^|,)le($|,)/\1/; s/,$//' <<<"$series" \
        | sort -u | tr '\n' ';')"
    [ "$seen" = "$labels;" ] || fail "$name: label names '$seen', expected '$labels;'"
}
expect_family receiptd_http_requests_total counter route,status
expect_family receiptd_validations_total counter result
expect_family receiptd_verdicts_total counter kind,result
expect_family receiptd_request_duration_seconds histogram ""
expect_family receiptd_notification_conflicts_total counter ""
expect_family receiptd_open_connections gauge ""
expect_family receiptd_server_api_requests_total counter endpoint,outcome
expect_family receiptd_server_api_last_sync_age_seconds gauge app,environment
# The consumption sender counts Apple's refund questions at its first round: every state, 0 here.
expect_family receiptd_consumption_requests gauge state
grep -qxF 'receiptd_consumption_requests{state="open"} 0.0' exposition.txt || fail "no open refund questions counted"
# Without webhooks only the histogram has series; the other webhook families are named, with no sample.
expect_family receiptd_webhook_delivery_seconds histogram ""
for name in receiptd_webhook_deliveries_total receiptd_webhook_pending receiptd_webhook_oldest_pending_seconds; do
    grep -q "^# TYPE $name " exposition.txt || fail "$name: no TYPE line"
done

# What the requests above did, as series a dashboard reads.
for series in \
    'receiptd_http_requests_total{route="/v1/validate",status="200"} 2' \
    'receiptd_http_requests_total{route="/v1/validate",status="422"} 1' \
    'receiptd_http_requests_total{route="unmatched",status="404"} 1' \
    'receiptd_validations_total{result="valid"} 2' \
    'receiptd_validations_total{result="bundle_id_mismatch"} 1' \
    'receiptd_verdicts_total{kind="transaction",result="valid"} 1' \
    'receiptd_verdicts_total{kind="notification",result="valid"} 1' \
    'receiptd_notification_conflicts_total 0'; do
    grep -qxF "$series" exposition.txt || fail "no line '$series'"
done
grep -qE '^receiptd_server_api_requests_total\{endpoint="look_up_order_id",outcome="[a-z_]+"\} 1$' exposition.txt \
    || fail "no look_up_order_id request to Apple counted"
grep -qE '^receiptd_server_api_last_sync_age_seconds\{app="com.example.app",environment="Production"\} [0-9]+(\.[0-9]+)?$' \
    exposition.txt || fail "no sync age for com.example.app in Production"
# Today's bucket boundaries, in seconds, whatever their spelling (1 or 1.0).
bounds="$(sed -nE 's/^receiptd_request_duration_seconds_bucket\{le="([^"]+)"\} [0-9]+$/\1/p' exposition.txt \
    | awk '{ if ($1 == "+Inf") print $1; else printf "%g\n", $1 }' | tr '\n' ' ')"
[ "$bounds" = "0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 +Inf " ] \
    || fail "request duration buckets: $bounds"

stop_server || fail "receiptd did not stop cleanly"
if [ "$failures" -ne 0 ]; then
    echo "test-metrics-exposition: $failures failures; /metrics was:"
    head -n 80 exposition.txt | sed 's/^/    /'
    exit 1
fi
echo "test-metrics-exposition: all checks passed"
