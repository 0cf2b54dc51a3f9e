#!/usr/bin/env bash
# A served SQLite ledger remembers subscriptions between its own writes; `receiptd store sync` writes to the same file
# from another process while serve runs. Here serve records a subscription (a notification), answers it twice (so
# that it answers from memory), then `store sync --refunds` takes the refund from the fake Apple's refund history:
# serve's next answer must show the refund, not the subscription it remembered as active.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
. "$HERE/ledger-lib.sh"
unset https_proxy no_proxy all_proxy ALL_PROXY HTTPS_PROXY NO_PROXY

WORK="$(mktemp -d)"
FAKE=""
cleanup() {
    local status=$?
    set +e
    [ -z "${RECEIPTD_PID:-}" ] || stop_server || status=1
    [ -z "$FAKE" ] || kill "$FAKE" 2>/dev/null
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "test-ledger-foreign-writer: FAIL: $*" >&2; exit 1; }
cd "$WORK"
days_ago() { date -u -d "-$1 days" +%Y-%m-%dT%H:%M:%SZ; }
days_ahead() { date -u -d "+$1 days" +%Y-%m-%dT%H:%M:%SZ; }

# A monthly subscription bought 10 days ago (a Sandbox notification) and Apple's refund of it, signed yesterday.
make_ledger_world "$WORK" '{"sqlite": "ledger.sqlite"}'
forge_notification ca subscribed.json SUBSCRIBED 8a0b6a3e-0f4c-4d2e-9b1a-3c5d7e9f1a2b 3001 3001 "$(days_ago 10)" \
    "$(days_ahead 20)"
"$RECEIPTD" testing transaction --ca ca --bundle-id com.example.app --environment Sandbox --transaction-id 3001 \
    --original-transaction-id 3001 --product-id pro.monthly --purchased "$(days_ago 10)" --expires "$(days_ahead 20)" \
    --revoked "$(days_ago 1)" --signed "$(days_ago 1)" --out refunded.jws

mkdir apple
python3 - <<'PY'
import json
json.dump({"keyId": "ABC123DEFG", "issuerId": "57246542-96fe-1a63-e053-0824d011072a", "bundleId": "com.example.app",
           "refunds": {"3001": [open("refunded.jws").read().strip()]}}, open("apple/fixture.json", "w"))
PY
python3 "$HERE/fake-app-store-server.py" "$WORK/apple" &
FAKE=$!
for _ in $(seq 100); do [ -f apple/port ] && break; sleep 0.1; done
[ -f apple/port ] || fail "the fake App Store Server API did not start"

# serve has no server_api (it syncs nothing itself); the command line's config adds it, on the same file.
jq --arg url "https://localhost:$(cat apple/port)" '.apps[0].app_apple_id = 1234
    | .apps[0].server_api = {"key_id": "ABC123DEFG", "issuer_id": "57246542-96fe-1a63-e053-0824d011072a",
                             "private_key_file": "apple/key.p8"}
    | .server_api = {"production_url": $url, "sandbox_url": $url, "ca_file": "apple/ca.pem", "backfill": false}' \
    receiptd.json >cli.json

start_server receiptd.json
[ "$(post_notification "$BASE_URL" subscribed.json)" = "200 false" ] || fail "serve did not record the subscription"

# subscription: "STATUS REVOKED-AT" of serve's answer for 3001 (REVOKED-AT null while not refunded).
subscription() {
    curl -sS --max-time 10 "$BASE_URL/v1/subscriptions/3001" | jq -r '"\(.status) \(.transactions[0].revocation_date)"'
}
first="$(subscription)"
[ "$first" = "$(subscription)" ] || fail "serve's two answers before the sync differ"
[[ "$first" == *" null" ]] || fail "3001 is refunded before the sync: $first"

"$RECEIPTD" store sync --refunds --environment Sandbox --config cli.json >sync.out 2>sync.err \
    || { cat sync.out sync.err >&2; fail "store sync --refunds failed"; }
grep -q 'refunds: 1 read, 1 new' sync.out || { cat sync.out sync.err >&2; fail "store sync did not take the refund"; }

after="$(subscription)"
[[ "$after" != *" null" ]] || fail "serve still answers 3001 as before the sync's refund: $after"
[ "$after" != "$first" ] || fail "serve's answer did not change after the sync's refund: $after"
echo "test-ledger-foreign-writer: ok ($first -> $after)"
