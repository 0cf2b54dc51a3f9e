#!/usr/bin/env bash
# Notification ingest over HTTP (issue 25): COUNT distinct forged notifications posted by SENDERS concurrent senders
# (keep-alive connections of one wrk thread) to a running `receiptd serve`, the path Apple's notifications take
# (POST /v1/notifications: verify the envelope and its two nested JWS, store, answer 200 after the commit). Once on a
# new SQLite file and once on a new database of a throwaway PostgreSQL cluster (Unix socket, as ../shared/TOOLS.md).
# The config has one webhook (http to a local receiver, allow_http) so that events are stored with the notifications;
# a receiptd that does not know `webhooks` yet is run without it, and the output says so. Loopback only, bounded.
#
#   Benchmarks/scripts/ingest.sh                          SQLite and PostgreSQL, 4,000 notifications each
#   COUNT=2000 STORES=postgres Benchmarks/scripts/ingest.sh
#   RECEIPTD=.build/release/receiptd BENCH=Benchmarks/.build/release/receipt-bench Benchmarks/scripts/ingest.sh
#                                                         binaries already built (otherwise built here, release)
#   DELIVERY_WAIT=120 Benchmarks/scripts/ingest.sh       also wait (at most 120 s) for every event at the receiver
#                                                         and print events/s there (Benchmarks/scripts/delivery.sh)
#   STATEMENTS=1 STORES=postgres Benchmarks/scripts/ingest.sh
#                                                         also print PostgreSQL's statements per notification and
#                                                         where its time went (pg_stat_statements, loaded for the run)
#   WEBHOOK=none Benchmarks/scripts/ingest.sh            without the webhook: no events stored, nothing delivered
#   WEBHOOK=hung Benchmarks/scripts/ingest.sh            the webhook's receiver accepts connections and never answers:
#                                                         events stored, almost none delivered during the run (what
#                                                         the deliveries cost is the difference with the default)
#   WEBHOOK=failing Benchmarks/scripts/ingest.sh         the receiver answers every event 500: each is tried once, then
#                                                         waits out its back-off while the backlog grows behind it
#   CPU=1 Benchmarks/scripts/ingest.sh                   also print the CPU time each process spent per notification
#                                                         (receiptd by thread name, wrk, PostgreSQL's processes, the
#                                                         receiver), and receiptd's and PostgreSQL's fsyncs and context
#                                                         switches (perf stat on syscall tracepoints; needs perf;
#                                                         it follows the PostgreSQL processes there were at the start,
#                                                         not the writers' backends, which start with the first writes)
#   WALL=1 STORES=sqlite Benchmarks/scripts/ingest.sh   also print where receiptd's busiest thread (on SQLite, the one
#                                                         writer) spent its wall time during the run: running, waiting
#                                                         for a core, the commit's disk waits, sleeps (perf sched
#                                                         record of the whole machine, then thread_wall.awk; needs perf)
#   PERF_EVENTS=syscalls:sys_enter_sendto CPU=1 Benchmarks/scripts/ingest.sh
#                                                         also count these perf events (comma-separated) per
#                                                         notification, receiptd's and PostgreSQL's together
# Prints, per store, notifications/s from the first request to the last answer, and what the store then holds.
set -euo pipefail

benchmarks=$(cd "$(dirname "$0")/.." && pwd)
root=$(dirname "$benchmarks")
count=${COUNT:-4000}
senders=${SENDERS:-16}
stores=${STORES:-sqlite postgres}

if [ -z "${RECEIPTD:-}" ]; then
    (cd "$root" && swift build -c release --product receiptd 2>&1 | tail -1)
    RECEIPTD=$root/.build/release/receiptd
fi
if [ -z "${BENCH:-}" ]; then
    (cd "$benchmarks" && swift build -c release 2>&1 | tail -1)
    BENCH=$benchmarks/.build/release/receipt-bench
fi
command -v wrk >/dev/null || { echo "ingest.sh needs wrk (apt-get install -y wrk)" >&2; exit 2; }

work=$(mktemp -d)
chmod 755 "$work"
server=""
receiver=""
cluster=""
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
    for pid in $server $receiver; do
        if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; fi
    done
    if [ -n "$cluster" ]; then as_postgres "$pg/pg_ctl" -D "$cluster/data" -m fast -w stop >/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# CPU time in ms (user + system) of each pid given, summed; a pid gone meanwhile counts 0. Field 2 (comm) may hold
