#!/usr/bin/env bash
# A receiver down for days (issue 25: "a full outbox costs disk only"): what an idle server spends on the outbox's
# 5-second upkeep (the backlog count for /metrics, the sweep for deliveries stranded behind nothing) when STREAMS
# accounts hold PER_STREAM undelivered events each (defaults 10,000 x 100: a million waiting deliveries). The ledger
# is SQLite, made by receiptd and then filled directly (the events' bodies are a short stand-in: the upkeep never
# reads them). Nothing is posted, and the webhook's receiver refuses connections, so the server's CPU over DURATION
# seconds (30) is the upkeep's: the heads' next tries are an hour away. Also prints how long
# /metrics takes, and the slowest of the writes made meanwhile (an app account token registered every 100 ms:
# `PUT /v1/accounts/…/app_account_tokens/…` goes through the writer, as a notification's intake does).
#
#   RECEIPTD=.build/release/receiptd Benchmarks/scripts/outbox_backlog_idle.sh
#   STREAMS=2000 PER_STREAM=500 DURATION=20 Benchmarks/scripts/outbox_backlog_idle.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
receiptd=${RECEIPTD:-$root/.build/release/receiptd}
streams=${STREAMS:-10000} per_stream=${PER_STREAM:-100} seconds=${DURATION:-30}
[ -x "$receiptd" ] || { echo "build receiptd first, or set RECEIPTD" >&2; exit 1; }
work=$(mktemp -d)
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=' >"$work/webhook.secret"
cat >"$work/config.json" <<JSON
{"host": "127.0.0.1", "port": 0, "trusted_roots": [], "store": {"sqlite": "$work/ledger.sqlite"},
 "webhooks": [{"name": "backend", "url": "http://127.0.0.1:9/events", "secret_file": "$work/webhook.secret",
               "allow_http": true, "timeout": 2}]}
JSON

start() {
    "$receiptd" serve --config "$work/config.json" >"$work/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 200); do
        port=$(grep -oE 'listening address=http://[^ ]+:[0-9]+' "$work/server.log" | grep -oE '[0-9]+$' \
            | head -n 1 || true)
        [ -n "$port" ] && curl -fsS --max-time 2 "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    cat "$work/server.log" >&2
    exit 1
}
stop() { kill -TERM "$server_pid"; wait "$server_pid" || true; server_pid=""; }

start  # creates and migrates the ledger
stop
python3 - "$work/ledger.sqlite" "$streams" "$per_stream" <<'PY'
import sqlite3, sys, time
path, streams, per_stream = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
now = int(time.time() * 1000)
waiting = 9223372036854775807
db = sqlite3.connect(path)
db.execute("PRAGMA journal_mode=WAL")
def rows(stream):
    for sequence in range(1, per_stream + 1):
        event_id = f"evt_{stream}_{sequence}"
        yield (event_id, f"bench:{event_id}", "RENEWAL", f"account-{stream:07d}", f"{stream}", f"account-{stream:07d}",
               sequence, now - (per_stream - sequence) * 1000, "{}")
def deliveries(stream):
    for sequence in range(1, per_stream + 1):
        head = sequence == 1
        yield (f"evt_{stream}_{sequence}", "backend", f"account-{stream:07d}", sequence, "pending",
               3 if head else 0, now + 3_600_000 if head else waiting)
for stream in range(streams):
    db.executemany("INSERT INTO events (event_id, dedupe_key, type, account, original_transaction_id, stream, sequence,"
                   " created_at, body) VALUES (?,?,?,?,?,?,?,?,?)", rows(stream))
    db.executemany("INSERT INTO event_deliveries (event_id, webhook, stream, sequence, state, attempts,"
                   " next_attempt_at) VALUES (?,?,?,?,?,?,?)", deliveries(stream))
db.execute("INSERT INTO event_streams SELECT DISTINCT stream, ? FROM event_deliveries", (per_stream,))
db.commit()
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
PY
size=$(du -h "$work/ledger.sqlite" | cut -f1)
echo "backlog: $streams streams x $per_stream events ($((streams * per_stream)) pending deliveries), $size"

start
sleep 6  # past the first upkeep round, which every start pays
ticks() { awk '{ print $14 + $15 }' "/proc/$server_pid/stat"; }
before=$(ticks)
slowest_write=0 slowest_metrics=0
# curl's time_total in microseconds, of a call that must answer 200.
timed() { curl -fsS --max-time 30 -o /dev/null -w '%{time_total}' "$@" | awk '{ printf "%d", $1 * 1000000 }'; }
for round in $(seq 1 $((seconds * 10))); do
    token=$(cat /proc/sys/kernel/random/uuid)
    took=$(timed -X PUT "http://127.0.0.1:$port/v1/accounts/bench/app_account_tokens/$token")
    [ "$took" -gt "$slowest_write" ] && slowest_write=$took
    if [ $((round % 10)) = 0 ]; then
        took=$(timed "http://127.0.0.1:$port/metrics")
        [ "$took" -gt "$slowest_metrics" ] && slowest_metrics=$took
    fi
    sleep 0.1
done
after=$(ticks)
hz=$(getconf CLK_TCK)
cpu_ms=$(((after - before) * 1000 / hz))
echo "idle server over ${seconds} s: ${cpu_ms} ms CPU ($((cpu_ms * 100 / (seconds * 1000)))% of a core);" \
    "slowest of $((seconds * 10)) writes $((slowest_write / 1000)) ms; slowest /metrics $((slowest_metrics / 1000)) ms"
