#!/usr/bin/env bash
# Before/after figures taken in one sitting, alternating, so this shared machine's drift touches both sides alike.
# The other side is a detached git worktree under /tmp (never committed; kept between runs to save its release build:
# remove it with `git worktree remove --force DIR`). Load goes to 127.0.0.1 only, bounded in time.
#
#   Benchmarks/compare.sh split [ROUNDS]          issue 11: `receipt-bench inprocess` on 5636b17, the last commit
#                                                 before the module split (with its own Benchmarks), and on this tree
#   Benchmarks/compare.sh forged [REV] [ROUNDS]   issue 12: distinct forged receipts against genuine ones, in-process
#                                                 (`receipt-bench forged`) and over HTTP (wrk -c64), on REV with this
#                                                 tree's Benchmarks copied in, and on this tree. REV defaults to the
#                                                 commit before the TrustEvaluator pre-check.
#   Benchmarks/compare.sh token                   issue 17: POST /v1/validate through ReceiptRoutes without api_tokens
#                                                 and with a Bearer token, in instructions per validation (callgrind
#                                                 at 1,000 and 3,000 validations; the difference drops start-up)
#   Benchmarks/compare.sh real-path               issue 18: instructions per request of the server's intake on a
#                                                 realistic forged transaction JWS and on tpinapp_1, in process
#                                                 (ReceiptRoutes.handle) against their floors, and of a live
#                                                 `receiptd serve` answering them over one keep-alive connection
#                                                 (callgrind at 100 and 400 requests); then system calls per
#                                                 request (strace -c -f, 1,000 requests)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
fixtures=${FIXTURES:-$root/../shared/fixtures/apple}
duration=${DURATION:-5}
mode=${1:-}

worktree() {  # worktree REV DIR: a detached worktree of REV at DIR, unless DIR already holds one
    [ -d "$2/.git" ] || [ -f "$2/.git" ] || git -C "$root" worktree add --detach "$2" "$1" >/dev/null
}
build_bench() { (cd "$1/Benchmarks" && swift build -c release 2>&1 | tail -1); }
build_server() { (cd "$1" && swift build -c release --static-swift-stdlib --product receiptd 2>&1 | tail -1); }

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"

case "$mode" in
token)
    command -v valgrind >/dev/null || { echo "valgrind is needed (apt install valgrind)" >&2; exit 1; }
    build_bench "$root"
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
    per_validation() {  # per_validation MODE: instructions of one validation, start-up excluded
        local count total=()
        for count in 1000 3000; do
            valgrind --tool=callgrind --callgrind-out-file="$out/$1-$count" \
                "$root/Benchmarks/.build/release/receipt-bench" "$1" --fixtures "$fixtures" --count "$count" >/dev/null 2>&1
            total+=("$(awk '/^summary:/ {print $2}' "$out/$1-$count")")
        done
        echo $(((total[1] - total[0]) / 2000))
    }
    without=$(per_validation profile-route)
    with=$(per_validation profile-route-token)
    echo "instructions per POST /v1/validate: without api_tokens $without, with a Bearer token $with"
    awk -v a="$without" -v b="$with" 'BEGIN { printf "a token costs %+.2f%%\n", (b - a) * 100 / a }'
    ;;
real-path)
    command -v valgrind >/dev/null && command -v strace >/dev/null || { echo "valgrind and strace are needed" >&2; exit 1; }
    build_bench "$root"
    build_server "$root"
    bench=$root/Benchmarks/.build/release/receipt-bench
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
    collected() { awk '/Collected :/ {sum += $4} END {print sum}' "$1"; }
    per_call() {  # per_call MODE LOW HIGH: instructions of one call of a receipt-bench profile mode
        local count total=()
        for count in "$2" "$3"; do
            valgrind --tool=callgrind --callgrind-out-file="$out/$1-$count.cg" "$bench" "$1" --fixtures "$fixtures" \
                --count "$count" >/dev/null 2>"$out/$1-$count.err"
            total+=("$(collected "$out/$1-$count.err")")
        done
        echo $(((total[1] - total[0]) / ($3 - $2)))
    }
    "$bench" write-real-path --fixtures "$fixtures" --out "$out/pki" >/dev/null
    free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
    served() {  # served WRAPPER COUNT BODY TYPE: runs receiptd under WRAPPER while COUNT requests are answered
        local port server
        port=$(free_port)
        printf '{"host": "127.0.0.1", "port": %s, "trusted_roots": ["%s"]}\n' "$port" "$out/pki/jws-root.pem" >"$out/config.json"
        $1 "$root/.build/release/receiptd" serve --config "$out/config.json" >/dev/null 2>>"$out/served.err" &
        server=$!
        python3 "$here/scripts/post_requests.py" --port "$port" --count "$2" --body "$3" --type "$4"
        # valgrind runs receiptd in its own process; strace runs it as a child, which must be the one stopped.
        kill -TERM "$(pgrep -P "$server" || echo "$server")"
        wait "$server" || true
    }
    server_per_request() {  # server_per_request BODY TYPE: instructions of a live server per request
        local count total=()
        for count in 100 400; do
            : >"$out/served.err"
            served "valgrind --tool=callgrind --callgrind-out-file=$out/served-$count.cg" "$count" "$1" "$2"
            total+=("$(collected "$out/served.err")")
        done
        echo $(((total[1] - total[0]) / 300))
    }
    jws_floor=$(per_call profile-floor-jws 100 400)
    jws_route=$(per_call profile-real-path 100 400)
    receipt_floor=$(per_call profile-floor 1000 3000)
    receipt_route=$(per_call profile-route 1000 3000)
    jws_served=$(server_per_request "$out/pki/transaction.jws" text/plain)
    receipt_served=$(server_per_request "$fixtures/receipts/tpinapp_1.der" application/octet-stream)
    report() {
        awk -v name="$1" -v floor="$2" -v route="$3" -v served="$4" 'BEGIN {
            printf "%-10s floor %9d   in process %9d (%.2fx floor)   served over HTTP %9d (%.2fx floor, +%d for HTTP)\n",
                name, floor, route, route / floor, served, served / floor, served - route }'
    }
    echo "instructions per request (callgrind, start-up excluded):"
    report "JWS" "$jws_floor" "$jws_route" "$jws_served"
    report "tpinapp_1" "$receipt_floor" "$receipt_route" "$receipt_served"
    served "strace -c -f -o $out/strace.txt" 1000 "$out/pki/transaction.jws" text/plain
    echo "system calls of a live server answering 1,000 JWS requests on one keep-alive connection (start-up included):"
    awk '$NF ~ /^(epoll_wait|read|sendto|write|epoll_ctl|futex|getrandom)$/ {print "  " $NF ": " $4 " calls"}' \
        "$out/strace.txt"
    ;;
