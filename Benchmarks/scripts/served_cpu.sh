#!/usr/bin/env bash
# A live receiptd's own CPU and context switches per served validation at 64 connections, the load http_ab.sh times:
# wrk posts tpinapp_1 until COUNT answers; the figures are the server's /proc counters after minus before, divided by
# the requests its access log shows. CPU time per request moves less with other work on the machine than req/s does
# (about ±15% against up to 1.7x on a loaded machine), but it still moves: compare several runs, interleaved.
#   Benchmarks/scripts/served_cpu.sh BINARY [COUNT]          default 20000
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BINARY [COUNT]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
binary=$1
count=${2:-20000}
receipt=${RECEIPT:-$here/../../../shared/fixtures/apple/receipts/tpinapp_1.der}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
echo "{\"host\": \"127.0.0.1\", \"port\": $port, \"max_connections\": 2048}" >"$work/config.json"
"$binary" serve --config "$work/config.json" >"$work/stdout" 2>/dev/null &
server=$!
curl -s --retry 20 --retry-connrefused --retry-delay 0 -o /dev/null "http://127.0.0.1:$port/healthz"
# voluntary and involuntary switches of every thread, then user and system ticks
counters() {
    cat /proc/"$server"/task/*/status | awk '/^voluntary_ctxt/ {v += $2} /^nonvoluntary_ctxt/ {n += $2} END {print v, n}'
    awk '{print $14, $15}' /proc/"$server"/stat
}
before=$(counters | tr '\n' ' ')
BODY_FILE=$receipt COUNT=$count timeout 300 wrk -t1 -c64 -d300s -s "$here/wrk_post_count.lua" \
    "http://127.0.0.1:$port/v1/validate" >"$work/wrk.txt" 2>&1
after=$(counters | tr '\n' ' ')
kill -TERM "$server"
wait "$server" || true
served=$(grep -c ' /v1/validate ' "$work/stdout")
echo "$before $after" | awk -v n="$served" -v ticks="$(getconf CLK_TCK)" -v name="$(basename "$binary")" \
    -v load="$(cut -d' ' -f1-3 /proc/loadavg)" '{
        printf "%s: %d served; per request: user %.1f us, system %.1f us, switches %.3f voluntary %.3f involuntary (load %s)\n",
            name, n, ($7 - $3) / ticks / n * 1e6, ($8 - $4) / ticks / n * 1e6, ($5 - $1) / n, ($6 - $2) / n, load }'
