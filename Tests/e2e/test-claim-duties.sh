#!/usr/bin/env bash
# Runs the ```sh block of docs/server-api.md's "Claims that finish transactions and set app account tokens" exactly as
# written (from the clone's root, after `swift build`) and checks what it prints: the claim answered before Apple was
# called, the fake got Finish Transaction and Set App Account Token with a UUID, and the transaction shows
# `finished_at` with both calls done. Then a Finish Transaction Apple refuses for good: left `failed` with Apple's
# code, listed by `receiptd store status` (text and --json), no `finished_at`, and no token or account in the log.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
cd "$E2E_ROOT"
command -v jq >/dev/null || { echo "test-claim-duties: jq is required (scripts/install-deps installs it)" >&2; exit 1; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export TMPDIR="$WORK"
fail() { cat "$WORK/out" >&2; echo "test-claim-duties: FAIL: $*" >&2; exit 1; }

docs_sh_block docs/server-api.md test-claim-duties.sh >"$WORK/recipe.sh"
[ -s "$WORK/recipe.sh" ] || { echo "test-claim-duties: docs/server-api.md has no recipe for this test" >&2; exit 1; }
timeout 120 bash -euo pipefail "$WORK/recipe.sh" >"$WORK/out" 2>"$WORK/err" \
    || { cat "$WORK/err" >&2; fail "docs/server-api.md's claim duties recipe failed"; }

grep -qx '{"valid":true}' "$WORK/out" || fail "the transaction did not validate"
grep -qx '{"first_claim":true,"finished_at":null,"calls":\[{"kind":"finish_transaction","state":"pending"},{"kind":"set_app_account_token","state":"pending"}\]}' "$WORK/out" \
    || fail "the claim did not answer at once with both calls pending"
grep -qx '{"method":"POST","path":"/inApps/v1/transactions/3001/finish","body":""}' "$WORK/out" \
    || fail "the fake did not get Finish Transaction"
grep -qE '^\{"method":"PUT","path":"/inApps/v1/transactions/3001/appAccountToken","body":"\{\\"appAccountToken\\": ?\\"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\\"\}"\}$' "$WORK/out" \
    || fail "the fake did not get Set App Account Token with a lowercase UUID"
[ "$(grep -c '"path":"/inApps/v1/transactions/3001/' "$WORK/out")" -eq 2 ] || fail "Apple got more than one call of each"
grep -qE '^\{"finished_at":"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}(\.[0-9]{3})?Z","calls":\[\{"kind":"finish_transaction","state":"done"\},\{"kind":"set_app_account_token","state":"done"\}\]\}$' "$WORK/out" \
    || fail "the transaction does not show finished_at with both calls done"
# The recipe stops its server and the fake and removes its temp dir.
[ -z "$(ls -A "$WORK" | grep -v -e '^recipe.sh$' -e '^out$' -e '^err$')" ] \
    || { ls -la "$WORK" >&2; echo "test-claim-duties: the recipe left files behind" >&2; exit 1; }

# Apple refuses Finish Transaction for good: the call is left failed with Apple's code, and `store status` lists it.
R="$E2E_ROOT/.build/debug/receiptd"
T="$WORK/refused"
mkdir -p "$T/apple"
"$R" testing init-ca "$T/ca" >/dev/null 2>&1
echo '{"keyId": "ABC123DEFG", "issuerId": "57246542-96fe-1a63-e053-0824d011072a", "bundleId": "com.example.app",
       "faults": {"/inApps/v1/transactions/3002/finish": [{"status": 400, "errorCode": 4000006}]}}' >"$T/apple/fixture.json"
python3 "$HERE/fake-app-store-server.py" "$T/apple" &
FAKE=$!
SERVER=""
trap 'kill $FAKE ${SERVER:-} 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [ -f "$T/apple/port" ] && break; sleep 0.1; done
APPLE="https://localhost:$(cat "$T/apple/port")"
cat >"$T/receiptd.json" <<JSON
{"trusted_roots": ["ca/jws-root.pem"], "store": {"sqlite": "ledger.sqlite"},
 "apps": [{"bundle_id": "com.example.app", "finish_on_claim": true,
           "server_api": {"key_id": "ABC123DEFG", "issuer_id": "57246542-96fe-1a63-e053-0824d011072a",
                          "private_key_file": "apple/key.p8"}}],
 "server_api": {"production_url": "$APPLE", "sandbox_url": "$APPLE", "ca_file": "apple/ca.pem"}}
JSON
"$R" serve --config "$T/receiptd.json" --port 0 >"$T/server.log" 2>&1 &
SERVER=$!
URL=""
for _ in $(seq 100); do URL=$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$T/server.log") && break; sleep 0.1; done
[ -n "$URL" ] || { cat "$T/server.log" >&2; fail "serve did not start"; }
"$R" testing transaction --ca "$T/ca" --bundle-id com.example.app --environment Production --transaction-id 3002 \
    --product-id coins.100 --product-type Consumable --out "$T/coins.jws"
curl -sS -H 'Content-Type: application/json' -d "{\"jws\": \"$(cat "$T/coins.jws")\"}" "$URL/v1/validate" >/dev/null
curl -sS -H 'Content-Type: application/json' -d '{"account": "user-7"}' "$URL/v1/transactions/3002/claim" >/dev/null
state=""
for _ in $(seq 100); do
    state="$(curl -sS "$URL/v1/transactions/3002" | jq -r '.apple_calls[0].state')"
    [ "$state" = failed ] && break
    sleep 0.1
done
[ "$state" = failed ] || fail "a refused Finish Transaction is $state, not failed"
"$R" store status --config "$T/receiptd.json" >"$WORK/out" || fail "store status failed"
grep -qx 'apple calls: 0 pending, 1 failed' "$WORK/out" || fail "store status does not count the failed call"
grep -q '^apple call failed: finish_transaction 3002 (com.example.app Production) after 1 tries: server_api_rejected: ' \
    "$WORK/out" || fail "store status does not list the failed call"
"$R" store status --config "$T/receiptd.json" --json >"$WORK/out" || fail "store status --json failed"
[ "$(jq -c '.apple_calls | {pending, failed, code: .failed_calls[0].apple_error_code, kind: .failed_calls[0].kind}' "$WORK/out")" \
    = '{"pending":0,"failed":1,"code":4000006,"kind":"finish_transaction"}' ] || fail "store status --json: apple_calls"
[ "$(curl -sS "$URL/v1/transactions/3002" | jq -c .finished_at)" = null ] || fail "a refused finish shows finished_at"
! grep -qi "appAccountToken\|user-7" "$T/server.log" || fail "the server logged a token or an account"
echo "test-claim-duties: ok"
