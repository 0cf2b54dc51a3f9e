#!/usr/bin/env bash
# Accounts (issue 24) against the real server: docs/accounts.md's worked example run exactly as written (receiptd on
# the PATH, from the clone's root) and its output compared with the page's; then, on a server with api_tokens, a
# Sandbox notification carrying a registered token linked on arrival, accounts:write and ledger:read enforced, a
# restore under keep_with_original refused, the lookup box's account page, and `receiptd accounts show --json` equal
# to the route's answer, `accounts delete` of an unknown account exit 1.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
. "$HERE/ledger-lib.sh"
DOC="$E2E_ROOT/docs/accounts.md"

WORK="$(mktemp -d)"
cleanup() {
    local status=$?
    set +e
    [ -z "${RECEIPTD_PID:-}" ] || stop_server || status=1
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "test-accounts: FAIL: $*" >&2; exit 1; }

# block LANG: the one ```LANG block of docs/accounts.md.
block() { awk -v fence="\`\`\`$1" '/^```/ { if (inside) { inside = 0; next } if ($0 == fence) { inside = 1; next } } inside' "$DOC"; }
[ "$(grep -c '^```sh$' "$DOC")" -eq 1 ] || fail "docs/accounts.md no longer has one sh block: update this test"
! grep -qE '^```(bash|shell|console)$' "$DOC" || fail "docs/accounts.md has a shell block this test does not run"

echo "== docs/accounts.md, the worked example"
block sh >"$WORK/example.sh"
block text >"$WORK/expected.txt"
mkdir -p "$WORK/tmp"
(cd "$E2E_ROOT" && PATH="$(cd "$(dirname "$RECEIPTD")" && pwd):$PATH" TMPDIR="$WORK/tmp" \
    timeout 120 bash -euo pipefail "$WORK/example.sh") >"$WORK/actual.txt" 2>"$WORK/example.err" \
    || { cat "$WORK/example.err" >&2; fail "the worked example failed"; }
diff -u "$WORK/expected.txt" "$WORK/actual.txt" >&2 || fail "the worked example printed other lines than the page shows"
[ -z "$(find "$WORK/tmp" -mindepth 1)" ] || fail "the worked example left files behind"

echo "== a served ledger with api_tokens and keep_with_original"
make_ledger_world "$WORK/world" '{"sqlite": "ledger.sqlite"}'
"$RECEIPTD" token new --name writer --scopes accounts:write,ledger:read,support >"$WORK/writer.txt"
"$RECEIPTD" token new --name reader --scopes ledger:read >"$WORK/reader.txt"
WRITER="$(sed -n 's/^token: //p' "$WORK/writer.txt")"
READER="$(sed -n 's/^token: //p' "$WORK/reader.txt")"
entries="$(sed -n 's/^api_tokens entry: //p' "$WORK/writer.txt" "$WORK/reader.txt" | paste -sd, -)"
jq ".api_tokens = [$entries] | .apps[0].entitlements = {\"pro\": [\"pro.monthly\"]}
    | .apps[0].restore_behavior = \"keep_with_original\"" "$WORK/world/receiptd.json" >"$WORK/world/accounts.json"
start_server "$WORK/world/accounts.json"

# call TOKEN METHOD PATH [curl args…]: prints "STATUS BODY".
call() {
    local token="$1" method="$2" path="$3"
    shift 3
    curl -sS --max-time 10 -w '\n%{http_code}' -X "$method" -H "Authorization: Bearer $token" "$@" "$BASE_URL$path" \
        | { read -r -d '' answer || true; printf '%s %s\n' "${answer##*$'\n'}" "${answer%$'\n'*}"; }
}

TOKEN=0b5c8d3e-1f2a-4b6c-9d7e-8f9a0b1c2d3e
[ "$(call "$READER" PUT "/v1/accounts/alice/app_account_tokens/$TOKEN" | cut -d' ' -f1)" = 403 ] \
    || fail "a ledger:read token registered a token"
answer="$(call "$WRITER" PUT "/v1/accounts/alice/app_account_tokens/$TOKEN")"
[ "${answer%% *}" = 200 ] || fail "registering a token: $answer"

forge_notification "$WORK/world/ca" "$WORK/subscribed.json" SUBSCRIBED 1e2a0c3b-0000-4000-8000-000000000001 5001 5001 \
    2026-01-01T00:00:00Z 2099-01-01T00:00:00Z --transaction-members "{\"appAccountToken\": \"$TOKEN\"}"
[ "$(post_notification "$BASE_URL" "$WORK/subscribed.json")" = "200 false" ] || fail "the notification was not stored"
answer="$(call "$READER" GET /v1/accounts/alice)"
[ "${answer%% *}" = 200 ] || fail "GET the account: $answer"
[ "$(jq -c '[.entitlements.pro.active, [.purchases[].transaction_id]]' <<<"${answer#* }")" = '[true,["5001"]]' ] \
    || fail "the notification's purchase is not alice's: ${answer#* }"

jws="$("$RECEIPTD" testing transaction --ca "$WORK/world/ca" --bundle-id com.example.app --environment Sandbox \
    --transaction-id 5001 --purchased 2026-01-01T00:00:00Z --expires 2099-01-01T00:00:00Z)"
answer="$(call "$WRITER" POST /v1/accounts/bob/purchases -H 'Content-Type: application/json' -d "{\"jws\": \"$jws\"}")"
[ "${answer%% *}" = 409 ] && [ "$(jq -r .error.code <<<"${answer#* }")" = owned_by_another_account ] \
    || fail "bob's restore under keep_with_original: $answer"
! grep -q alice <<<"$answer" || fail "the refusal names the other account: $answer"
[ "$(call "$READER" GET /v1/accounts/bob | cut -d' ' -f1)" = 404 ] || fail "bob exists after a refused post"

page="$(curl -sS --max-time 10 -H "Authorization: Bearer $WRITER" "$BASE_URL/lookup?account=alice")"
grep -q 'data-matched="account"' <<<"$page" && grep -q 'data-entitlement="pro" data-active="true"' <<<"$page" \
    && grep -q 'class="purchases"' <<<"$page" && grep -q 'svg' <<<"$page" \
    || fail "the lookup box's account page lacks the entitlement, timeline or purchases"

echo "== receiptd accounts show and delete"
route="$(call "$READER" GET '/v1/accounts/alice?at=2026-06-01T00:00:00Z')"
"$RECEIPTD" accounts show alice --json --at 2026-06-01T00:00:00Z --config "$WORK/world/accounts.json" >"$WORK/show.json"
[ "$(jq -cS . "$WORK/show.json")" = "$(jq -cS . <<<"${route#* }")" ] || fail "accounts show --json differs from the route"
status=0
"$RECEIPTD" accounts delete nobody --config "$WORK/world/accounts.json" 2>"$WORK/delete.err" || status=$?
[ "$status" = 1 ] && grep -q account_not_found "$WORK/delete.err" || fail "deleting an unknown account exited $status"
"$RECEIPTD" accounts delete alice --config "$WORK/world/accounts.json" >/dev/null || fail "accounts delete alice failed"
[ "$(call "$READER" GET /v1/accounts/alice | cut -d' ' -f1)" = 404 ] || fail "alice is still there after delete"
echo "ok"
