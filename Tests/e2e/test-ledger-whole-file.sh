#!/usr/bin/env bash
# A SQLite ledger file that is whole (issue 17), with real processes:
# 1. SIGTERM under load (notifications and claims, 8 at a time): the server exits 0, leaves no -wal or -shm, and a
#    copy of the .sqlite file alone, served by a new server, holds every notification and claim that got 200.
# 2. One server per file: a second `serve` on the file exits 1 at once naming the file; `store status` and
#    `store backup` work beside the running server; `store restore` refuses while it runs.
# 3. Restore over what a kill -9 leaves (a -wal of another history): the restored ledger serves, ready, and takes
#    new notifications.
# 4. An interrupted `store backup` (killed while writing) leaves no file at FILE.
# 5. A damaged ledger stops `serve` with exit 1, and `store status` exits 1.
# 6. Unlike a SQLite file, a PostgreSQL that is down at start is not fatal: serve starts, /readyz 503, and the log
#    says why (without the password).
# Loopback only; every request and every wait is bounded.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
. "$HERE/ledger-lib.sh"
command -v jq >/dev/null || { echo "test-ledger-whole-file: jq is required" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "test-ledger-whole-file: sqlite3 is required (apt install sqlite3)" >&2; exit 1; }

WORK="$(mktemp -d)"
cleanup() {
    local status=$?
    [ -z "${RECEIPTD_PID:-}" ] || kill -KILL "$RECEIPTD_PID" 2>/dev/null || true
    [ -z "${BACKUP_PID:-}" ] || kill -KILL "$BACKUP_PID" 2>/dev/null || true
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "test-ledger-whole-file: FAIL: $*" >&2; exit 1; }
unset RECEIPTD_STORE_POSTGRES RECEIPTD_CONFIG
have_notification_forge || fail "'receiptd testing notification' is needed"

make_ledger_world "$WORK" '{"sqlite": "ledger/receiptd.sqlite"}'
CONFIG="$WORK/receiptd.json"
LEDGER="$WORK/ledger/receiptd.sqlite"

# --- test data: CLAIMS transactions (6000…) in one receipt, NOTES notifications -------------------------------------
CLAIMS=60
purchases=()
for i in $(seq 0 $((CLAIMS - 1))); do
    purchases+=(--purchase "product=coins.100,transaction=$((6000 + i)),purchased=2026-01-01T00:00:00Z")
done
"$RECEIPTD" testing receipt --ca "$WORK/ca" --bundle-id com.example.app --app-version 1.0 "${purchases[@]}" \
    --out "$WORK/receipt.der" 2>/dev/null
NOTES=120
base=$(($(date +%s) - 4 * 86400))
mkdir -p "$WORK/notes"
for n in $(seq 1 $((NOTES + 2))); do
    signed="$(date -u -d "@$((base + n * 60))" +%Y-%m-%dT%H:%M:%SZ)"
    expires="$(date -u -d "@$((base + n * 60 + 30 * 86400))" +%Y-%m-%dT%H:%M:%SZ)"
    forge_notification "$WORK/ca" "$WORK/notes/$n" DID_RENEW "$(cat /proc/sys/kernel/random/uuid)" \
        "$((8100000000000000 + n))" "$((8000000000000000 + n % 4))" "$signed" "$expires"
done

claim() {
    curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
        -d "{\"account\": \"$3\"}" "$1/v1/transactions/$2/claim" 2>/dev/null || true
}
readyz() { curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$1/readyz" 2>/dev/null || true; }

# ================================ 1. SIGTERM under load, then the file alone =========================================
start_server "$CONFIG"
[ "$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/octet-stream' \
    --data-binary @"$WORK/receipt.der" "$BASE_URL/v1/validate")" = 200 ] || fail "the receipt did not validate"
: >"$WORK/jobs"
for i in $(seq 1 $NOTES); do
    echo "note $i -" >>"$WORK/jobs"
    if [ "$i" -le "$CLAIMS" ]; then echo "claim $((6000 + i - 1)) account-$i" >>"$WORK/jobs"; fi
done
: >"$WORK/results"
(
    while read -r kind arg account; do
        (
            case "$kind" in
            claim) answer="$(claim "$BASE_URL" "$arg" "$account")" ;;
            note) answer="$(post_notification "$BASE_URL" "$WORK/notes/$arg")" ;;
            esac
            echo "$kind $arg $account -> $answer" >>"$WORK/results"
        ) &
        while [ "$(jobs -rp | wc -l)" -ge 8 ]; do wait -n || true; done
    done <"$WORK/jobs"
    wait
) &
runner=$!
total=$(wc -l <"$WORK/jobs")
for _ in $(seq 1 500); do
    [ "$(wc -l <"$WORK/results")" -lt $((total / 3)) ] || break
    sleep 0.02