# spaces, so the fields are counted after its closing parenthesis.
cpu_ms() {
    local ticks=0 pid
    for pid in "$@"; do
        [ -r "/proc/$pid/stat" ] || continue
        ticks=$((ticks + $(sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}')))
    done
    echo $((ticks * 1000 / $(getconf CLK_TCK)))
}
# Every CPU's busy time in ms since boot (/proc/stat: all but idle and iowait): what the processes above leave out
# (interrupts, perf itself, anything else running) shows as the difference.
machine_busy_ms() {
    awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" {print int(($2 + $3 + $4 + $7 + $8 + $9) * 1000 / hz)}' /proc/stat
}
# receiptd's CPU ms by thread name ("name ms" lines).
thread_cpu_ms() {
    local task stat
    for task in /proc/$1/task/*; do
        # Dispatch's idle threads end at any moment; their time stays in the process's total.
        stat=$(cat "$task/stat" 2>/dev/null) || continue
        printf '%s %s\n' "$(tr ' ' _ <"$task/comm" 2>/dev/null)" "$(echo "${stat##*) }" | awk '{print $12 + $13}')"
    done | awk -v hz="$(getconf CLK_TCK)" '{t[$1] += $2} END {for (n in t) printf "%s %d\n", n, t[n] * 1000 / hz}'
}
# receiptd's CPU ticks by thread id ("tid ticks" lines), to find its busiest thread: SQLite's one writer.
tid_ticks() {
    local task stat
    for task in /proc/$1/task/*; do
        stat=$(cat "$task/stat" 2>/dev/null) || continue
        echo "${task##*/} $(echo "${stat##*) }" | awk '{print $12 + $13}')"
    done | LC_ALL=C sort
}
# receiptd's busiest thread since the `tid_ticks` given: "tid ticks" (a thread started since counts from 0).
busiest_thread() {
    LC_ALL=C join -a2 -e0 -o 0,1.2,2.2 <(echo "$1") <(tid_ticks "$server") |
        awk '$3 - $2 > max {max = $3 - $2; tid = $1} END {print tid, max}'
}
# CPU ms of each pid given ("pid ms" lines, sorted for join).
pid_cpu_ms() {
    local pid
    for pid in "$@"; do echo "$pid $(cpu_ms "$pid")"; done | LC_ALL=C sort
}
# This cluster's postmaster and its children (other clusters on the machine are not ours to count).
postgres_pids() {
    local postmaster
    postmaster=$(head -1 "$cluster/data/postmaster.pid")
    echo "$postmaster,$(pgrep -d, -P "$postmaster")"
}

# CLOCK_MONOTONIC in seconds, the clock `perf sched record -k CLOCK_MONOTONIC` stamps its events with.
monotonic() { python3 -c 'import time; print(time.monotonic())'; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

"$BENCH" forge-notifications --count "$count" --out "$work/forged" >/dev/null
receiver_port=$(free_port)
head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=' >"$work/webhook.secret"
case ${WEBHOOK:-live} in
live | hung | failing | none) ;;
*) echo "WEBHOOK is live, hung, failing or none, not $WEBHOOK" >&2; exit 2 ;;
esac
webhooks="\"webhooks\": [{\"name\": \"bench\", \"url\": \"http://127.0.0.1:$receiver_port/events\", \"secret_file\": \"$work/webhook.secret\", \"allow_http\": true}],"

echo "== $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $count distinct notifications, $senders senders"

# Starts the server on the store given as JSON; without the webhook if this receiptd refuses the key.
start_server() {
    local store=$1 with=$2
    port=$(free_port)
    printf '{"host": "127.0.0.1", "port": %s, "trusted_roots": ["%s"], %s "store": %s}\n' \
        "$port" "$work/forged/jws-root.pem" "$with" "$store" >"$work/config.json"
    "$RECEIPTD" serve --config "$work/config.json" >/dev/null 2>"$work/server.log" &
    server=$!
    for _ in $(seq 200); do
        curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return 0
        kill -0 "$server" 2>/dev/null || break
        sleep 0.05
    done
    wait "$server" 2>/dev/null || true
    server=""
    return 1
}

stop_server() { kill -TERM "$server"; wait "$server" 2>/dev/null || true; server=""; }

