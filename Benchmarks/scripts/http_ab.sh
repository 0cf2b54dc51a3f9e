#!/usr/bin/env bash
# Two receiptd binaries over HTTP, interleaved: each round starts each binary on a free loopback port and drives
# POST /v1/validate with wrk (-t1, 64 connections, 5 s) posting tpinapp_1.der, then stops it. Interleaving keeps a
# slow spell of the shared VM from landing on one binary only.
#   Benchmarks/scripts/http_ab.sh OLD_BINARY NEW_BINARY [ROUNDS]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OLD_BINARY NEW_BINARY [ROUNDS]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
receipt=${RECEIPT:-$here/../../../shared/fixtures/apple/receipts/tpinapp_1.der}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for round in $(seq 1 "${3:-3}"); do
    for side in old new; do
        if [ "$side" = old ]; then binary=$1; else binary=$2; fi
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        echo "{\"host\": \"127.0.0.1\", \"port\": $port, \"max_connections\": 2048}" >"$work/config.json"
        "$binary" serve --config "$work/config.json" >/dev/null 2>"$work/server.log" &
        server=$!
        curl -s --retry 20 --retry-connrefused --retry-delay 0 -o /dev/null "http://127.0.0.1:$port/healthz"
        BODY_FILE=$receipt CONTENT_TYPE=application/octet-stream wrk -t1 -c64 -d5s --latency \
            -s "$here/wrk_post_file.lua" "http://127.0.0.1:$port/v1/validate" >"$work/wrk.txt" 2>&1
        echo "round $round $side: $(awk '/Requests\/sec/ {print $2}' "$work/wrk.txt") req/s," \
            "p50 $(awk '$1 == "50%" {print $2}' "$work/wrk.txt"), p90 $(awk '$1 == "90%" {print $2}' "$work/wrk.txt")," \
            "p99 $(awk '$1 == "99%" {print $2}' "$work/wrk.txt") (load $(cut -d' ' -f1 /proc/loadavg))"
        kill -TERM "$server"
        wait "$server" || true
    done
done