done
stop_server || fail "receiptd did not exit 0 after SIGTERM under load"
for _ in $(seq 1 300); do kill -0 "$runner" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$runner" 2>/dev/null || fail "the requests did not finish within 30 s of the stop"
wait "$runner" || true
notes_ok=$(grep -c '^note .* -> 200 ' "$WORK/results" || true)
claims_ok=$(grep -c '^claim .* -> 200$' "$WORK/results" || true)
[ "$notes_ok" -gt 0 ] && [ "$claims_ok" -gt 0 ] || fail "nothing got 200 before SIGTERM: $(head -n 3 "$WORK/results")"
for sidecar in -wal -shm; do
    [ ! -e "$LEDGER$sidecar" ] || fail "a clean stop left $LEDGER$sidecar ($(stat -c %s "$LEDGER$sidecar") bytes)"
done

# The obvious backup: the .sqlite file alone, copied elsewhere and served from there.
mkdir -p "$WORK/copy"
cp "$LEDGER" "$WORK/copy/receiptd.sqlite"
sed 's|"ledger/receiptd.sqlite"|"copy/receiptd.sqlite"|' "$CONFIG" >"$WORK/copy.json"
start_server "$WORK/copy.json"
while read -r kind arg account _ answer rest; do
    case "$kind" in
    note)
        [ "$answer" = 200 ] || continue
        again="$(post_notification "$BASE_URL" "$WORK/notes/$arg")"
        [ "$again" = "200 true" ] || fail "notification $arg got 200 before SIGTERM but the copied file lacks it ($again)"
        ;;
    claim)
        [ "$answer" = 200 ] || continue
        got="$(curl -sS --max-time 10 "$BASE_URL/v1/transactions/$arg" | jq -r '.claim.account // "none"')"
        [ "$got" = "$account" ] || fail "claim of $arg got 200 before SIGTERM but the copied file says $got"
        ;;
    esac
done <"$WORK/results"
stop_server
echo "sigterm: $notes_ok notifications and $claims_ok claims got 200 under load; the .sqlite file alone holds all," \
    "no -wal left"

# ============================== 2. one server per file; the store commands beside it =================================
start_server "$CONFIG"
status=0
timeout 20 "$RECEIPTD" serve --config "$CONFIG" --port 0 >"$WORK/second.out" 2>"$WORK/second.err" || status=$?
[ "$status" = 1 ] || fail "a second serve on the same file exited $status, not 1: $(cat "$WORK/second.err")"
grep -qF "$LEDGER" "$WORK/second.err" && grep -q 'another receiptd serves' "$WORK/second.err" \
    || fail "the second serve's error does not name the file and the reason: $(cat "$WORK/second.err")"
# The lock follows the file, not its name: a symbolic link to it, or a hard link, reaches the same ledger.
ln -s "$LEDGER" "$WORK/symlinked.sqlite"
ln "$LEDGER" "$WORK/ledger/hard-linked.sqlite"
for other in symlinked.sqlite ledger/hard-linked.sqlite; do
    printf '{"store": {"sqlite": "%s"}}\n' "$other" >"$WORK/other.json"
    status=0
    timeout 20 "$RECEIPTD" serve --config "$WORK/other.json" --port 0 >"$WORK/second.out" 2>"$WORK/second.err" \
        || status=$?
    [ "$status" = 1 ] || fail "a second serve through $other exited $status, not 1: $(cat "$WORK/second.err")"
    grep -q 'another receiptd serves' "$WORK/second.err" && grep -q "process $RECEIPTD_PID" "$WORK/second.err" \
        || fail "the second serve through $other does not name the reason and the process: $(cat "$WORK/second.err")"
