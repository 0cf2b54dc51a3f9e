#!/usr/bin/env bash
# A 200 from the ledger is a promise that survives a crash, and concurrent writers never store anything twice.
#
# 1. SQLite, kill -9: claims (and, once `receiptd testing notification` exists, forged notifications) are posted 8 at
#    a time and the server is killed with SIGKILL midway. After a restart every claim and notification that got 200
#    is there (re-claiming says first_claim false, another account gets 409; re-posting says duplicate), the rest
#    can be posted again, and each notification is stored exactly once.
# 2. PostgreSQL (a throwaway cluster on a Unix socket, started here): two `receiptd serve` processes on one database
#    (through RECEIPTD_STORE_POSTGRES) take the same claims and notifications at once: exactly one claim per
#    transaction wins, each notification is stored once (one of the two deliveries says duplicate), and both servers
#    give the same, right, final subscription state.
# Loopback and a Unix socket only; every request is bounded (curl --max-time), and so is every wait.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
. "$HERE/ledger-lib.sh"
command -v jq >/dev/null || { echo "test-ledger-crash-safety: jq is required" >&2; exit 1; }

WORK="$(mktemp -d)"
SERVER_PIDS=()
cleanup() {
    local status=$? pid
    for pid in "${SERVER_PIDS[@]}" "${RECEIPTD_PID:-}"; do
        [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true
    done
    pg_stop
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "test-ledger-crash-safety: FAIL: $*" >&2; exit 1; }
unset RECEIPTD_STORE_POSTGRES RECEIPTD_CONFIG

make_ledger_world "$WORK" '{"sqlite": "ledger/receiptd.sqlite"}'
CONFIG="$WORK/receiptd.json"
FORGE=0
if have_notification_forge; then FORGE=1; else
    skip_line "the notification parts: 'receiptd testing notification' is not in this build yet (claims still run)"
fi

# --- test data ------------------------------------------------------------------------------------------------------
# Receipts with CLAIMS in-app entries in all (transactions 6000…), so that claims have verified transactions.
CLAIMS=120
for part in 0 1 2; do
    purchases=()
    for i in $(seq $((part * 40)) $((part * 40 + 39))); do
        purchases+=(--purchase "product=coins.100,transaction=$((6000 + i)),purchased=2026-01-01T00:00:00Z")
    done
    "$RECEIPTD" testing receipt --ca "$WORK/ca" --bundle-id com.example.app --app-version 1.0 \
        --device-id 3B76A7BD-8F5B-46A4-BCB1-CCE8DBD1B3CD "${purchases[@]}" --out "$WORK/receipt-$part.der" 2>/dev/null
done
record_receipts() {
    local part
    for part in 0 1 2; do
        [ "$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/octet-stream' \
            --data-binary @"$WORK/receipt-$part.der" "$1/v1/validate")" = 200 ] || fail "receipt $part did not validate"
    done
}

# NOTES notifications: DID_RENEW of 4 subscriptions (originals 8000000000000000…3), each a new transaction, signed a
# minute apart: the newest of each subscription is the one with the highest n.
NOTES=0
if [ "$FORGE" = 1 ]; then
    NOTES=48
    base=$(($(date +%s) - 4 * 86400))
    mkdir -p "$WORK/notes"
    for n in $(seq 1 $NOTES); do
        original=$((8000000000000000 + n % 4))
        signed="$(date -u -d "@$((base + n * 60))" +%Y-%m-%dT%H:%M:%SZ)"
        expires="$(date -u -d "@$((base + n * 60 + 30 * 86400))" +%Y-%m-%dT%H:%M:%SZ)"
        forge_notification "$WORK/ca" "$WORK/notes/$n" DID_RENEW "$(cat /proc/sys/kernel/random/uuid)" \
            "$((8100000000000000 + n))" "$original" "$signed" "$expires"
    done
fi

# claim URL TRANSACTION ACCOUNT: prints the HTTP status (000 when the connection failed).
claim() {
    curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
        -d "{\"account\": \"$3\"}" "$1/v1/transactions/$2/claim" 2>/dev/null || true
}

# run_jobs FILE RESULTS: runs each line "claim URL ID ACCOUNT" or "note URL N" of FILE, 8 at a time, appending
# "LINE -> ANSWER" to RESULTS as each finishes.
run_jobs() {
    local kind url arg account
    while read -r kind url arg account; do
        (
            case "$kind" in
            claim) answer="$(claim "$url" "$arg" "$account")" ;;
            note) answer="$(post_notification "$url" "$WORK/notes/$arg")" ;;
            esac
            echo "$kind $url $arg $account -> $answer" >>"$2"
        ) &
        while [ "$(jobs -rp | wc -l)" -ge 8 ]; do wait -n || true; done
    done <"$1"
    wait
}

