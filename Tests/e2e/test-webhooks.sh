#!/usr/bin/env bash
# Webhooks (issue 25) against the real server and a real receiver: a Python receiver on 127.0.0.1 that records every
# POST and can be told to answer 500 or hang; a server with a SQLite ledger and one webhook (allow_http); forged
# notifications for a few originals, three accounts and one original nobody owns. Checks that every event the outbox
# holds arrives with a 2xx, that each signature verifies with docs/events.md's Python snippet (and its Node and Go
# ones when those are installed), that no stream's sequence goes backwards at the receiver, that a 500 period then
# recovery delivers everything, that `kill -9` of the server mid-delivery then a restart delivers the rest
# (duplicates allowed, losses not), and `receiptd webhooks list/replay/test`, with events.md's sh block run as
# written. Bounded: each wait has its own limit.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
. "$HERE/ledger-lib.sh"
DOC="$E2E_ROOT/docs/events.md"
command -v jq >/dev/null || { echo "test-webhooks: jq is required (scripts/install-deps installs it)" >&2; exit 1; }

WORK="$(mktemp -d)"
RECEIVER_PID=""
cleanup() {
    local status=$?
    set +e
    if [ -n "${RECEIPTD_PID:-}" ]; then
        kill -KILL "$RECEIPTD_PID" 2>/dev/null
        wait "$RECEIPTD_PID" 2>/dev/null
        rm -f "$SERVER_LOG"
    fi
    if [ -n "$RECEIVER_PID" ]; then kill "$RECEIVER_PID" 2>/dev/null; wait "$RECEIVER_PID" 2>/dev/null; fi
    [ -n "${KEEP_WORK:-}" ] && echo "kept $WORK" >&2 || rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "test-webhooks: FAIL: $*" >&2; exit 1; }
have_notification_forge || fail "receiptd testing notification is missing"