for store in $stores; do
    case $store in
    sqlite)
        sqlite_path=$work/ledger-$RANDOM.sqlite
        store_json="{\"sqlite\": \"$sqlite_path\"}"
        count_rows() { sqlite3 "$sqlite_path" "$1"; }
        tables="SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%event%' ORDER BY name LIMIT 1"
        ;;
    postgres)
        if [ -z "$cluster" ]; then
            pg=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
            cluster=$work/pg
            mkdir "$cluster"
            [ "$(id -u)" = 0 ] && chown postgres "$cluster"
            as_postgres "$pg/initdb" -D "$cluster/data" -A trust -U postgres >/dev/null
            statements=""
            [ -n "${STATEMENTS:-}" ] && statements="-c shared_preload_libraries=pg_stat_statements"
            as_postgres "$pg/pg_ctl" -D "$cluster/data" -o "-k $cluster -c listen_addresses='' $statements" \
                -l "$cluster/log" -w start >/dev/null
        fi
        database=ingest_$RANDOM
        as_postgres "$pg/createdb" -h "$cluster" -U postgres "$database"
        [ -n "${STATEMENTS:-}" ] && psql -qtA -h "$cluster" -U postgres -d "$database" \
            -c "CREATE EXTENSION pg_stat_statements" >/dev/null
        store_json="{\"postgres\": \"host=$cluster user=postgres dbname=$database\"}"
        count_rows() { psql -qtA -h "$cluster" -U postgres -d "$database" -c "$1"; }
        tables="SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name LIKE '%event%' ORDER BY table_name LIMIT 1"
        ;;
    *) echo "unknown store $store (sqlite or postgres)" >&2; exit 2 ;;
    esac
    # A fresh receiver per store: it reports once COUNT distinct events (one RENEWAL per DID_RENEW) arrived.
    rm -f "$work/delivery.txt"
    if [ "${WEBHOOK:-live}" = hung ]; then
        # A listening socket nobody accepts from: the kernel completes the handshakes, the requests go unanswered.
        python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1024); time.sleep(86400)' "$receiver_port" &
    else
        status=200
        [ "${WEBHOOK:-live}" = failing ] && status=500
        python3 "$benchmarks/scripts/webhook_receiver.py" --port "$receiver_port" --expect "$count" \
            --report "$work/delivery.txt" --status "$status" >/dev/null &
    fi
    receiver=$!
    events="with one webhook (events stored, receiver ${WEBHOOK:-live})"
    if [ "${WEBHOOK:-live}" = none ]; then
        events="WITHOUT the webhook (WEBHOOK=none): no events"
        start_server "$store_json" "" || { cat "$work/server.log" >&2; exit 1; }
    elif ! start_server "$store_json" "$webhooks"; then
        grep -q webhooks "$work/server.log" || { cat "$work/server.log" >&2; exit 1; }
        events="WITHOUT events: this receiptd does not know \"webhooks\" yet"
        start_server "$store_json" "" || { cat "$work/server.log" >&2; exit 1; }
    fi
    if [ -n "${STATEMENTS:-}" ] && [ "$store" = postgres ]; then count_rows "SELECT pg_stat_statements_reset()" >/dev/null; fi
    if [ -n "${WALL:-}" ]; then
        wall_tids_before=$(tid_ticks "$server")
        perf sched record -k CLOCK_MONOTONIC -a -g -o "$work/sched.data" >/dev/null 2>&1 &
        sched_pid=$!
        # perf needs a moment before it records; the file's header is written once it does.
        for _ in $(seq 50); do [ -s "$work/sched.data" ] && break; sleep 0.1; done
    fi
    if [ -n "${CPU:-}" ]; then
        server_before=$(thread_cpu_ms "$server" | LC_ALL=C sort)
        server_total_before=$(cpu_ms "$server")
        tids_before=$(tid_ticks "$server")
        pg_pids=""
        [ "$store" = postgres ] && pg_pids=$(postgres_pids)
        pg_before=$(pid_cpu_ms ${pg_pids//,/ })
        receiver_before=$(cpu_ms "$receiver")
        perf stat -x, -e ${PERF_EVENTS:+$PERF_EVENTS,}syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync,syscalls:sys_enter_pread64,syscalls:sys_enter_pwrite64,context-switches \
            -p "$server${pg_pids:+,$pg_pids}" -o "$work/perf.txt" &
        perf_pid=$!
        times >"$work/times-before"
        machine_before=$(machine_busy_ms)
    fi
    [ -n "${WALL:-}" ] && wall_from=$(monotonic)
    started=$(date +%s.%N)
    BODY_DIR=$work/forged/notifications wrk -t1 -c"$senders" -d600s -s "$benchmarks/scripts/wrk_post_dir_count.lua" \
        "http://127.0.0.1:$port/v1/notifications" >/dev/null
    finished=$(date +%s.%N)
    [ -n "${WALL:-}" ] && wall_to=$(monotonic)
    if [ -n "${CPU:-}" ]; then
        times >"$work/times-after"
        machine_after=$(machine_busy_ms)
        kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null || true
        seconds=$(python3 -c "print($finished - $started)")
        # `times` (in this shell: a subshell's would be its own) gives the children's user and system time; wrk is the
        # one child reaped during the run.
        wrk_ms=$(python3 - "$(tail -1 "$work/times-before")" "$(tail -1 "$work/times-after")" <<'PY'
import re, sys
def ms(line):
    return sum(float(m) * 60000 + float(s) * 1000 for m, s in re.findall(r"(\d+)m([\d.]+)s", line))
print(round(ms(sys.argv[2]) - ms(sys.argv[1])))
PY
)
        echo "$store: CPU ms per 1,000 notifications over ${seconds:0:5} s (1,000 ms per 1,000 = one core busy at 1,000/s):"
        echo "    receiptd (every thread, ended ones too) $(python3 -c "print(round(($(cpu_ms "$server") - $server_total_before) * 1000 / $count))")"
        busiest_thread "$tids_before" | awk -v n="$count" -v hz="$(getconf CLK_TCK)" \
            '{printf "      its busiest thread                  %6.0f\n", $2 * 1000 / hz * 1000 / n}'
        LC_ALL=C join -a2 -e0 -o 0,1.2,2.2 <(echo "$server_before") <(thread_cpu_ms "$server" | LC_ALL=C sort) |
            awk -v n="$count" '$3 - $2 > 0 {printf "      threads named %-20s %6.0f\n", $1, ($3 - $2) * 1000 / n}' | sort -k4 -rn
        echo "    wrk (16 senders, one thread)            $(python3 -c "print(round($wrk_ms * 1000 / $count))")"
        # The writers' backends start with the first writes, after `pg_pids` was read: counted whole.
        [ -n "$pg_pids" ] && echo "    postgres (every process)                $(LC_ALL=C join -a2 -e0 -o 0,1.2,2.2 \
            <(echo "$pg_before") <(pid_cpu_ms $(postgres_pids | tr , ' ')) |
            awk -v n="$count" '{sum += $3 - $2} END {printf "%d", sum * 1000 / n}')"
        echo "    webhook receiver (python)               $(python3 -c "print(round(($(cpu_ms "$receiver") - $receiver_before) * 1000 / $count))")"
        machine_ms=$(((machine_after - machine_before) * 1000 / count))
        echo "    the whole machine (every process, interrupts, perf itself) $machine_ms"
        awk -F, -v n="$count" -v s="$seconds" 'NF > 2 && $1 ~ /^[0-9]+$/ {printf "    %-39s %6.2f per notification, %.0f/s\n", $3, $1 / n, $1 / s}' "$work/perf.txt"
    fi
    if [ -n "${WALL:-}" ]; then
        # The thread that spent the most CPU during the run; the perf data covers the whole machine, so only its runs
        # are read, from the first request to the last answer. Started before and stopped after the CPU figures above,
        # so that they hold only perf's recording. The thread's sleep before its first run is not counted.
        kill -INT "$sched_pid"; wait "$sched_pid" 2>/dev/null || true
        busiest=$(busiest_thread "$wall_tids_before" | cut -d' ' -f1)
        echo "$store: the wall time of receiptd's busiest thread ($busiest, $(tr ' ' _ <"/proc/$server/task/$busiest/comm" 2>/dev/null)) during the run:"
        perf sched timehist -i "$work/sched.data" --time "$wall_from,$wall_to" -t "$busiest" -g --state 2>/dev/null |
            awk -v count="$count" -f "$benchmarks/scripts/thread_wall.awk"
    fi
    delivery=""
    if [ -n "${DELIVERY_WAIT:-}" ] && [ "${events:0:4}" = with ]; then
        for _ in $(seq $((DELIVERY_WAIT * 10))); do [ -s "$work/delivery.txt" ] && break; sleep 0.1; done
        delivery=$(cat "$work/delivery.txt" 2>/dev/null || echo "not every event arrived within $DELIVERY_WAIT s")
    fi
    stop_server
    kill -TERM "$receiver"; wait "$receiver" 2>/dev/null || true; receiver=""
    stored=$(count_rows "SELECT count(*) FROM notifications")
    event_table=$(count_rows "$tables")
    event_count=${event_table:+$(count_rows "SELECT count(*) FROM $event_table") in $event_table}
    rate=$(python3 -c "print(round($count / ($finished - $started)))")
    echo "$store: $rate notifications/s ($count posted, $stored stored, events: ${event_count:-no table}; $events)"
    if [ -n "$delivery" ]; then echo "$store: delivered to the receiver: $delivery"; fi
    if [ -n "${STATEMENTS:-}" ] && [ "$store" = postgres ]; then
        # The dispatcher's claims and finishes are in the figures too; the per-statement lines tell them apart.
        echo "$store: $(count_rows "SELECT round(sum(calls)::numeric / $count, 1) || ' statements per notification, ' ||
            round(sum(total_exec_time)::numeric / $count * 1000) || ' us of execution per notification'
            FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())")"
        count_rows "SELECT calls, round(total_exec_time::numeric / calls * 1000) || ' us', rows,
            left(regexp_replace(query, '\s+', ' ', 'g'), 90) FROM pg_stat_statements
            WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
            ORDER BY total_exec_time DESC LIMIT 20" | sed 's/^/    /'
    fi
done
