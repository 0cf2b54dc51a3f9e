#!/usr/bin/env bash
# Webhook delivery alone (issue 25): events/s a local receiver gets from a standing backlog, unlike delivery.sh whose
# figure is bounded by ingest. Posts COUNT distinct notifications to `receiptd serve` while the receiver is down (their
# first tries fail and wait out a back-off), stops the server, starts the receiver, sets every delivery due now with
# `receiptd webhooks replay --since`, starts the server again and reports the first to the COUNT-th distinct event.
# Loopback only, bounded (at most 120 s of waiting).
#
#   Benchmarks/scripts/delivery_backlog.sh                                   a new SQLite file, 4,000 events
#   POSTGRES="host=/tmp/pg user=postgres dbname=empty_db" Benchmarks/scripts/delivery_backlog.sh   an empty database
#   RECEIPTD=.build/release/receiptd BENCH=Benchmarks/.build/release/receipt-bench   binaries (default: those paths)
set -euo pipefail

benchmarks=$(cd "$(dirname "$0")/.." && pwd)
root=$(dirname "$benchmarks")
count=${COUNT:-4000}
receiptd=${RECEIPTD:-$root/.build/release/receiptd}
bench=${BENCH:-$benchmarks/.build/release/receipt-bench}
command -v wrk >/dev/null || { echo "delivery_backlog.sh needs wrk (apt-get install -y wrk)" >&2; exit 2; }

work=$(mktemp -d)
server=""
receiver=""
cleanup() {
    for pid in $server $receiver; do
        if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; fi
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

"$bench" forge-notifications --count "$count" --out "$work/forged" >/dev/null
receiver_port=$(free_port)
port=$(free_port)
store="{\"sqlite\": \"$work/ledger.sqlite\"}"
[ -n "${POSTGRES:-}" ] && store="{\"postgres\": \"$POSTGRES\"}"
head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=' >"$work/webhook.secret"
printf '{"host": "127.0.0.1", "port": %s, "trusted_roots": ["%s"], "webhooks": [{"name": "bench", "url": "http://127.0.0.1:%s/events", "secret_file": "%s", "allow_http": true}], "store": %s}\n' \
    "$port" "$work/forged/jws-root.pem" "$receiver_port" "$work/webhook.secret" "$store" >"$work/config.json"

start_server() {
    "$receiptd" serve --config "$work/config.json" >/dev/null 2>>"$work/server.log" &
    server=$!
    for _ in $(seq 200); do
        curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return 0
        sleep 0.05
    done
    cat "$work/server.log" >&2
    exit 1
}
stop_server() { kill -TERM "$server"; wait "$server" 2>/dev/null || true; server=""; }

echo "== $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $count events in a standing backlog"
start_server
BODY_DIR=$work/forged/notifications wrk -t1 -c16 -d600s -s "$benchmarks/scripts/wrk_post_dir_count.lua" \
    "http://127.0.0.1:$port/v1/notifications" >/dev/null
stop_server
python3 "$benchmarks/scripts/webhook_receiver.py" --port "$receiver_port" --expect "$count" \
    --report "$work/delivery.txt" >/dev/null &
receiver=$!
"$receiptd" webhooks replay --since 2020-01-01 --config "$work/config.json" >/dev/null
start_server
for _ in $(seq 1200); do [ -s "$work/delivery.txt" ] && break; sleep 0.1; done
echo "delivered from the backlog: $(cat "$work/delivery.txt" 2>/dev/null || echo "not every event arrived within 120 s")"
