#!/usr/bin/env bash
# A stdout nobody reads (a log shipper that read the first line and hung) must cost log lines, never answers. The real
# server logs into a fifo whose reader stops after the listening line; 6,000 requests fill the pipe and the log's
# queue; /healthz and /v1/validate must still answer promptly, /metrics must count the dropped lines, and SIGTERM must
# still stop the server (the last lines are waited for a bounded time). Before the queue, the server froze after
# about 970 requests, /healthz included.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
WORK="$(mktemp -d)"
READER=""
cleanup() {
    local status=$?
    set +e
    stop_server >/dev/null 2>&1
    [ -z "$READER" ] || kill "$READER" 2>/dev/null
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
    echo "test-stalled-stdout: FAIL: $*" >&2
    [ -z "${SERVER_LOG:-}" ] || sed 's/^/    /' "$SERVER_LOG" >&2
    exit 1
}

make_test_world "$WORK"
DEVICE=3B76A7BD-8F5B-46A4-BCB1-CCE8DBD1B3CD
"$RECEIPTD" testing receipt --ca "$WORK/ca" --bundle-id com.example.app --app-version 1.0 --device-id "$DEVICE" \
    --purchase product=coins,transaction=1 --out "$WORK/receipt.der" 2>/dev/null

# The reader takes the listening line (for the port), then holds the pipe open without reading: `read` in bash takes
# one byte at a time from a pipe, so nothing past the first line leaves it.
mkfifo "$WORK/stdout"
{ IFS= read -r line; printf '%s\n' "$line" >"$WORK/first-line"; exec sleep 300; } <"$WORK/stdout" &
READER=$!
SERVER_LOG="$WORK/stderr"
"$RECEIPTD" serve --config "$WORK/receiptd.json" --port 0 >"$WORK/stdout" 2>"$SERVER_LOG" &
RECEIPTD_PID=$!
PORT=""
for _ in $(seq 1 100); do
    PORT="$(grep -oE 'listening address=http://[^ ]+:[0-9]+' "$WORK/first-line" 2>/dev/null \
        | grep -oE '[0-9]+$' || true)"
    [ -z "$PORT" ] || break
    kill -0 "$RECEIPTD_PID" 2>/dev/null || fail "receiptd exited before listening"
    sleep 0.1
done
[ -n "$PORT" ] || fail "no listening line within 10 s"
BASE_URL="http://127.0.0.1:$PORT"

validate() {
    curl -sS --max-time "$1" -o "$WORK/validated" -w '%{http_code}' -H 'Content-Type: application/octet-stream' \
        -H "X-Device-Id: $DEVICE" --data-binary @"$WORK/receipt.der" "$BASE_URL/v1/validate"
}
[ "$(validate 10)" = 200 ] || fail "validation before the flood: $(cat "$WORK/validated")"

# 6,000 requests on 4 keep-alive connections (curl's URL ranges): about 800 access lines fill the pipe, 4,096 the
# queue, the rest are dropped. Bounded: a server that froze on its log fails here instead of hanging the script.
flood=()
for part in 1 2 3 4; do
    timeout 120 curl -s --max-time 5 -o /dev/null -w '%{http_code}\n' "$BASE_URL/healthz?flood=$part-[1-1500]" \
        >"$WORK/flood.$part" &
    flood+=($!)
done
wait "${flood[@]}" || fail "the flood did not finish within 120 s: the server blocks on its log"
answered="$(cat "$WORK"/flood.* | grep -c '^200$' || true)"
[ "$answered" -eq 6000 ] || fail "$answered of 6,000 flood requests answered 200"

[ "$(curl -s --max-time 2 -o /dev/null -w '%{http_code}' "$BASE_URL/healthz")" = 200 ] \
    || fail "/healthz did not answer within 2 s with stdout stalled"
[ "$(validate 5)" = 200 ] || fail "/v1/validate did not answer 200 within 5 s with stdout stalled"
jq -e '.valid == true' "$WORK/validated" >/dev/null || fail "the receipt was not judged valid: $(cat "$WORK/validated")"
curl -s --max-time 2 "$BASE_URL/metrics" >"$WORK/metrics" || fail "/metrics did not answer within 2 s"
grep -q '^# TYPE receiptd_log_lines_dropped_total counter$' "$WORK/metrics" \
    || fail "/metrics has no receiptd_log_lines_dropped_total counter"
dropped="$(awk '$1 == "receiptd_log_lines_dropped_total" { print $2 }' "$WORK/metrics")"
[ "${dropped:-0}" -gt 0 ] || fail "receiptd_log_lines_dropped_total is ${dropped:-missing} after 6,000 requests"

# SIGTERM: the last lines wait for stdout at most a bounded time, then the server exits 0 (stop_server allows 15 s).
stop_server || fail "receiptd did not stop cleanly with stdout stalled"
echo "test-stalled-stdout: ok ($dropped log lines dropped, every request answered)"