done
rm "$WORK/symlinked.sqlite" "$WORK/ledger/hard-linked.sqlite"
[ "$(readyz "$BASE_URL")" = 200 ] || fail "the first server is not ready after the second one was refused"
timeout 30 "$RECEIPTD" store status --config "$CONFIG" >/dev/null || fail "store status failed beside the server"
timeout 60 "$RECEIPTD" store backup "$WORK/backup.sqlite" --config "$CONFIG" >/dev/null \
    || fail "store backup failed beside the server"
status=0
timeout 30 "$RECEIPTD" store restore "$WORK/backup.sqlite" --config "$CONFIG" 2>"$WORK/restore.err" || status=$?
[ "$status" = 1 ] || fail "store restore while the server runs exited $status, not 1"
grep -q 'another receiptd serves' "$WORK/restore.err" || fail "restore's refusal says: $(cat "$WORK/restore.err")"
backed_up="$(timeout 30 "$RECEIPTD" store status --config "$CONFIG" --json | jq .counts.notifications)"
echo "one server: a second serve (also through a symbolic or hard link) exits 1 naming the file and process; status and backup work beside it; restore refuses"

# ============================== 3. restore over what a kill -9 leaves ================================================
# A notification after the backup, then kill -9: the -wal holds history the backup lacks.
[ "$(post_notification "$BASE_URL" "$WORK/notes/$((NOTES + 1))")" = "200 false" ] || fail "a new notification was refused"
kill -KILL "$RECEIPTD_PID"
wait "$RECEIPTD_PID" 2>/dev/null || true
RECEIPTD_PID=""
[ -s "$LEDGER-wal" ] || fail "kill -9 left no -wal to restore over (the scenario needs one)"
timeout 60 "$RECEIPTD" store restore "$WORK/backup.sqlite" --config "$CONFIG" >"$WORK/restore.out" \
    || fail "store restore over a leftover -wal failed"
grep -q '^restored: ' "$WORK/restore.out" || fail "store restore printed: $(cat "$WORK/restore.out")"
[ ! -e "$LEDGER-wal" ] || fail "store restore left the stale -wal"
start_server "$CONFIG"
[ "$(readyz "$BASE_URL")" = 200 ] || fail "the restored ledger's server is not ready"
[ "$(post_notification "$BASE_URL" "$WORK/notes/$((NOTES + 2))")" = "200 false" ] \
    || fail "the restored ledger refused a new notification"
stop_server
restored="$(timeout 30 "$RECEIPTD" store status --config "$CONFIG" --json | jq .counts.notifications)"
[ "$restored" = "$((backed_up + 1))" ] || fail "restored ledger holds $restored notifications, expected $backed_up + 1"
echo "restore: over a leftover -wal, the backup's $backed_up notifications are back; ready, and writable"

# ============================== 4. an interrupted backup =============================================================
# A ledger big enough that writing its copy takes a while (an extra table is ignored by the ledger).
sqlite3 "$LEDGER" "CREATE TABLE padding (bytes BLOB);
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40000)
    INSERT INTO padding SELECT randomblob(1000) FROM n;" >/dev/null
mkdir -p "$WORK/backups"
interrupted=0
for round in 1 2 3; do
    target="$WORK/backups/backup-$round.sqlite"
    "$RECEIPTD" store backup "$target" --config "$CONFIG" >/dev/null 2>&1 &
    BACKUP_PID=$!
    # Wait until the copy is being written, stop the process there, and kill it.
    for _ in $(seq 1 1000); do
        ! ls "$WORK/backups"/.backup-"$round".sqlite.partial-* >/dev/null 2>&1 || break
        kill -0 "$BACKUP_PID" 2>/dev/null || break
        sleep 0.01
    done
    kill -STOP "$BACKUP_PID" 2>/dev/null || true
    kill -KILL "$BACKUP_PID" 2>/dev/null || true
    wait "$BACKUP_PID" 2>/dev/null || true
    BACKUP_PID=""
    if [ -e "$target" ]; then
        # It finished first: then FILE must be the whole copy.
        echo "{\"store\": {\"sqlite\": \"$target\"}}" >"$WORK/finished.json"
        timeout 30 "$RECEIPTD" store status --config "$WORK/finished.json" >/dev/null \
            || fail "backup round $round left a file at FILE that is not a sound ledger"
    else
        interrupted=$((interrupted + 1))
    fi
    rm -f "$WORK/backups"/.backup-"$round".sqlite.partial-*