# block LANG: the one ```LANG block of docs/events.md.
block() { awk -v fence="\`\`\`$1" '/^```/ { if (inside) { inside = 0; next } if ($0 == fence) { inside = 1; next } } inside' "$DOC"; }
for lang in sh python js go; do
    [ "$(grep -c "^\`\`\`$lang\$" "$DOC")" -eq 1 ] || fail "docs/events.md no longer has one $lang block: update this test"
done
! grep -qE '^```(bash|shell|console)$' "$DOC" || fail "docs/events.md has a shell block this test does not run"

# --- the checks on what the receiver got, against the outbox -------------------------------------------------------
cat >"$WORK/check.py" <<'PY'
"""check.py COMMAND LOG …: what the receiver recorded, checked. Prints one line; exits 1 on a failure."""
import base64, hashlib, hmac, importlib.util, json, sys, time

command, log_path = sys.argv[1:3]

def records():
    try:
        with open(log_path) as log:
            return [json.loads(line) for line in log if line.strip()]
    except FileNotFoundError:
        return []

def body(record):
    return base64.b64decode(record["body"])

def event(record):
    return json.loads(body(record))

def stream(payload):
    return payload["account"] if payload.get("account") is not None else "otx:" + payload["original_transaction_id"]

def fail(message):
    print("FAIL: " + message)
    sys.exit(1)

if command == "delivered-ids":
    # Event ids answered with a 2xx, one a line.
    print("\n".join(sorted({event(r)["id"] for r in records() if r["status"] == 200})))

elif command == "complete":
    # Every event of the outbox listing arrived with a 2xx; every delivery of it is delivered.
    with open(sys.argv[3]) as file:
        listing = json.load(file)
    if not listing:
        fail("the outbox holds no events")
    delivered = {event(r)["id"] for r in records() if r["status"] == 200}
    missing = [e["id"] for e in listing if e["id"] not in delivered]
    if missing:
        fail(f"{len(missing)} of {len(listing)} events never reached the receiver with a 2xx: {missing[:5]}")
    undone = [e["id"] for e in listing if any(d["state"] != "delivered" for d in e["deliveries"])]
    if undone:
        fail(f"{len(undone)} events not marked delivered: {undone[:5]}")
    print(f"{len(listing)} events, every one received")

elif command == "verify":
    # Each POST is signed as docs/events.md says: its Python snippet, loaded as written, accepts it; a changed body,
    # another secret and an old t are refused; the headers name the event and the content.
    doc_snippet, secret_path = sys.argv[3:5]
    spec = importlib.util.spec_from_file_location("snippet", doc_snippet)
    snippet = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(snippet)
    with open(secret_path, "rb") as file:
        secret = file.read().strip()
    seen = records()
    if not seen:
        fail("nothing was received")
    for r in seen:
        raw = body(r)
        payload = json.loads(raw)
        if not snippet.verify(secret, r["signature"] or "", raw):
            fail(f"the signature of {payload.get('id')} does not verify: {r['signature']}")
        if snippet.verify(secret, r["signature"], raw + b" ") or snippet.verify(secret + b"x", r["signature"], raw):
            fail("a changed body or another secret verified")
        if r["event_id"] != payload["id"] or not payload["id"].startswith("evt_"):
            fail(f"Receiptd-Event-Id {r['event_id']} is not the body's id {payload['id']}")
        if not (r["content_type"] or "").startswith("application/json"):
            fail(f"Content-Type {r['content_type']}")
        if not (r["user_agent"] or "").startswith("receiptd/"):
            fail(f"User-Agent {r['user_agent']}")
        for member in ("type", "created_at", "sequence", "environment", "account", "original_transaction_id"):
            if payload.get("type") != "TEST" and member not in payload:
                fail(f"{payload['id']} has no {member}")
    old = str(int(time.time()) - 600)
    raw = body(seen[0])
    stale = "t=" + old + ",v1=" + hmac.new(secret, old.encode() + b"." + raw, hashlib.sha256).hexdigest()
    if snippet.verify(secret, stale, raw):
        fail("a signature 10 minutes old verified")
    print(f"{len(seen)} POSTs, every signature verified")

elif command == "order":
    # At the receiver, no stream's first arrivals go backwards: a new event never has a lower sequence than one
    # already received (a duplicate of an earlier one is at-least-once, not disorder).
    highest, first_seen, streams = {}, set(), set()
    for r in records():
        payload = event(r)
        if payload["type"] == "TEST" or payload["id"] in first_seen:
            continue
        first_seen.add(payload["id"])
        key = stream(payload)
        streams.add(key)
        if payload["sequence"] < highest.get(key, 0):
            fail(f"stream {key}: {payload['id']} (sequence {payload['sequence']}) after sequence {highest[key]}")
        highest[key] = max(highest.get(key, 0), payload["sequence"])
    print(f"{len(streams)} streams in order")

elif command == "count":
    # How many POSTs answered STATUS ("none": left hanging), optionally of event type TYPE.
    wanted = sys.argv[3]
    kind = sys.argv[4] if len(sys.argv) > 4 else None
    status = None if wanted == "none" else int(wanted)
    print(sum(1 for r in records() if r["status"] == status and (kind is None or event(r)["type"] == kind)))
PY

WORLD="$WORK/world"
make_ledger_world "$WORLD" '{"sqlite": "ledger.sqlite"}'
LOG="$WORK/received.jsonl"
MODE="$WORK/mode"
echo ok >"$MODE"
python3 "$HERE/webhook_receiver.py" "$LOG" "$MODE" "$WORK/receiver-port" &
RECEIVER_PID=$!
for _ in $(seq 1 100); do [ -s "$WORK/receiver-port" ] && break; sleep 0.1; done
[ -s "$WORK/receiver-port" ] || fail "the receiver did not start"
RECEIVER_PORT="$(cat "$WORK/receiver-port")"

echo "== receiptd webhooks secret new"
"$RECEIPTD" webhooks secret new >"$WORLD/webhook-secret"
[ "$(wc -l <"$WORLD/webhook-secret")" -eq 1 ] && grep -qxE '[A-Za-z0-9_-]{43}' "$WORLD/webhook-secret" \
    || fail "webhooks secret new did not print 43 base64url characters and a newline"
[ "$("$RECEIPTD" webhooks secret new)" != "$(cat "$WORLD/webhook-secret")" ] || fail "two secrets were the same"

# receiptd.json, with the webhook `backend`: the names docs/events.md's sh block uses.
jq --arg url "http://127.0.0.1:$RECEIVER_PORT/hooks" '.apps[0].entitlements = {"pro": ["pro.monthly"]}
    | .webhooks = [{"name": "backend", "url": $url, "secret_file": "webhook-secret", "events": ["*"],
                    "allow_http": true, "timeout": 2}]' "$WORLD/receiptd.json" >"$WORLD/receiptd.json.new"
mv "$WORLD/receiptd.json.new" "$WORLD/receiptd.json"
CONFIG="$WORLD/receiptd.json"
start_server "$CONFIG"

nothing_pending() {
    "$RECEIPTD" webhooks list --status pending --json --config "$CONFIG" >"$WORK/pending.json" \
        && [ "$(jq length "$WORK/pending.json")" = 0 ]
}
outbox() { "$RECEIPTD" webhooks list --json --limit 10000 --config "$CONFIG"; }
received() { python3 "$WORK/check.py" "$1" "$LOG" "${@:2}"; }
# more_than N STATUS [TYPE]: whether more than N POSTs were answered STATUS (none: left hanging).
more_than() { [ "$(received count "${@:2}")" -gt "$1" ]; }
# received_more ID N: whether event ID reached the receiver more than N times.
times_received() { grep -c "\"event_id\": \"$1\"" "$LOG" || true; }
received_more() { [ "$(times_received "$1")" -gt "$2" ]; }

# notify NAME TYPE TRANSACTION ORIGINAL SIGNED [flags…]: forges and posts one notification; it must be stored.
notify() {
    local name="$1" type="$2" transaction="$3" original="$4" signed="$5"
    shift 5
    forge_notification "$WORLD/ca" "$WORK/$name.json" "$type" "$(python3 -c 'import uuid; print(uuid.uuid4())')" \
        "$transaction" "$original" "$signed" 2099-01-01T00:00:00Z "$@"
    [ "$(post_notification "$BASE_URL" "$WORK/$name.json")" = "200 false" ] || fail "notification $name was not stored"
}
# token ACCOUNT: the appAccountToken registered for it, so that its notifications link on arrival.
token() { python3 -c 'import sys, uuid; print(uuid.uuid5(uuid.NAMESPACE_URL, sys.argv[1]))' "$1"; }
with_token() { echo "{\"appAccountToken\": \"$(token "$1")\"}"; }

echo "== events for three accounts and one original nobody owns"
for account in alice bob carol; do
    status="$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -X PUT \
        "$BASE_URL/v1/accounts/$account/app_account_tokens/$(token "$account")")"
    [ "$status" = 200 ] || fail "registering $account's token: HTTP $status"
done
notify alice-1 SUBSCRIBED 6100 6100 2026-01-01T00:00:00Z --subtype INITIAL_BUY --transaction-members "$(with_token alice)"
notify bob-1 SUBSCRIBED 6200 6200 2026-01-01T00:00:00Z --subtype INITIAL_BUY --transaction-members "$(with_token bob)"
notify carol-1 SUBSCRIBED 6300 6300 2026-01-01T00:00:00Z --subtype INITIAL_BUY --transaction-members "$(with_token carol)"
notify nobody-1 SUBSCRIBED 6400 6400 2026-01-01T00:00:00Z --subtype INITIAL_BUY
notify alice-2 DID_RENEW 6102 6100 2026-02-01T00:00:00Z --transaction-members "$(with_token alice)"
notify bob-2 DID_CHANGE_RENEWAL_STATUS 6200 6200 2026-01-15T00:00:00Z --subtype AUTO_RENEW_DISABLED \
    --auto-renew false --transaction-members "$(with_token bob)"
wait_until 30 "the first events delivered" nothing_pending
outbox >"$WORK/outbox.json"
received complete "$WORK/outbox.json" || fail "not every event arrived"
for account in alice bob carol; do
    jq -e --arg a "$account" 'any(.[]; .account == $a and .type == "INITIAL_PURCHASE")' "$WORK/outbox.json" >/dev/null \
        || fail "no INITIAL_PURCHASE for $account"
done
jq -e 'any(.[]; .account == null and .original_transaction_id == "6400")' "$WORK/outbox.json" >/dev/null \
    || fail "no event for the original nobody owns"
jq -e 'any(.[]; .account == "alice" and .type == "RENEWAL")' "$WORK/outbox.json" >/dev/null || fail "no RENEWAL for alice"

echo "== the receiver answers 500, then recovers"
echo 500 >"$MODE"
notify alice-3 DID_RENEW 6103 6100 2026-03-01T00:00:00Z --transaction-members "$(with_token alice)"
notify carol-2 DID_RENEW 6302 6300 2026-02-01T00:00:00Z --transaction-members "$(with_token carol)"
notify carol-3 DID_RENEW 6303 6300 2026-03-01T00:00:00Z --transaction-members "$(with_token carol)"
wait_until 15 "a 500 answered" more_than 0 500
"$RECEIPTD" webhooks list --status pending --config "$CONFIG" >"$WORK/pending.txt"
grep -q 'backend: pending' "$WORK/pending.txt" && grep -q 'HTTP 500' "$WORK/pending.txt" \
    || { cat "$WORK/pending.txt" >&2; fail "webhooks list --status pending does not show the 500s"; }
"$RECEIPTD" webhooks list --status pending --account carol --json --config "$CONFIG" >"$WORK/carol.json"
jq -e 'length >= 1 and all(.[]; .account == "carol")' "$WORK/carol.json" >/dev/null \
    || fail "webhooks list --account carol: $(cat "$WORK/carol.json")"
echo ok >"$MODE"
# The first retry comes 10 s (with jitter) after the 500; the 2xx then releases the rest of the backlog at once.
wait_until 45 "the backlog delivered after recovery" nothing_pending
outbox >"$WORK/outbox.json"
received complete "$WORK/outbox.json" || fail "not every event arrived after the 500s"

echo "== receiptd webhooks replay and test"
first="$(jq -r '[.[] | select(.account == "bob")] | last | .id' "$WORK/outbox.json")"
before="$(times_received "$first")"
[ "$("$RECEIPTD" webhooks replay "$first" --config "$CONFIG")" = "1 delivery set pending" ] || fail "replay $first"
wait_until 15 "the replayed event received again" received_more "$first" "$before"
[ "$("$RECEIPTD" webhooks replay --since "$(($(date +%s) + 3600))" --config "$CONFIG")" = "0 deliveries set pending" ] \
    || fail "replay --since an hour ahead set something pending"
status=0
"$RECEIPTD" webhooks replay evt_none --config "$CONFIG" 2>"$WORK/replay.err" || status=$?
[ "$status" = 1 ] && grep -q event_not_found "$WORK/replay.err" || fail "replay of an unknown event exited $status"
status=0
"$RECEIPTD" webhooks replay --failed evt_none --config "$CONFIG" 2>/dev/null || status=$?
[ "$status" = 2 ] || fail "replay with two forms exited $status, not 2"
status=0
"$RECEIPTD" webhooks test nobody --config "$CONFIG" 2>"$WORK/test.err" || status=$?
[ "$status" = 2 ] && grep -q backend "$WORK/test.err" || fail "webhooks test of an unknown name exited $status"
"$RECEIPTD" webhooks test backend --config "$CONFIG" >"$WORK/test.out" || fail "webhooks test backend: $(cat "$WORK/test.out")"
grep -q '^backend: HTTP 200 in [0-9.]* s: received$' "$WORK/test.out" || fail "webhooks test printed $(cat "$WORK/test.out")"
more_than 0 200 TEST || fail "the receiver got no TEST event"
echo 500 >"$MODE"
status=0
"$RECEIPTD" webhooks test backend --config "$CONFIG" >"$WORK/test.out" || status=$?
[ "$status" = 1 ] && grep -q 'HTTP 500' "$WORK/test.out" || fail "webhooks test of a 500 exited $status"
echo ok >"$MODE"

echo "== docs/events.md's sh block, as written"
block sh >"$WORK/operating.sh"
(cd "$WORLD" && PATH="$(cd "$(dirname "$RECEIPTD")" && pwd):$PATH" timeout 60 bash -euo pipefail "$WORK/operating.sh") \
    >"$WORK/operating.out" 2>&1 || { cat "$WORK/operating.out" >&2; fail "events.md's sh block failed"; }
grep -qx '0 deliveries set pending' "$WORK/operating.out" && grep -q '^backend: HTTP 200' "$WORK/operating.out" \
    || { cat "$WORK/operating.out" >&2; fail "events.md's sh block printed something else"; }

echo "== kill -9 mid-delivery, then a restart"
echo hang >"$MODE"
hung_before="$(received count none)"
notify bob-3 DID_RENEW 6202 6200 2026-02-01T00:00:00Z --transaction-members "$(with_token bob)"
notify nobody-2 DID_RENEW 6402 6400 2026-02-01T00:00:00Z
wait_until 15 "a delivery in flight" more_than "$hung_before" none
kill -KILL "$RECEIPTD_PID"
wait "$RECEIPTD_PID" 2>/dev/null || true
RECEIPTD_PID=""
rm -f "$SERVER_LOG"
echo ok >"$MODE"
start_server "$CONFIG"
notify alice-4 DID_RENEW 6104 6100 2026-04-01T00:00:00Z --transaction-members "$(with_token alice)"
# A claim of the killed server is taken over when its lease runs out (at most 60 s).
wait_until 80 "everything delivered after the restart" nothing_pending
outbox >"$WORK/outbox.json"
received complete "$WORK/outbox.json" || fail "an event was lost across kill -9"

echo "== every signature, every stream's order"
block python >"$WORK/verify_snippet.py"
received verify "$WORK/verify_snippet.py" "$WORLD/webhook-secret" || fail "signatures"
received order || fail "order"
python3 - "$LOG" >"$WORK/deliveries.json" <<'PY'
import json, sys
print(json.dumps([{"signature": r["signature"], "body": r["body"]} for r in map(json.loads, open(sys.argv[1]))]))
PY
if command -v node >/dev/null; then
    block js >"$WORK/verify.js"
    node -e '
        const { verify } = require(process.argv[1]);
        const secret = require("fs").readFileSync(process.argv[2], "utf8").trim();
        const deliveries = JSON.parse(require("fs").readFileSync(process.argv[3], "utf8"));
        const bad = deliveries.filter((d) => !verify(secret, d.signature, Buffer.from(d.body, "base64")));
        const forged = deliveries.filter((d) => verify(secret, d.signature, Buffer.concat([Buffer.from(d.body, "base64"), Buffer.from(" ")])));
        if (bad.length || forged.length || !deliveries.length) { console.error(`node: ${bad.length} refused, ${forged.length} forged accepted`); process.exit(1); }
    ' "$WORK/verify.js" "$WORLD/webhook-secret" "$WORK/deliveries.json" || fail "docs/events.md's Node snippet"
    echo "node: every signature verified"
else
    echo "SKIP: node is not installed: docs/events.md's Node snippet not run"
fi
if command -v go >/dev/null; then
    mkdir -p "$WORK/go/webhook"
    block go >"$WORK/go/webhook/webhook.go"
    cat >"$WORK/go/main.go" <<'GO'
package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"example.com/verify/webhook"
)

