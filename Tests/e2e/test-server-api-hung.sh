#!/usr/bin/env bash
# A hung App Store Server API behind 100 waiting callers (issue #23): lookups that wait on Apple have threads of their
# own, at most server_api.max_concurrent_requests (8) at once, so /v1/validate, notifications and claims answer as
# fast as without them; the 9th and later concurrent lookups get 503 server_api_busy at once; every lookup answers
# within server_api.request_deadline (5 s) + 1 s. Then an Apple that answers 429 with a Retry-After longer than the
# deadline: 503 server_api_busy at once, with Apple's Retry-After.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
. "$HERE/ledger-lib.sh"
unset https_proxy no_proxy all_proxy ALL_PROXY HTTPS_PROXY NO_PROXY

WORK="$(mktemp -d)"
FAKE=""
cleanup() {
    stop_server >/dev/null 2>&1 || true
    [ -z "$FAKE" ] || kill "$FAKE" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK"
failures=0
DEADLINE=5
QUICK=1.0  # seconds: generous for an answer that waits on nothing but the local ledger

mkdir apple
# Only order lookups hang: the notification history sync that `serve` starts with is not what is measured here.
cat >apple/fixture.json <<'JSON'
{"keyId": "ABC123DEFG", "issuerId": "57246542-96fe-1a63-e053-0824d011072a", "bundleId": "com.example.app",
 "always": {"hang": 60, "pathPrefix": "/inApps/v1/lookup/"}}
JSON
python3 "$HERE/fake-app-store-server.py" "$WORK/apple" &
FAKE=$!
for _ in $(seq 100); do [ -f apple/port ] && break; sleep 0.1; done
[ -f apple/port ] || { echo "test-server-api-hung: the fake did not start" >&2; exit 1; }
APPLE_PORT="$(cat apple/port)"

"$RECEIPTD" testing init-ca ca >/dev/null 2>&1
roots='"ca/root.pem"'
[ ! -f ca/jws-root.pem ] || roots='"ca/root.pem", "ca/jws-root.pem"'
cat >receiptd.json <<JSON
{"trusted_roots": [$roots], "environments": ["Production", "Sandbox"], "store": {"sqlite": "ledger.sqlite"},
 "apps": [{"bundle_id": "com.example.app", "versions": [], "shared_secret": null,
           "server_api": {"key_id": "ABC123DEFG", "issuer_id": "57246542-96fe-1a63-e053-0824d011072a",
                          "private_key_file": "apple/key.p8"}}],
 "server_api": {"production_url": "https://localhost:$APPLE_PORT", "sandbox_url": "https://localhost:$APPLE_PORT",
                "ca_file": "apple/ca.pem", "backfill": false}}
JSON
"$RECEIPTD" testing receipt --ca ca --bundle-id com.example.app --app-version 1.0 \
    --device-id 3B76A7BD-8F5B-46A4-BCB1-CCE8DBD1B3CD \
    --purchase "product=pro.monthly,transaction=91001,original=91000,purchased=2026-01-01T00:00:00Z,expires=2099-01-01T00:00:00Z" \
    --out receipt.der 2>/dev/null
have_notification_forge && forge_notification ca notification.json DID_RENEW 6f1d7c2e-0000-4000-8000-000000000001 \
    91002 91000 2026-02-01T00:00:00Z 2099-01-01T00:00:00Z
start_server receiptd.json

# timed NAME CURL-ARGS…: one request; writes "STATUS SECONDS" to NAME.
timed() {
    local name="$1"
    shift
    curl -sS --max-time 30 -o "$name.body" -w '%{http_code} %{time_total}\n' "$@" >"$name" 2>/dev/null \
        || echo "000 99" >"$name"
}
quick() { # quick DESCRIPTION NAME EXPECTED-STATUS
    local status seconds
    read -r status seconds <"$2"
    [ "$status" = "$3" ] || fail "$1 answered $status, expected $3: $(head -c 300 "$2.body")"
    awk -v s="$seconds" -v q="$QUICK" 'BEGIN { exit !(s < q) }' || fail "$1 took ${seconds}s while Apple hung"
}

# --- 100 lookups wait on a hung Apple ------------------------------------------------------------------------------
# One curl making 100 connections at once: 100 processes would mostly measure how fast a loaded machine forks.
mkdir lookups
curl -sS --parallel --parallel-immediate --parallel-max 100 --max-time 30 -o 'lookups/#1.body' \
    -w '%{url} %{http_code} %{time_total}\n' "$BASE_URL/v1/orders/[1-100]" >lookups/answers 2>/dev/null &
LOOKUPS=$!
# Whatever could be admitted now waits on the fake; the rest of the lookups have had their answer or are on the way.
for _ in $(seq 50); do
    [ "$(grep -c '"path": "/inApps/v1/lookup/' apple/requests.jsonl 2>/dev/null || true)" -ge 8 ] && break
    sleep 0.1
done

curl -sS --max-time 5 "$BASE_URL/metrics" >metrics.txt || true
grep -qE '^receiptd_server_api_waiting_requests 8(\.0)?$' metrics.txt \
    || fail "while lookups hung: $(grep waiting_requests metrics.txt || echo 'no receiptd_server_api_waiting_requests')"

timed validate -H 'Content-Type: application/octet-stream' --data-binary @receipt.der "$BASE_URL/v1/validate"
quick "POST /v1/validate" validate 200
timed claim -H 'Content-Type: application/json' -d '{"account": "user-1"}' "$BASE_URL/v1/transactions/91001/claim"
quick "POST /v1/transactions/91001/claim" claim 200
if have_notification_forge; then
    timed notify -H 'Content-Type: application/json' --data-binary @notification.json "$BASE_URL/v1/notifications"
    quick "POST /v1/notifications" notify 200
else
    skip_line "receiptd testing notification is not built: notifications not checked"
fi
timed health "$BASE_URL/healthz"
quick "GET /healthz" health 200

wait "$LOOKUPS" || true
[ "$(wc -l <lookups/answers)" -eq 100 ] || fail "$(wc -l <lookups/answers) of 100 lookups answered"
busy=0 waited=0
while read -r url status seconds; do
    n="${url##*/}"
    code="$(jq -r '.error.code // empty' "lookups/$n.body" 2>/dev/null || true)"
    if [ "$status" = 503 ] && [ "$code" = server_api_busy ]; then
        busy=$((busy + 1))
        awk -v s="$seconds" -v q="$QUICK" 'BEGIN { exit !(s < q) }' \
            || fail "lookup $n was busy only after ${seconds}s, not at once"
    elif [ "$status" = 503 ] && [ "$code" = server_api_unavailable ]; then
        waited=$((waited + 1))
        awk -v s="$seconds" -v d="$DEADLINE" 'BEGIN { exit !(s < d + 1) }' \
            || fail "lookup $n answered after ${seconds}s, past request_deadline ($DEADLINE s) + 1 s"
    else
        fail "lookup $n answered $status $code after ${seconds}s"
    fi
done <lookups/answers
# Lookups that started after the first ones gave up may have been admitted in turn; the point is the bound.
[ "$waited" -ge 8 ] || fail "only $waited lookups waited on Apple, expected server_api.max_concurrent_requests (8)"
[ "$busy" -ge 50 ] || fail "only $busy of 100 concurrent lookups were server_api_busy"
# Each lookup asks Production, then Sandbox with what is left of its one deadline: at most two requests each.
asked="$(grep -c '"path": "/inApps/v1/lookup/' apple/requests.jsonl || true)"
[ "$asked" -le $((2 * waited)) ] || fail "Apple was asked $asked times by $waited lookups that waited on it"

# --- an Apple that rate limits past the deadline ------------------------------------------------------------------
jq '.always = {"status": 429, "retryAfter": "60", "pathPrefix": "/inApps/v1/lookup/"}' apple/fixture.json >apple/fixture.next
mv apple/fixture.next apple/fixture.json
curl -sS --max-time 30 -D limited.headers -o limited.body -w '%{http_code} %{time_total}\n' \
    "$BASE_URL/v1/orders/LIMITED" >limited
quick "GET /v1/orders/LIMITED against a rate-limiting Apple" limited 503
[ "$(jq -r .error.code limited.body)" = server_api_busy ] || fail "rate limited lookup: $(cat limited.body)"
[ "$(jq -r .error.apple_error_code limited.body)" = 4290000 ] || fail "no apple_error_code: $(cat limited.body)"
grep -qi '^Retry-After: 60' limited.headers || fail "no Retry-After: 60 in $(tr -d '\r' <limited.headers)"

stop_server || failures=$((failures + 1))
[ "$failures" -eq 0 ] || { echo "test-server-api-hung: $failures failure(s)" >&2; exit 1; }
echo "test-server-api-hung: ok ($busy busy at once, $waited waited at most ${DEADLINE}+1 s)"