# wait_for_jobs PID SECONDS: waits for a background run_jobs, failing after SECONDS.
wait_for_jobs() {
    local _
    for _ in $(seq 1 $(($2 * 10))); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$1" 2>/dev/null; then
        kill "$1" 2>/dev/null || true
        fail "the concurrent requests did not finish within $2 s"
    fi
    wait "$1" || true
}

# ======================================= 1. SQLite: kill -9 midway =================================================
start_server "$CONFIG"
record_receipts "$BASE_URL"
: >"$WORK/jobs"
for i in $(seq 0 $((CLAIMS - 1))); do
    echo "claim $BASE_URL $((6000 + i)) account-$i" >>"$WORK/jobs"
    # Interleaved so that the kill lands in the middle of both kinds.
    if [ "$FORGE" = 1 ] && [ "$i" -lt "$NOTES" ]; then echo "note $BASE_URL $((i + 1)) -" >>"$WORK/jobs"; fi
done
: >"$WORK/results"
run_jobs "$WORK/jobs" "$WORK/results" &
runner=$!

total=$(wc -l <"$WORK/jobs")
for _ in $(seq 1 500); do
    [ "$(wc -l <"$WORK/results")" -lt $((total / 3)) ] || break
    sleep 0.02
done
kill -KILL "$RECEIPTD_PID"
wait "$RECEIPTD_PID" 2>/dev/null || true
RECEIPTD_PID=""
wait_for_jobs "$runner" 30
[ "$(wc -l <"$WORK/results")" -eq "$total" ] || fail "only $(wc -l <"$WORK/results") of $total jobs reported"
claims_ok=$(grep -c '^claim .* -> 200$' "$WORK/results" || true)
notes_ok=$(grep -c '^note .* -> 200 ' "$WORK/results" || true)
[ "$claims_ok" -gt 0 ] || fail "no claim got 200 before the kill: $(head -n 3 "$WORK/results")"

start_server "$CONFIG"
while read -r kind _ arg account _ answer; do
    [ "$kind" = claim ] || continue
    if [ "$answer" = 200 ]; then
        got="$(curl -sS --max-time 10 "$BASE_URL/v1/transactions/$arg" | jq -r '.claim.account // "none"')"
        [ "$got" = "$account" ] || fail "claim of $arg by $account got 200 before the kill but the ledger says $got"
        again="$(curl -sS --max-time 10 -H 'Content-Type: application/json' -d "{\"account\": \"$account\"}" \
            "$BASE_URL/v1/transactions/$arg/claim" | jq -r '.first_claim')"
        [ "$again" = false ] || fail "re-claiming $arg by $account after the restart said first_claim $again"
        [ "$(claim "$BASE_URL" "$arg" "someone-else")" = 409 ] || fail "$arg was claimed again by another account"
    else
        # Lost in the crash, or committed with the answer lost: either way the same account may claim it now.
        [ "$(claim "$BASE_URL" "$arg" "$account")" = 200 ] || fail "claim of $arg by $account failed after the restart"
    fi
done <"$WORK/results"
if [ "$FORGE" = 1 ]; then
    while read -r kind _ arg _ _ status _; do
        [ "$kind" = note ] || continue
        answer="$(post_notification "$BASE_URL" "$WORK/notes/$arg")"
        if [ "$status" = 200 ]; then
            [ "$answer" = "200 true" ] || fail "notification $arg got 200 before the kill but re-posting it said $answer"
        else
            [ "${answer%% *}" = 200 ] || fail "notification $arg could not be posted after the restart: $answer"
        fi
    done <"$WORK/results"
    count="$(timeout 30 "$RECEIPTD" store status --config "$CONFIG" --json | jq .counts.notifications)"
    [ "$count" = "$NOTES" ] || fail "after re-posting all $NOTES notifications the ledger holds $count"
fi
stop_server
echo "sqlite: kill -9 after $claims_ok/$CLAIMS claims and $notes_ok/$NOTES notifications got 200; all there after the" \
    "restart, none twice"