done
[ "$interrupted" -gt 0 ] || skip_line "every backup finished before it could be killed (the machine is fast)"
echo "backup: $interrupted of 3 backups killed while writing; none left a file at FILE"

# ============================== 5. a damaged ledger ==================================================================
# Garbage over the cell pointers of pages 2 onwards (page 1, the schema, stays readable so that the file opens).
size=$(stat -c %s "$LEDGER")
for offset in $(seq 4096 4096 $((size - 4096))); do
    printf '\377\377\377\377\377\377\377\377\377\377\377\377\377\377\377\377' \
        | dd of="$LEDGER" bs=1 seek=$((offset + 12)) conv=notrunc status=none
done
status=0
timeout 60 "$RECEIPTD" serve --config "$CONFIG" --port 0 >"$WORK/damaged.out" 2>"$WORK/damaged.err" || status=$?
[ "$status" = 1 ] || fail "serve on a damaged ledger exited $status, not 1"
grep -qF "$LEDGER" "$WORK/damaged.err" || fail "serve's error does not name the file: $(cat "$WORK/damaged.err")"
! grep -q '"listening"\|listening address' "$WORK/damaged.out" || fail "serve listened on a damaged ledger"
lines=$(cat "$WORK/damaged.out" "$WORK/damaged.err" | wc -l)
[ "$lines" -le 6 ] || fail "serve's refusal of a damaged ledger took $lines lines: $(head -c 2000 "$WORK/damaged.err")"
status=0
timeout 60 "$RECEIPTD" store status --config "$CONFIG" >"$WORK/damaged-status.out" 2>&1 || status=$?
[ "$status" = 1 ] || fail "store status on a damaged ledger exited $status, not 1"
grep -q 'damaged' "$WORK/damaged-status.out" && ! grep -q 'no ledger tables yet' "$WORK/damaged-status.out" \
    || fail "store status does not say the file is damaged: $(cat "$WORK/damaged-status.out")"
echo "damaged: serve exits 1 naming the file, store status exits 1"

# ============================== 6. PostgreSQL down at start: served, with the cause in the log =======================
export RECEIPTD_STORE_POSTGRES="host=$WORK/no-such-socket-dir user=receiptd password=s3cr3t-pw dbname=receiptd"
start_server "$CONFIG"
[ "$(readyz "$BASE_URL")" = 503 ] || fail "with PostgreSQL down, /readyz did not answer 503"
grep -q 'ledger unavailable' "$SERVER_LOG" || fail "the log does not say the ledger is unavailable: $(cat "$SERVER_LOG")"
grep -q 'no-such-socket-dir' "$SERVER_LOG" || fail "the log does not give libpq's cause: $(cat "$SERVER_LOG")"
! grep -q 's3cr3t-pw' "$SERVER_LOG" || fail "the log printed the password"
stop_server || fail "the server with PostgreSQL down did not stop cleanly"
unset RECEIPTD_STORE_POSTGRES
echo "postgres down at start: served (readyz 503), the cause logged without the password"
status=0
RECEIPTD_STORE_POSTGRES="host=db password=s3cr3t-pw dbname='unterminated" \
    timeout 20 "$RECEIPTD" serve --config "$CONFIG" --port 0 >"$WORK/conninfo.out" 2>"$WORK/conninfo.err" || status=$?
[ "$status" = 1 ] || fail "serve with a connection string libpq cannot parse exited $status, not 1"
grep -q 'unterminated quoted string' "$WORK/conninfo.err" && ! grep -q 's3cr3t-pw' "$WORK/conninfo.err" \
    || fail "serve's refusal of a bad connection string says: $(cat "$WORK/conninfo.err")"
echo "postgres connection string libpq cannot parse: exit 1 with libpq's words, without the password"
