#!/usr/bin/env bash
# Runs docs/server-api.md's refund-request recipe exactly as written (from the clone's root, after `swift build`):
# a CONSUMPTION_REQUEST posted to a running serve, the backend's PUT, then checks that the fake Apple got Send
# Consumption Information v2 with the body Apple's library sends, and that the request shows as sent.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
cd "$E2E_ROOT"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export TMPDIR="$WORK"

docs_sh_block docs/server-api.md test-consumption.sh >"$WORK/recipe.sh"
[ -s "$WORK/recipe.sh" ] || { echo "e2e: docs/server-api.md has no recipe for this test" >&2; exit 1; }
timeout 120 bash -euo pipefail "$WORK/recipe.sh" >"$WORK/out" 2>"$WORK/err" \
    || { cat "$WORK/out" "$WORK/err" >&2; echo "e2e: docs/server-api.md's refund-request recipe failed" >&2; exit 1; }

python3 - "$WORK/out" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
def fail(message):
    print("\n".join(lines), file=sys.stderr)
    sys.exit("e2e: " + message)

put = json.loads(next(l for l in lines if l.startswith('{"transaction_id"')))
if put["answer"] != {"customer_consented": True, "consumption_percentage": 25000, "delivery_status": "DELIVERED",
                     "refund_preference": "GRANT_PRORATED", "sample_content_provided": False}:
    fail("the PUT did not answer the stored answer: %r" % put["answer"])
if (put["consumption_request"] or {}).get("state") != "open":
    fail("the PUT did not show the open request")

calls = [json.loads(l) for l in lines if l.startswith('{"method"')]
if len(calls) != 1:
    fail("expected one Send Consumption Information, got %d" % len(calls))
call = calls[0]
if call["method"] != "PUT" or call["path"] != "/inApps/v2/transactions/consumption/3001":
    fail("wrong call: %s %s" % (call["method"], call["path"]))
if call["refusal"] is not None or call["contentType"] != "application/json":
    fail("the fake refused the token or saw no JSON: %r %r" % (call["refusal"], call["contentType"]))
# Apple's library (ConsumptionRequest's encode) writes these members in this order.
expected = '{"customerConsented":true,"consumptionPercentage":25000,"deliveryStatus":"DELIVERED",' \
    '"refundPreference":"GRANT_PRORATED","sampleContentProvided":false}'
if json.loads(call["body"]) != json.loads(expected) or list(json.loads(call["body"])) != list(json.loads(expected)):
    fail("the body sent to Apple is not Apple's ConsumptionRequest: %s" % call["body"])

listed = [l for l in lines if " transaction 3001 " in l]
if not listed or " sent transaction 3001 reason UNINTENDED_PURCHASE 1 attempt, sent " not in listed[-1] \
        or not listed[-1].endswith("status 202"):
    fail("consumption list did not show the request sent: %r" % listed)

lookup = json.loads(next(l for l in reversed(lines) if l.startswith('{"transaction"')))
request = lookup["consumption_request"]
if request["state"] != "sent" or request["apple_status"] != 202 or request["reason"] != "UNINTENDED_PURCHASE" \
        or request["attempts"] != 1 or request["answer"] != put["answer"]:
    fail("GET /v1/transactions/3001 did not show the sent request: %r" % request)
PY
[ -z "$(ls -A "$WORK" | grep -v -e '^recipe.sh$' -e '^out$' -e '^err$')" ] \
    || { ls -la "$WORK" >&2; echo "e2e: the recipe left files behind" >&2; exit 1; }
echo "test-consumption: ok"