func main() {
	secret, _ := os.ReadFile(os.Args[1])
	data, _ := os.ReadFile(os.Args[2])
	var deliveries []struct{ Signature, Body string }
	if err := json.Unmarshal(data, &deliveries); err != nil || len(deliveries) == 0 {
		fmt.Println("go: no deliveries")
		os.Exit(1)
	}
	for _, delivery := range deliveries {
		body, _ := base64.StdEncoding.DecodeString(delivery.Body)
		key := []byte(strings.TrimSpace(string(secret)))
		if !webhook.Verify(key, delivery.Signature, body, time.Now()) || webhook.Verify(key, delivery.Signature, append(body, ' '), time.Now()) {
			fmt.Println("go: a signature was judged wrongly")
			os.Exit(1)
		}
	}
}
GO
    printf 'module example.com/verify\n\ngo 1.21\n' >"$WORK/go/go.mod"
    (cd "$WORK/go" && GOFLAGS=-mod=mod timeout 120 go run . "$WORLD/webhook-secret" "$WORK/deliveries.json") \
        || fail "docs/events.md's Go snippet"
    echo "go: every signature verified"
else
    echo "SKIP: go is not installed: docs/events.md's Go snippet not run"
fi

stop_server || fail "the server did not stop cleanly"
echo "ok"
