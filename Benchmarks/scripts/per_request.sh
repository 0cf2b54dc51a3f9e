#!/usr/bin/env bash
# What one receipt validation over HTTP costs a live receiptd in counts that other work on the machine does not
# disturb: context switches and CPU migrations (perf stat, and each thread's own from /proc), system calls by name
# (strace -f -c) and instructions (callgrind, every thread). wrk posts tpinapp_1 on 4 keep-alive connections until
# LOW, then HIGH answers; each figure is (HIGH run - LOW run) / (HIGH - LOW requests), so start-up and shutdown cancel
# out. Requests are counted from the server's access lines, exact whatever wrk had in flight when it stopped.
#   Benchmarks/scripts/per_request.sh BINARY [LOW HIGH]          default 2000 20000 (callgrind: a tenth of each)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BINARY [LOW HIGH]" >&2; exit 2; }
for tool in wrk perf strace valgrind python3; do
    command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 1; }
done
here=$(cd "$(dirname "$0")" && pwd)
binary=$(realpath "$1")
low=${2:-2000}
high=${3:-20000}
receipt=${RECEIPT:-$here/../../../shared/fixtures/apple/receipts/tpinapp_1.der}
work=$(mktemp -d)
server=""
cleanup() {
    [ -z "$server" ] || { kill -TERM "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; }
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run WRAPPER COUNT: serves COUNT validations under WRAPPER (may be empty); leaves the served count in $work/served and
# each thread's context switches, read before the stop, in $work/threads.
run() {
    local port pid
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    echo "{\"host\": \"127.0.0.1\", \"port\": $port, \"max_connections\": 2048}" >"$work/config.json"
    $1 "$binary" serve --config "$work/config.json" >"$work/stdout" 2>"$work/stderr" &
    server=$!
    curl -s --retry 50 --retry-connrefused --retry-delay 0 --retry-max-time 60 -o /dev/null \
        "http://127.0.0.1:$port/healthz"
    BODY_FILE=$receipt COUNT=$2 timeout 600 wrk -t1 -c4 -d600s -s "$here/wrk_post_count.lua" \
        "http://127.0.0.1:$port/v1/validate" >"$work/wrk.txt" 2>&1 || { cat "$work/wrk.txt" >&2; exit 1; }
    # A wrapper runs receiptd as its child (valgrind replaces itself, so it has none): that child is the server.
    pid=$(pgrep -P "$server" || echo "$server")
    cat /proc/"$pid"/task/*/status | awk '/^voluntary_ctxt/ {v = $2} /^nonvoluntary_ctxt/ {print v, $2}' \
        | sort -k1,1nr >"$work/threads"
    kill -TERM "$pid"
    wait "$server" || true
    server=""
    grep -c ' /v1/validate ' "$work/stdout" >"$work/served" || true
}

per_request() {  # per_request LOW_VALUE HIGH_VALUE LOW_SERVED HIGH_SERVED
    awk -v a="$1" -v b="$2" -v n="$3" -v m="$4" 'BEGIN { printf "%.3f", (b - a) / (m - n) }'
}

echo "== $(basename "$binary") ($binary), load $(cut -d' ' -f1-3 /proc/loadavg)"

declare -A served counts
for count in "$low" "$high"; do
    run "perf stat -x, -e context-switches,cpu-migrations,task-clock -o $work/perf.$count" "$count"
    served[$count]=$(cat "$work/served")
    cp "$work/threads" "$work/threads.$count"
done
echo "requests served: ${served[$low]} and ${served[$high]}"
for event in context-switches cpu-migrations task-clock; do
    a=$(awk -F, -v e="$event" '$3 == e {print $1}' "$work/perf.$low")
    b=$(awk -F, -v e="$event" '$3 == e {print $1}' "$work/perf.$high")
    unit=""; [ "$event" = task-clock ] && unit=" ms (CPU, all threads; the machine's load shows here)"
    echo "  $event per request: $(per_request "$a" "$b" "${served[$low]}" "${served[$high]}")$unit"
done
echo "  per thread, voluntary and involuntary switches per request (busiest first):"
paste "$work/threads.$low" "$work/threads.$high" | while read -r v1 n1 v2 n2; do
    echo "    $(per_request "$v1" "$v2" "${served[$low]}" "${served[$high]}")" \
        "$(per_request "$n1" "$n2" "${served[$low]}" "${served[$high]}")"
done

for count in "$low" "$high"; do
    run "strace -f -c -o $work/strace.$count" "$count"
    served[$count]=$(cat "$work/served")
done
echo "system calls per request (strace -f -c; requests served: ${served[$low]} and ${served[$high]}):"
calls() { awk -v c="$1" '$NF == c {print $4}' "$2"; }  # strace -c: % time, seconds, usecs/call, calls, [errors,] name
for call in $(awk 'NR > 2 && $NF != "total" && $1 !~ /^-/ {print $NF}' "$work/strace.$high"); do
    value=$(per_request "$(calls "$call" "$work/strace.$low")" "$(calls "$call" "$work/strace.$high")" \
        "${served[$low]}" "${served[$high]}")
    awk -v v="$value" 'BEGIN { exit !(v >= 0.005 || v <= -0.005) }' && printf '  %-14s %s\n' "$call" "$value"
done
echo "  all            $(per_request "$(calls total "$work/strace.$low")" "$(calls total "$work/strace.$high")" \
    "${served[$low]}" "${served[$high]}")"

for count in $((low / 10)) $((high / 10)); do
    run "valgrind --tool=callgrind --callgrind-out-file=$work/callgrind.%p" "$count"
    served[$count]=$(cat "$work/served")
    counts[$count]=$(awk '/Collected :/ {sum += $4} END {print sum}' "$work/stderr")
done
echo "instructions per request (callgrind, every thread; requests served: ${served[$((low / 10))]} and" \
    "${served[$((high / 10))]}): $(per_request "${counts[$((low / 10))]}" "${counts[$((high / 10))]}" \
    "${served[$((low / 10))]}" "${served[$((high / 10))]}" | cut -d. -f1)"
