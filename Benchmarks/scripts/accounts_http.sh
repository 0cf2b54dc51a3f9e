#!/usr/bin/env bash
# Issue 24's speed point as users call it: GET /v1/accounts/{account} against GET /v1/subscriptions/{id} of one of its
# subscriptions, over HTTP on loopback, one keep-alive connection (wrk -t1 -c1), for two receiptd binaries taking
# turns. The ledger is receipt-bench's (`write-accounts`: 2,002 accounts, `spread` of 67/67/66 renewals and `long` of
# 190/5/5), written once and served by each binary in turn; each binary answers every target once before it is timed,
# so that what it keeps across requests is kept. Each figure is printed with /proc/loadavg.
#   flock /tmp/receiptd-bench.lock Benchmarks/scripts/accounts_http.sh OLD_BINARY NEW_BINARY [ROUNDS] [SECONDS]
#   RECEIPT_BENCH=path (default Benchmarks/.build/release/receipt-bench) makes the ledger; LEDGER=DIR serves one it
#   made before (`receipt-bench write-accounts --out DIR`), so that the lock is not held while it is filled.
#   ONE_CORE=1 runs the server and wrk on CPU 0 only, as a one-core machine would: the client's reading of each answer
#   then takes turns with the server's work instead of overlapping it.
#   CPU_TIME=1 also prints the CPU each request cost the server and wrk (perf stat task-clock), which other work on the
#   machine moves far less than the rates; their sums' ratio is what one core would see.
#   Each binary serves its own copy of the ledger: a newer one migrates the file it opens, which an older one then
#   refuses.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OLD_BINARY NEW_BINARY [ROUNDS] [SECONDS]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
bench=${RECEIPT_BENCH:-$here/../.build/release/receipt-bench}
rounds=${3:-3}
seconds=${4:-3}
work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill -TERM "$server" 2>/dev/null; rm -rf "$work"' EXIT
if [ -n "${LEDGER:-}" ]; then
    cp "$LEDGER/config.json" "$work/config.json"
else
    "$bench" write-accounts --out "$work" >/dev/null
fi
pin=()
[ -n "${ONE_CORE:-}" ] && pin=(taskset -c 0)
timed=()
[ -n "${CPU_TIME:-}" ] && timed=(perf stat -x, -e task-clock -o "$work/wrk-cpu.txt")
bytes=()
targets=(/v1/accounts/spread /v1/subscriptions/1000000001 /v1/accounts/long /v1/subscriptions/1000000011)
for round in $(seq 1 "$rounds"); do
    for side in old new; do
        if [ "$side" = old ]; then binary=$1; else binary=$2; fi
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        if [ ! -e "$work/ledger-$side.sqlite" ]; then
            cp "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["store"]["sqlite"])' \
                "$work/config.json")" "$work/ledger-$side.sqlite"
        fi
        python3 - "$work/config.json" "$port" "$work/ledger-$side.sqlite" >"$work/serve.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config.update(host="127.0.0.1", port=int(sys.argv[2]), store={"sqlite": sys.argv[3]})
print(json.dumps(config))
PY
        "${pin[@]}" "$binary" serve --config "$work/serve.json" >/dev/null 2>"$work/server.log" &
        server=$!
        curl -s --retry 20 --retry-connrefused --retry-delay 0 -o /dev/null "http://127.0.0.1:$port/healthz"
        for target in "${targets[@]}"; do
            curl -sf -o "$work/body" "http://127.0.0.1:$port$target" || { cat "$work/server.log" >&2; exit 1; }
            bytes[${#bytes[@]}]=$(wc -c <"$work/body")
        done
        line="round $round $side:"
        for target in "${targets[@]}"; do
            if [ -n "${CPU_TIME:-}" ]; then
                perf stat -x, -e task-clock -p "$server" -o "$work/server-cpu.txt" -- \
                    "${timed[@]}" "${pin[@]}" wrk -t1 -c1 -d"${seconds}s" "http://127.0.0.1:$port$target" \
                    >"$work/wrk.txt" 2>&1
            else
                "${pin[@]}" wrk -t1 -c1 -d"${seconds}s" --latency "http://127.0.0.1:$port$target" >"$work/wrk.txt" 2>&1
            fi
            rate=$(awk '/Requests\/sec/ {print $2}' "$work/wrk.txt")
            line+=" $target $rate/s (load $(cut -d' ' -f1 /proc/loadavg))"
            if [ -n "${CPU_TIME:-}" ]; then
                requests=$(awk '/requests in/ {print $1}' "$work/wrk.txt")
                cpu() { awk -F, -v n="$requests" '/task-clock/ {printf "%.0f", $1 * 1000 / n}' "$1"; }
                server_us=$(cpu "$work/server-cpu.txt") wrk_us=$(cpu "$work/wrk-cpu.txt")
                line+=" server $server_us us + wrk $wrk_us us CPU a request"
                printf -v "cpu_${side}_${round}_$(basename "$target")" '%s' $((server_us + wrk_us))
            fi
            line+=";"
            printf -v "rate_${side}_${round}_$(basename "$target")" '%s' "$rate"
        done
        kill -TERM "$server"
        wait "$server" || true
        server=
        echo "$line"
        spread=rate_${side}_${round}_spread sub=rate_${side}_${round}_1000000001
        long=rate_${side}_${round}_long sub11=rate_${side}_${round}_1000000011
        awk -v a="${!spread}" -v s="${!sub}" -v l="${!long}" -v t="${!sub11}" -v label="round $round $side" \
            'BEGIN { printf "%s: spread account / its 67-renewal subscription %.2fx; " \
                "long account / its 190-renewal subscription %.2fx\n", label, s / a, t / l }'
        if [ -n "${CPU_TIME:-}" ]; then
            spread=cpu_${side}_${round}_spread sub=cpu_${side}_${round}_1000000001
            long=cpu_${side}_${round}_long sub11=cpu_${side}_${round}_1000000011
            awk -v a="${!spread}" -v s="${!sub}" -v l="${!long}" -v t="${!sub11}" -v label="round $round $side" \
                'BEGIN { printf "%s, in server and wrk CPU: spread %.2fx; long %.2fx\n", label, a / s, l / t }'
        fi
    done
done
echo "bytes per answer (account, subscription; long account, subscription): ${bytes[*]:0:4}"