# ================================ 2. PostgreSQL: two servers, the same requests ====================================
if ! pg_available; then
    [ "${RECEIPTD_SKIP_POSTGRES:-0}" = 1 ] || fail "PostgreSQL server binaries not found (apt install postgresql)"
    skip_line "two servers on PostgreSQL: RECEIPTD_SKIP_POSTGRES=1"
    exit 0
fi
pg_start
export RECEIPTD_STORE_POSTGRES="$PG_CONNINFO"  # wins over the config's sqlite store
start_server "$CONFIG"
A="$BASE_URL" A_PID="$RECEIPTD_PID" A_LOG="$SERVER_LOG"
SERVER_PIDS+=("$A_PID")
start_server "$CONFIG"
B="$BASE_URL" B_PID="$RECEIPTD_PID" B_LOG="$SERVER_LOG"
SERVER_PIDS+=("$B_PID")
RECEIPTD_PID=""
grep -q 'store=postgres' "$A_LOG" || fail "RECEIPTD_STORE_POSTGRES did not win over the config's store: $(head -n 1 "$A_LOG")"
if grep -q "$PG_DIR" "$A_LOG" "$B_LOG"; then fail "a server logged the connection string"; fi
record_receipts "$A"

: >"$WORK/jobs2"
for i in $(seq 0 39); do
    echo "claim $A $((6000 + i)) a-$i" >>"$WORK/jobs2"
    echo "claim $B $((6000 + i)) b-$i" >>"$WORK/jobs2"
done
for n in $(seq 1 $NOTES); do
    echo "note $A $n -" >>"$WORK/jobs2"
    echo "note $B $n -" >>"$WORK/jobs2"
done
: >"$WORK/results2"
run_jobs "$WORK/jobs2" "$WORK/results2" &
wait_for_jobs $! 120

for i in $(seq 0 39); do
    id=$((6000 + i))
    answers="$(grep "^claim [^ ]* $id " "$WORK/results2" | awk '{print $NF}' | sort | tr '\n' ' ')"
    [ "$answers" = "200 409 " ] || fail "claims of $id from both servers at once answered [$answers], not one 200 and one 409"
    winner_a="$(curl -sS --max-time 10 "$A/v1/transactions/$id" | jq -r .claim.account)"
    winner_b="$(curl -sS --max-time 10 "$B/v1/transactions/$id" | jq -r .claim.account)"
    expected="$(grep "^claim [^ ]* $id .* -> 200$" "$WORK/results2" | awk '{print $4}')"
    [ "$winner_a" = "$expected" ] && [ "$winner_b" = "$expected" ] \
        || fail "transaction $id: the 200 went to $expected, servers say $winner_a and $winner_b"
done
if [ "$FORGE" = 1 ]; then
    for n in $(seq 1 $NOTES); do
        answers="$(grep "^note [^ ]* $n - -> " "$WORK/results2" | sed 's/.* -> //' | sort | tr '\n' ',')"
        [ "$answers" = "200 false,200 true," ] \
            || fail "notification $n delivered to both servers at once answered [$answers], not one new and one duplicate"
    done
    count="$(timeout 30 "$RECEIPTD" store status --config "$CONFIG" --json | jq .counts.notifications)"
    [ "$count" = "$NOTES" ] || fail "$NOTES notifications delivered twice each; the ledger holds $count"
    for k in 0 1 2 3; do
        original=$((8000000000000000 + k))
        newest=$((NOTES - (NOTES - k) % 4))
        for server in "$A" "$B"; do
            curl -sS --max-time 10 "$server/v1/subscriptions/$original" >"$WORK/sub.json"
            jq -e --arg t "$((8100000000000000 + newest))" \
                '.status == "active" and .latest_transaction.transaction_id == $t
                 and (.transactions | length) == '"$((NOTES / 4))" "$WORK/sub.json" >/dev/null \
                || fail "subscription $original on $server: expected latest transaction $((8100000000000000 + newest)), got $(jq -c '{status, latest: .latest_transaction.transaction_id, n: (.transactions | length)}' "$WORK/sub.json")"
        done
    done
fi
SERVER_PIDS=()
RECEIPTD_PID="$A_PID" SERVER_LOG="$A_LOG"
stop_server
RECEIPTD_PID="$B_PID" SERVER_LOG="$B_LOG"
stop_server
echo "postgres: two servers took 40 contested claims (one winner each) and $NOTES notifications twice each" \
    "(stored once each, same final state on both)"
