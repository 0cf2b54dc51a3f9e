#!/usr/bin/env bash
# serve's background sync against a hung Apple (issue #23), where one request alone may take server_api.timeout (30 s
# here) times its retries. Each pass is over by its start + sync_interval (3 s here): it fails within 3 + 2 s. SIGTERM
# while the next pass waits on Apple: the shutdown waits on Apple no longer than shutdown_grace_period, so receiptd
# exits 0 within the grace period + 1 s. The abandoned pass moves no cursor, and gives its lease back: a `store sync`
# right after is not skipped (exit 3) for the dead server's lease.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
unset https_proxy no_proxy all_proxy ALL_PROXY HTTPS_PROXY NO_PROXY

WORK="$(mktemp -d)"
FAKE=""
cleanup() {
    [ -z "${RECEIPTD_PID:-}" ] || kill -KILL "$RECEIPTD_PID" 2>/dev/null || true
    [ -z "$FAKE" ] || kill "$FAKE" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK"
fail() { echo "test-server-api-sync-shutdown: $*" >&2; [ -z "${SERVER_LOG:-}" ] || cat "$SERVER_LOG" >&2; exit 1; }
GRACE=1
INTERVAL=3

mkdir apple
cat >apple/fixture.json <<'JSON'
{"keyId": "ABC123DEFG", "issuerId": "57246542-96fe-1a63-e053-0824d011072a", "bundleId": "com.example.app",
 "notifications": [], "always": {"hang": 120, "pathPrefix": "/inApps/v1/notifications/history"}}
JSON
python3 "$HERE/fake-app-store-server.py" "$WORK/apple" &
FAKE=$!
for _ in $(seq 100); do [ -f apple/port ] && break; sleep 0.1; done
[ -f apple/port ] || fail "the fake did not start"
APPLE_PORT="$(cat apple/port)"

"$RECEIPTD" testing init-ca ca >/dev/null 2>&1
cat >receiptd.json <<JSON
{"trusted_roots": ["ca/root.pem"], "environments": ["Production"], "store": {"sqlite": "ledger.sqlite"},
 "shutdown_grace_period": $GRACE,
 "apps": [{"bundle_id": "com.example.app", "versions": [], "shared_secret": null,
           "server_api": {"key_id": "ABC123DEFG", "issuer_id": "57246542-96fe-1a63-e053-0824d011072a",
                          "private_key_file": "apple/key.p8"}}],
 "server_api": {"production_url": "https://localhost:$APPLE_PORT", "sandbox_url": "https://localhost:$APPLE_PORT",
                "ca_file": "apple/ca.pem", "backfill": false, "timeout": 30, "sync_interval": $INTERVAL}}
JSON
start_server receiptd.json

asked() { cat apple/requests.jsonl 2>/dev/null | grep -c '"path": "/inApps/v1/notifications/history"'; }

# The sync starts with serve: its first request hangs at the fake, and its pass gives up at its deadline.
for _ in $(seq 100); do [ "$(asked)" -ge 1 ] && break; sleep 0.05; done
[ "$(asked)" -ge 1 ] || fail "serve's sync never asked Apple for its notification history"
first=$(date +%s.%N)
for _ in $(seq 100); do grep -q 'server api sync failed' "$SERVER_LOG" && break; sleep 0.05; done
seconds="$(awk -v a="$first" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')"
grep -q 'server api sync failed' "$SERVER_LOG" || fail "a pass still waited on Apple ${seconds}s after it began"
# 2 s of slack for a loaded machine (the log line is written by its own thread, and this loop polls); without the
# deadline a pass would wait server_api.timeout, 30 s, per try.
awk -v s="$seconds" -v i="$INTERVAL" 'BEGIN { exit !(s < i + 2) }' \
    || fail "a pass gave up ${seconds}s after its request, past sync_interval ($INTERVAL s) + 2 s"

# The next pass is due at once; SIGTERM while it waits on Apple.
for _ in $(seq 100); do [ "$(asked)" -ge 2 ] && break; sleep 0.05; done
[ "$(asked)" -ge 2 ] || fail "no second pass asked Apple"

started=$(date +%s.%N)
kill -TERM "$RECEIPTD_PID"
status=0
for _ in $(seq 1 200); do
    kill -0 "$RECEIPTD_PID" 2>/dev/null || break
    sleep 0.05
done
ended=$(date +%s.%N)
kill -0 "$RECEIPTD_PID" 2>/dev/null && fail "still running 10 s after SIGTERM, with shutdown_grace_period $GRACE"
wait "$RECEIPTD_PID" || status=$?
RECEIPTD_PID=""
seconds="$(awk -v a="$started" -v b="$ended" 'BEGIN { printf "%.2f", b - a }')"
[ "$status" -eq 0 ] || fail "exited $status after SIGTERM"
awk -v s="$seconds" -v g="$GRACE" 'BEGIN { exit !(s < g + 1) }' \
    || fail "exited ${seconds}s after SIGTERM, past shutdown_grace_period ($GRACE s) + 1 s"
grep -q 'server api sync abandoned' "$SERVER_LOG" || fail "the log does not say the sync was abandoned"

"$RECEIPTD" store status --json --config receiptd.json >status.json || fail "store status: $(cat status.json)"
[ "$(jq '.server_api_sync | length' status.json)" = 0 ] \
    || fail "the abandoned sync moved a cursor: $(jq -c .server_api_sync status.json)"

# Apple answers again: the lease the abandoned pass held is free, so this syncs instead of exiting 3.
jq 'del(.always)' apple/fixture.json >apple/fixture.next && mv apple/fixture.next apple/fixture.json
sync_status=0
"$RECEIPTD" store sync --config receiptd.json >sync.out 2>&1 || sync_status=$?
[ "$sync_status" -eq 0 ] || fail "store sync after the shutdown exited $sync_status: $(cat sync.out)"
rm -f "$SERVER_LOG"
echo "test-server-api-sync-shutdown: ok (a pass gave up at its deadline; exited ${seconds}s after SIGTERM, grace $GRACE s)"