split)
    rounds=${2:-3}
    before=${BEFORE_TREE:-/tmp/receiptd-before-5636b17}
    worktree 5636b17 "$before"
    build_bench "$before"
    build_bench "$root"
    for round in $(seq "$rounds"); do
        for side in before after; do
            tree=$root
            [ "$side" = before ] && tree=$before
            out=$("$tree/Benchmarks/.build/release/receipt-bench" inprocess --fixtures "$fixtures")
            floor=$(awk '/^signature-only floor/ {print $(NF-1)}' <<<"$out")
            full=$(awk '/^receiptd full validation/ {print $(NF-3)}' <<<"$out")
            ratio=$(awk '/^ratio full \/ floor/ {print $5}' <<<"$out")
            printf 'round %s %-6s floor %8s µs  full %8s µs  ratio full/floor %s\n' "$round" "$side" "$floor" "$full" "$ratio"
        done
    done
    ;;
forged)
    rev=${2:-$(git -C "$root" log --format=%H -1 -- Sources/ReceiptEngine/TrustEvaluator.swift)^}
    rounds=${3:-2}
    short=$(git -C "$root" rev-parse --short "$rev")
    before=${BEFORE_TREE:-/tmp/receiptd-compare-$short}
    worktree "$rev" "$before"
    mkdir -p "$before/Benchmarks"
    cp -r "$here/Package.swift" "$here/Sources" "$here/scripts" "$before/Benchmarks/"
    for tree in "$before" "$root"; do build_bench "$tree"; build_server "$tree"; done
    echo "== before: $short; after: this tree ($(git -C "$root" rev-parse --short HEAD))"
    echo
    echo "== in-process, alternating"
    for round in $(seq "$rounds"); do
        for side in before after; do
            tree=$root
            [ "$side" = before ] && tree=$before
            out=$("$tree/Benchmarks/.build/release/receipt-bench" forged --fixtures "$fixtures")
            printf 'round %s %-6s genuine %s µs  forged %s µs  forged/genuine %s\n' "$round" "$side" \
                "$(awk '/^genuine/ {print $(NF-1)}' <<<"$out")" "$(awk '/^distinct forged/ {print $(NF-1)}' <<<"$out")" \
                "$(sed -n 's/^forged_receipt_ratio=//p' <<<"$out")"
        done
    done

    echo
    echo "== HTTP on loopback, wrk -t1 -c64 ${duration}s per run, keep-alive; both servers up, used in turn"
    work=$(mktemp -d)
    pids=()
    cleanup() {
        for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
        rm -rf "$work"
    }
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    ulimit -n 8192
    command -v wrk >/dev/null || apt-get install -y wrk >/dev/null
    "$root/Benchmarks/.build/release/receipt-bench" forge-receipts --fixtures "$fixtures" --out "$work/forged" --count 512
    declare -A url
    for side in before after; do
        tree=$root
        [ "$side" = before ] && tree=$before
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        echo "{\"host\": \"127.0.0.1\", \"port\": $port, \"max_connections\": 2048}" >"$work/$side.json"
        "$tree/.build/release/receiptd" serve --config "$work/$side.json" >/dev/null 2>"$work/$side.log" &
        pids+=($!)
        url[$side]=http://127.0.0.1:$port
        for _ in $(seq 200); do curl -sf "${url[$side]}/healthz" >/dev/null && break; sleep 0.05; done
        # One genuine receipt first: a running server has long decided Apple's chain.
        curl -sf -H 'Content-Type: application/octet-stream' --data-binary @"$fixtures/receipts/tpinapp_1.der" \
            "${url[$side]}/v1/validate" >/dev/null
    done
    rps() {
        wrk -t1 -c64 -d"${duration}s" "$@" | awk '/^Requests\/sec:/ {print $2}'
    }
    for round in $(seq "$rounds"); do
        for side in before after; do
            genuine=$(RECEIPT_FILE=$fixtures/receipts/tpinapp_1.der rps -s "$here/scripts/wrk_validate.lua" "${url[$side]}/v1/validate")
            forged=$(RECEIPT_DIR=$work/forged rps -s "$here/scripts/wrk_validate_many.lua" "${url[$side]}/v1/validate")
            python3 -c "print(f'round $round $side'.ljust(16) + f'genuine {$genuine:9.0f}/s  forged {$forged:9.0f}/s  cost forged/genuine {$genuine / $forged:.2f}x')"
        done
    done
    ;;
*)
    sed -n '2,12p' "$0"
    exit 2
    ;;
esac
