#!/usr/bin/env bash
# `receiptd store` against a real SQLite ledger: status before the first start (nothing created) and while serving,
# counts moving as receipts (and, once `testing notification` exists, notifications) are recorded, an online backup
# taken while the server keeps writing that reads back as a ledger, migrate from an older schema, and the clear
# failures: a schema newer than the binary (serve exits 1 before listening), no store, an unreachable PostgreSQL
# (whose password is never printed), and backup of a PostgreSQL store (exit 2, use pg_dump).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
. "$HERE/ledger-lib.sh"
command -v jq >/dev/null || { echo "test-ledger-store: jq is required" >&2; exit 1; }

WORK="$(mktemp -d)"
WRITER_PID=""
cleanup() {
    local status=$?
    [ -z "$WRITER_PID" ] || kill "$WRITER_PID" 2>/dev/null || true
    if [ -n "${RECEIPTD_PID:-}" ]; then kill -KILL "$RECEIPTD_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "test-ledger-store: FAIL: $*" >&2; exit 1; }

# expect_exit STATUS OUTFILE COMMAND…: runs COMMAND (bounded) with stdout+stderr to OUTFILE; its status must match.
expect_exit() {
    local want="$1" out="$2" got=0
    shift 2
    timeout 30 "$@" >"$out" 2>&1 || got=$?
    [ "$got" = "$want" ] || { sed 's/^/    /' "$out" >&2; fail "'${*:1:4}…' exited $got, expected $want"; }
}
store_json() { timeout 30 "$RECEIPTD" store status --config "$1" --json; }

unset RECEIPTD_STORE_POSTGRES RECEIPTD_CONFIG
make_ledger_world "$WORK" '{"sqlite": "ledger/receiptd.sqlite"}'
CONFIG="$WORK/receiptd.json"

# --- before the first start: reported, not created -----------------------------------------------------------------
store_json "$CONFIG" >"$WORK/before.json" || fail "store status before the first start failed"
jq -e '.backend == "sqlite" and .exists == false and .schema_version == 0 and .counts == null' "$WORK/before.json" \
    >/dev/null || fail "store status before the first start said $(cat "$WORK/before.json")"
[ ! -e "$WORK/ledger" ] || fail "store status created $WORK/ledger"

# --- serving: counts move as verified data is recorded --------------------------------------------------------------
start_server "$CONFIG"
store_json "$CONFIG" >"$WORK/started.json"
supported="$(jq -r .supported_schema_version "$WORK/started.json")"
jq -e '.exists and .schema_version == .supported_schema_version and .schema_version >= 1
    and ([.counts[]] | all(. == 0))' "$WORK/started.json" >/dev/null \
    || fail "store status of a fresh ledger said $(cat "$WORK/started.json")"
grep -q '^schema: version '"$supported"' (current)$' <("$RECEIPTD" store status --config "$CONFIG") \
    || fail "store status's text does not say the schema is current"

# receipt N: two in-app entries (a subscription and its renewal) under original transaction 9N000.
receipt() {
    local n="$1"
    "$RECEIPTD" testing receipt --ca "$WORK/ca" --bundle-id com.example.app --app-version 1.0 \
        --device-id 3B76A7BD-8F5B-46A4-BCB1-CCE8DBD1B3CD \
        --purchase "product=pro.monthly,transaction=9${n}001,original=9${n}000,purchased=2026-01-01T00:00:00Z,expires=2026-02-01T00:00:00Z" \
        --purchase "product=pro.monthly,transaction=9${n}002,original=9${n}000,purchased=2026-02-01T00:00:00Z,expires=2099-01-01T00:00:00Z" \
        --out "$WORK/receipt-$n.der" 2>/dev/null
}
validate() {
    curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/octet-stream' \
        --data-binary @"$1" "$BASE_URL/v1/validate"
}
for n in 1 2 3; do
    receipt "$n"
    [ "$(validate "$WORK/receipt-$n.der")" = 200 ] || fail "POST /v1/validate of receipt $n did not answer 200"
done
store_json "$CONFIG" >"$WORK/after.json"
jq -e '.counts.transactions == 6 and .counts.transaction_sources == 6 and .counts.notifications == 0' \
    "$WORK/after.json" >/dev/null || fail "after 3 receipts of 2 entries, store status said $(cat "$WORK/after.json")"

notifications=0
if have_notification_forge; then
    base=$(($(date +%s) - 7200))
    for n in 1 2 3 4; do
        signed="$(date -u -d "@$((base + n * 60))" +%Y-%m-%dT%H:%M:%SZ)"
        expires="$(date -u -d "@$((base + n * 60 + 30 * 86400))" +%Y-%m-%dT%H:%M:%SZ)"
        forge_notification "$WORK/ca" "$WORK/n$n.json" DID_RENEW "$(cat /proc/sys/kernel/random/uuid)" \
            "700000000000$n" 7000000000000 "$signed" "$expires"
        [ "$(post_notification "$BASE_URL" "$WORK/n$n.json")" = "200 false" ] \
            || fail "notification $n was not stored (200, not a duplicate)"
    done
    notifications=4
    store_json "$CONFIG" | jq -e '.counts.notifications == 4 and .counts.transactions == 10' >/dev/null \
        || fail "after 4 notifications, store status said $(store_json "$CONFIG")"
else
    skip_line "notifications in store status: 'receiptd testing notification' is not in this build yet"
fi

# --- an online backup while the server keeps writing ----------------------------------------------------------------
receipt 4
(
    while :; do validate "$WORK/receipt-4.der" >/dev/null || true; done
) &
WRITER_PID=$!
sleep 0.3
expect_exit 0 "$WORK/backup.out" "$RECEIPTD" store backup "$WORK/backup.sqlite" --config "$CONFIG"
kill "$WRITER_PID" 2>/dev/null || true
wait "$WRITER_PID" 2>/dev/null || true
WRITER_PID=""
grep -q "^backup: $WORK/backup.sqlite (schema version $supported, $notifications notifications, " "$WORK/backup.out" \
    || fail "store backup printed: $(cat "$WORK/backup.out")"
expect_exit 1 "$WORK/backup-again.out" "$RECEIPTD" store backup "$WORK/backup.sqlite" --config "$CONFIG"
grep -q "already exists" "$WORK/backup-again.out" || fail "a second backup to the same file did not say it exists"

# The copy is a complete ledger: a config pointing at it reads it (no sqlite3 CLI needed).
echo '{"store": {"sqlite": "backup.sqlite"}}' >"$WORK/backup.json"
store_json "$WORK/backup.json" >"$WORK/backup-status.json" || fail "store status of the backup failed"
jq -e --argjson v "$supported" --argjson n "$notifications" '.exists and .schema_version == $v
    and .counts.notifications == $n and .counts.transactions >= 6' "$WORK/backup-status.json" >/dev/null \
    || fail "the backup reads back as $(cat "$WORK/backup-status.json")"
stop_server

# --- migrate: reports versions; an older schema is brought forward ------------------------------------------------
expect_exit 0 "$WORK/migrate.out" "$RECEIPTD" store migrate --config "$CONFIG"
grep -q "^schema: version $supported, already current$" "$WORK/migrate.out" || fail "migrate said: $(cat "$WORK/migrate.out")"
if [ "$supported" -ge 2 ]; then
    cp "$WORK/backup.sqlite" "$WORK/old.sqlite"
    # Version 2 added renewal_infos.price_increase_status, version 3 the columns that order versions of a row and
    # transactions.is_upgraded, version 5 transactions.app_account_token (indexed): undo them to make a version-1
    # database. Tables of later versions may stay: their migrations create them only if missing.
    python3 - "$WORK/old.sqlite" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("DROP INDEX IF EXISTS transactions_by_app_account_token")
for table, column in [("renewal_infos", "price_increase_status"), ("renewal_infos", "notification_uuid"),
                      ("transactions", "source"), ("transactions", "notification_uuid"),
                      ("transactions", "is_upgraded"), ("transactions", "app_account_token")]:
    if column in [row[1] for row in db.execute(f"PRAGMA table_info({table})")]:
        db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
db.execute("UPDATE ledger_schema SET version = 1")
db.commit()
PY
    echo '{"store": {"sqlite": "old.sqlite"}}' >"$WORK/old.json"
    store_json "$WORK/old.json" | jq -e '.schema_version == 1 and .counts == null' >/dev/null \
        || fail "store status of a version-1 ledger said $(store_json "$WORK/old.json")"
    store_json "$WORK/old.json" | jq -e '.schema_version == 1' >/dev/null \
        || fail "store status migrated the version-1 ledger: it must change nothing"
    expect_exit 1 "$WORK/old-backup.out" "$RECEIPTD" store backup "$WORK/old-copy.sqlite" --config "$WORK/old.json"
    expect_exit 0 "$WORK/old-migrate.out" "$RECEIPTD" store migrate --config "$WORK/old.json"
    grep -q "^schema: migrated from version 1 to $supported$" "$WORK/old-migrate.out" \
        || fail "migrate of a version-1 ledger said: $(cat "$WORK/old-migrate.out")"
    store_json "$WORK/old.json" | jq -e --argjson n "$notifications" '.counts.notifications == $n' >/dev/null \
        || fail "the migrated ledger lost rows: $(store_json "$WORK/old.json")"
fi

# --- a schema newer than the binary: a clear start-up error, and the same from every store command ----------------
python3 -c 'import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute("UPDATE ledger_schema SET version = 999"); db.commit()' \
    "$WORK/backup.sqlite"
expect_exit 1 "$WORK/newer-serve.out" "$RECEIPTD" serve --config "$WORK/backup.json" --port 0
grep -q "ledger schema version 999, newer than version $supported of this receiptd" "$WORK/newer-serve.out" \
    || fail "serve on a newer schema said: $(cat "$WORK/newer-serve.out")"
grep -q "listening" "$WORK/newer-serve.out" && fail "serve listened on a database with a newer schema"
for command in "status" "migrate" "backup $WORK/newer-copy.sqlite"; do
    # shellcheck disable=SC2086 # $command is a subcommand and its argument
    expect_exit 1 "$WORK/newer.out" "$RECEIPTD" store $command --config "$WORK/backup.json"
    grep -q "newer than version $supported of this receiptd; upgrade receiptd or restore a backup" "$WORK/newer.out" \
        || fail "store $command on a newer schema said: $(cat "$WORK/newer.out")"
done
[ ! -e "$WORK/newer-copy.sqlite" ] || fail "store backup wrote a copy of a database it refused"

# --- the other clear failures ----------------------------------------------------------------------------------------
echo '{}' >"$WORK/none.json"
expect_exit 1 "$WORK/none.out" "$RECEIPTD" store status --config "$WORK/none.json"
grep -q 'no store configured: config .*none.json has no "store" key and RECEIPTD_STORE_POSTGRES is not set' \
    "$WORK/none.out" || fail "store status without a store said: $(cat "$WORK/none.out")"
unreachable="host=$WORK/no-such-socket user=ledger password=Sw0rdfish-do-not-print dbname=ledger connect_timeout=2"
RECEIPTD_STORE_POSTGRES="$unreachable" expect_exit 1 "$WORK/pg.out" "$RECEIPTD" store status --config "$WORK/none.json"
grep -q "cannot reach the database (PostgreSQL)" "$WORK/pg.out" || fail "an unreachable PostgreSQL said: $(cat "$WORK/pg.out")"
RECEIPTD_STORE_POSTGRES="postgresql://ledger:Sw0rdfish-do-not-print@[broken" \
    expect_exit 1 "$WORK/pg-uri.out" "$RECEIPTD" store migrate --config "$WORK/none.json"
RECEIPTD_STORE_POSTGRES="$unreachable" expect_exit 2 "$WORK/pg-backup.out" \
    "$RECEIPTD" store backup "$WORK/pg.sqlite" --config "$WORK/none.json"
grep -q "pg_dump" "$WORK/pg-backup.out" || fail "store backup of a PostgreSQL store did not point at pg_dump"
if grep -l "Sw0rdfish" "$WORK"/pg*.out >/dev/null; then fail "a store command printed the database password"; fi
expect_exit 2 "$WORK/usage.out" "$RECEIPTD" store status --bogus
expect_exit 2 "$WORK/usage.out" "$RECEIPTD" store backup --config "$CONFIG"
expect_exit 2 "$WORK/usage.out" "$RECEIPTD" store frobnicate
for command in status backup migrate; do
    expect_exit 0 "$WORK/help.out" "$RECEIPTD" store "$command" --help
    grep -q "^USAGE: receiptd store $command" "$WORK/help.out" || fail "store $command --help printed no usage"
done

echo "test-ledger-store: status, online backup, migrate and their failures behave on a SQLite ledger" \
    "($((6 + notifications)) rows before the backup)"
