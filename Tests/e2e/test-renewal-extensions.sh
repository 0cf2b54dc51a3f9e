#!/usr/bin/env bash
# docs/server-api.md's "Renewal extensions" recipe, run as written against the fake of Apple's API: an extension from
# the CLI and one through the route, a third refused with 4030005 and explained, the subscription's signed expiry and
# its extensions, and a mass extension followed to completion. Then what the fake received: each extension's body as
# Apple's library sends it (extendByDays, extendReasonCode, a fresh requestIdentifier; productId and
# storefrontCountryCodes for the mass one).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
cd "$E2E_ROOT"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export TMPDIR="$WORK"

docs_sh_block docs/server-api.md test-renewal-extensions.sh >"$WORK/recipe.sh"
[ -s "$WORK/recipe.sh" ] || { echo "e2e: docs/server-api.md has no recipe for this test" >&2; exit 1; }
# Keep the fake's request log: the recipe removes its folder at the end.
sed -i 's|^rm -rf "\$T"$|cp "$T/apple/requests.jsonl" "$TMPDIR/requests.jsonl"; rm -rf "$T"|' "$WORK/recipe.sh"
grep -q 'requests.jsonl' "$WORK/recipe.sh" || { echo "e2e: the recipe no longer ends with rm -rf \"\$T\"" >&2; exit 1; }
timeout 120 bash -euo pipefail "$WORK/recipe.sh" >"$WORK/out" 2>"$WORK/err" \
    || { cat "$WORK/out" "$WORK/err" >&2; echo "e2e: docs/server-api.md's renewal extensions recipe failed" >&2; exit 1; }

expect() { # expect DESCRIPTION PATTERN: a line of the recipe's output matches PATTERN (grep -E)
    grep -qE -- "$2" "$WORK/out" || { cat "$WORK/out" "$WORK/err" >&2; echo "e2e: $1" >&2; exit 1; }
}
expect "the validation did not pass" '^\{"valid":true\}$'
expect "the CLI extension did not print Apple's new expiry" '"effective_date": "2099-01-08T00:00:00Z"'
expect "the CLI extension did not print its reason" '"reason": "service_issue_or_outage"'
expect "the route's extension did not answer" '^\{"effective_date":"2099-01-08T00:00:00Z","days":3,"reason":"customer_satisfaction"\}$'
expect "the third extension was not refused with 4030005" '^\{"code":"extension_refused","apple_error_code":4030005,"message":".*at most twice in 365 days'
expect "the subscription does not show Apple's signed expiry and its three extensions" \
    '^\{"expires_date":"2099-01-08T00:00:00Z","extensions":\[\{"outcome":"extended","days":7,"apple_error_code":null,"requested_by":"cli"\},\{"outcome":"extended","days":3,"apple_error_code":null,"requested_by":null\},\{"outcome":"refused","days":3,"apple_error_code":4030005,"requested_by":null\}\]\}$'
expect "extend-all did not print its request id" '^request_identifier [0-9a-f-]{36}$'
expect "extend-all was not followed to completion" '^complete: succeeded 30, failed 2$'

# What Apple was sent: three extensions, each with its own request identifier, and one mass extension.
python3 - "$WORK/requests.jsonl" <<'PY'
import json, sys
requests = [json.loads(line) for line in open(sys.argv[1])]
def body(r):
    b = r.get("body")
    return json.loads(b) if isinstance(b, str) and b else b
single = [r for r in requests if r["method"] == "PUT" and r["path"].startswith("/inApps/v1/subscriptions/extend/3001")]
assert len(single) == 3, f"expected 3 extensions of 3001, Apple got {len(single)}"
ids = [body(r)["requestIdentifier"] for r in single]
assert len(set(ids)) == 3, f"request identifiers reused: {ids}"
assert [(body(r)["extendByDays"], body(r)["extendReasonCode"]) for r in single] == [(7, 3), (3, 1), (3, 1)], \
    [body(r) for r in single]
assert all(set(body(r)) == {"extendByDays", "extendReasonCode", "requestIdentifier"} for r in single)
mass = [r for r in requests if r["method"] == "POST" and r["path"] == "/inApps/v1/subscriptions/extend/mass"]
assert len(mass) == 1, f"expected 1 mass extension, Apple got {len(mass)}"
m = body(mass[0])
assert m["productId"] == "pro.monthly" and m["storefrontCountryCodes"] == ["USA", "CAN"] \
    and m["extendByDays"] == 5 and m["extendReasonCode"] == 3, m
polls = [r for r in requests if r["method"] == "GET" and r["path"].startswith(
    "/inApps/v1/subscriptions/extend/mass/pro.monthly/" + m["requestIdentifier"])]
assert len(polls) == 2, f"expected 2 status polls, Apple got {len(polls)}"
statuses = [r for r in requests if r["method"] == "GET" and r["path"].startswith("/inApps/v1/subscriptions/3001")]
assert statuses, "the subscription's status was never asked after an extension"
PY
echo "test-renewal-extensions: ok"
