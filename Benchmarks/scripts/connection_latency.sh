#!/usr/bin/env bash
# Receipts over HTTP per connection: for each binary in turn (ROUNDS times, interleaved), start it on a free
# loopback port and drive POST /v1/validate with tpinapp_1 from connection_latency.c (64 connections, 5 s), which
# prints the latency percentiles and how far apart the connections' mean latencies are. wrk gives one
# distribution for all connections; this shows whether some connections wait longer than others.
#   Benchmarks/scripts/connection_latency.sh BINARY [BINARY...]      ROUNDS=3 CONNECTIONS=64 DURATION=5
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BINARY [BINARY...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
receipt=${RECEIPT:-$here/../../../shared/fixtures/apple/receipts/tpinapp_1.der}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/connection_latency" "$here/connection_latency.c"
for round in $(seq 1 "${ROUNDS:-3}"); do
    for binary in "$@"; do
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        echo "{\"host\": \"127.0.0.1\", \"port\": $port, \"max_connections\": 2048}" >"$work/config.json"
        "$binary" serve --config "$work/config.json" >/dev/null 2>"$work/server.log" &
        server=$!
        curl -s --retry 20 --retry-connrefused --retry-delay 0 -o /dev/null "http://127.0.0.1:$port/healthz"
        result=$("$work/connection_latency" "$port" "${CONNECTIONS:-64}" "${DURATION:-5}" "$receipt")
        echo "round $round $(basename "$binary"): $result (load $(cut -d' ' -f1 /proc/loadavg))"
        kill -TERM "$server"
        wait "$server" || true
    done
done
