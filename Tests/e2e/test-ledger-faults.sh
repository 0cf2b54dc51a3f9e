#!/usr/bin/env bash
# A live receiptd whose PostgreSQL hangs (SIGSTOP of the postmaster and its children, not a shutdown): /readyz says
# why at once, every ledger request answers within a bound (store_timeout 1 s here) instead of waiting for the
# freeze, threads stay few, the cause is logged once, and all comes back after SIGCONT. Then a SQLite server asked
# for 50,000 distinct unknown 64-character ids grows by less than 20 MB.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
. "$HERE/ledger-lib.sh"
WORK="$(mktemp -d)"
POSTMASTER=""
cleanup() {
    if [ -n "$POSTMASTER" ]; then kill -CONT $(pgrep -P "$POSTMASTER") "$POSTMASTER" 2>/dev/null || true; fi
    stop_server >/dev/null 2>&1 || true
    pg_stop
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "test-ledger-faults: FAIL: $*" >&2; [ -z "${SERVER_LOG:-}" ] || cat "$SERVER_LOG" >&2; exit 1; }
threads() { awk '/^Threads:/ { print $2 }' "/proc/$RECEIPTD_PID/status"; }

if pg_available; then
    pg_start
    printf '{"store": {"postgres": "%s"}, "store_timeout": 1}\n' "$PG_CONNINFO" >"$WORK/postgres.json"
    start_server "$WORK/postgres.json"
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE_URL/readyz")" = 200 ] || fail "not ready before the freeze"
    before="$(threads)"

    POSTMASTER="$(head -n 1 "$PG_DIR/data/postmaster.pid")"
    kill -STOP "$POSTMASTER" $(pgrep -P "$POSTMASTER")
    # Forty requests at once: each must answer 503 (never wait for the freeze, which outlasts curl's bound).
    clients=()
    for i in $(seq 1 40); do
        curl -s -o /dev/null --max-time 3 -w '%{http_code}\n' "$BASE_URL/v1/transactions/frozen-$i" >"$WORK/answer.$i" &
        clients+=($!)
    done
    wait "${clients[@]}"
    for i in $(seq 1 40); do
        [ "$(cat "$WORK/answer.$i")" = 503 ] || fail "ledger request $i during the freeze: $(cat "$WORK/answer.$i")"
    done
    during="$(threads)"
    [ "$during" -le $((before + 40)) ] || fail "threads grew from $before to $during during the freeze"
    ready="$(curl -s --max-time 1 "$BASE_URL/readyz")" || fail "/readyz did not answer within 1 s during the freeze"
    [ "$(jq -r '.status + " " + .store + " " + .reason' <<<"$ready")" = "not_ready unavailable timeout" ] \
        || fail "/readyz during the freeze: $ready"
    # Known unavailable: a ledger request now answers without trying the database.
    [ "$(curl -s -o /dev/null --max-time 1 -w '%{http_code}' "$BASE_URL/v1/subscriptions/frozen")" = 503 ] \
        || fail "a ledger request once the freeze was known did not answer 503 within 1 s"

    kill -CONT $(pgrep -P "$POSTMASTER") "$POSTMASTER"
    POSTMASTER=""
    for _ in $(seq 1 100); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE_URL/readyz")" = 200 ] && break
        sleep 0.1
    done
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE_URL/readyz")" = 200 ] || fail "not ready after SIGCONT"
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE_URL/v1/transactions/thawed")" = 404 ] \
        || fail "the ledger does not answer after SIGCONT"
    [ "$(grep -c ' ledger unavailable reason=timeout' "$SERVER_LOG")" = 1 ] \
        || fail "the freeze should be logged once with reason=timeout"
    grep -q ' ledger available' "$SERVER_LOG" || fail "the recovery is not logged"
    stop_server
    pg_stop
else
    skip_line "PostgreSQL server binaries not found: the frozen-database part is skipped"
fi

printf '{"store": {"sqlite": "ledger.sqlite"}}\n' >"$WORK/sqlite.json"
start_server "$WORK/sqlite.json"
python3 - "$BASE_URL" "$RECEIPTD_PID" <<'EOF' || fail "unknown ids grew memory"
import http.client, os, sys, urllib.parse
url, pid = urllib.parse.urlsplit(sys.argv[1]), sys.argv[2]
def resident_kb():
    return int(next(line for line in open(f"/proc/{pid}/status") if line.startswith("VmRSS")).split()[1])
connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
def lookup(id):
    connection.request("GET", "/v1/subscriptions/" + id)
    response = connection.getresponse()
    response.read()
    return response.status
lookup("warm-up")
before = resident_kb()
for _ in range(50_000):
    assert lookup(os.urandom(32).hex()) == 404
grown = resident_kb() - before
print(f"50,000 unknown ids: resident memory grew by {grown} kB")
sys.exit(0 if grown < 20 * 1024 else 1)
EOF
stop_server
echo "test-ledger-faults: ok"
