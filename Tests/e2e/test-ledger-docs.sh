#!/usr/bin/env bash
# Runs every ```sh block of docs/ledger.md exactly as written, as an operator would: `receiptd` on the PATH, from a
# scratch folder. The SQLite store-commands block needs nothing else. The SQLite backup and restore block runs with
# RECEIPTD_CONFIG naming a served ledger holding a claim: its backup lines while the server runs, its restore line
# first while it runs (refused) and then after it stopped, which must bring back the ledger as backed up (a claim made
# after the backup gone, the one before it there). The PostgreSQL backup block runs against a throwaway cluster
# (started here on a Unix socket, its connection string in RECEIPTD_STORE_POSTGRES) holding a ledger with a claim,
# and the restore must bring that claim back. Checks the blocks left nothing in their temp dir.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
. "$HERE/ledger-lib.sh"
DOC="$E2E_ROOT/docs/ledger.md"

WORK="$(mktemp -d)"
cleanup() {
    local status=$?
    [ -z "${RECEIPTD_PID:-}" ] || kill -KILL "$RECEIPTD_PID" 2>/dev/null || true
    pg_stop
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "test-ledger-docs: FAIL: $*" >&2; exit 1; }

# sh_block N: the Nth ```sh block of docs/ledger.md.
sh_block() {
    awk -v n="$1" '
        /^```/ { if (inside) { inside = 0; next } if ($0 == "```sh" && ++k == n) { inside = 1; next } }
        inside' "$DOC"
}
[ "$(grep -c '^```sh$' "$DOC")" -eq 3 ] || fail "docs/ledger.md no longer has 3 sh blocks: update this test"
! grep -qE '^```(bash|shell|console)$' "$DOC" || fail "docs/ledger.md has a shell block this test does not run"

unset RECEIPTD_STORE_POSTGRES RECEIPTD_CONFIG
export PATH="$(cd "$(dirname "$RECEIPTD")" && pwd):$PATH"
mkdir -p "$WORK/tmp" "$WORK/cwd"

# --- block 1: the store commands on SQLite ---------------------------------------------------------------------------
sh_block 1 >"$WORK/block1.sh"
(cd "$WORK/cwd" && TMPDIR="$WORK/tmp" timeout 60 bash -euo pipefail "$WORK/block1.sh") >"$WORK/block1.out" 2>&1 \
    || { sed 's/^/    /' "$WORK/block1.out" >&2; fail "docs/ledger.md's first block failed"; }
for line in '^schema: created at version [0-9]+$' '^schema: version [0-9]+ \(current\)$' '^notifications: 0$' \
    '^backup: .*receiptd-backup\.sqlite \(schema version [0-9]+, 0 notifications, 0 transactions, 0 claims\)$' \
    '^\{"schema_version":[0-9]+,"counts":\{"notifications":0,"transactions":0,'; do
    grep -qE "$line" "$WORK/block1.out" || { sed 's/^/    /' "$WORK/block1.out" >&2; fail "block 1 printed no line like $line"; }
done
left="$(find "$WORK/tmp" "$WORK/cwd" -mindepth 1)"
[ -z "$left" ] || fail "block 1 left files behind: $left"

# --- block 2: store backup and store restore of a served SQLite ledger ---------------------------------------------
[ "$(sh_block 2 | wc -l)" -eq 3 ] || fail "docs/ledger.md's SQLite backup block is no longer 3 lines: update this test"
sh_block 2 | sed -n '1,2p' >"$WORK/sqlite-backup.sh"
sh_block 2 | sed -n '3p' >"$WORK/sqlite-restore.sh"
grep -q 'store restore' "$WORK/sqlite-restore.sh" || fail "the SQLite block's last line is not the restore"
make_ledger_world "$WORK/sqlite-world" '{"sqlite": "ledger/receiptd.sqlite"}'
"$RECEIPTD" testing receipt --ca "$WORK/sqlite-world/ca" --bundle-id com.example.app --app-version 1.0 \
    --purchase product=coins.100,transaction=4242,purchased=2026-01-01T00:00:00Z \
    --purchase product=coins.100,transaction=4243,purchased=2026-01-01T00:00:00Z --out "$WORK/sqlite-receipt.der" 2>/dev/null
export RECEIPTD_CONFIG="$WORK/sqlite-world/receiptd.json"
start_server "$RECEIPTD_CONFIG"
curl -sS --max-time 10 -o /dev/null -H 'Content-Type: application/octet-stream' \
    --data-binary @"$WORK/sqlite-receipt.der" "$BASE_URL/v1/validate"
curl -sS --max-time 10 -o /dev/null -d '{"account": "before-backup"}' "$BASE_URL/v1/transactions/4242/claim"
(cd "$WORK/cwd" && TMPDIR="$WORK/tmp" timeout 60 bash -euo pipefail "$WORK/sqlite-backup.sh") >"$WORK/sqlite.out" 2>&1 \
    || { sed 's/^/    /' "$WORK/sqlite.out" >&2; fail "docs/ledger.md's SQLite backup lines failed"; }
grep -q '^store: sqlite ' "$WORK/sqlite.out" && grep -q '^claims: 1$' "$WORK/sqlite.out" \
    && grep -qE '^backup: receiptd-backup\.sqlite \(schema version [0-9]+, 0 notifications, 2 transactions, 1 claims\)$' \
        "$WORK/sqlite.out" || { sed 's/^/    /' "$WORK/sqlite.out" >&2; fail "the SQLite backup lines printed the above"; }
curl -sS --max-time 10 -o /dev/null -d '{"account": "after-backup"}' "$BASE_URL/v1/transactions/4243/claim"
status=0
(cd "$WORK/cwd" && TMPDIR="$WORK/tmp" timeout 60 bash -euo pipefail "$WORK/sqlite-restore.sh") >"$WORK/sqlite.out" 2>&1 \
    || status=$?
[ "$status" = 1 ] || { sed 's/^/    /' "$WORK/sqlite.out" >&2; fail "restore while the server runs exited $status, not 1"; }
stop_server
(cd "$WORK/cwd" && TMPDIR="$WORK/tmp" timeout 60 bash -euo pipefail "$WORK/sqlite-restore.sh") >"$WORK/sqlite.out" 2>&1 \
    || { sed 's/^/    /' "$WORK/sqlite.out" >&2; fail "docs/ledger.md's SQLite restore line failed"; }
start_server "$RECEIPTD_CONFIG"
[ "$(curl -sS --max-time 10 "$BASE_URL/v1/transactions/4242" | jq -r '.claim.account // "none"')" = before-backup ] \
    || fail "the restored ledger lost the claim made before the backup"
[ "$(curl -sS --max-time 10 "$BASE_URL/v1/transactions/4243" | jq -r '.claim.account // "none"')" = none ] \
    || fail "the restored ledger still has the claim made after the backup"
stop_server
unset RECEIPTD_CONFIG
rm -f "$WORK/cwd/receiptd-backup.sqlite"
left="$(find "$WORK/tmp" "$WORK/cwd" -mindepth 1)"
[ -z "$left" ] || fail "the SQLite backup block left more than receiptd-backup.sqlite: $left"

# --- block 3: pg_dump and pg_restore of a PostgreSQL ledger -----------------------------------------------------------
if ! pg_available; then
    [ "${RECEIPTD_SKIP_POSTGRES:-0}" = 1 ] || fail "PostgreSQL server binaries not found (apt install postgresql)"
    echo "SKIP: docs/ledger.md's PostgreSQL block: RECEIPTD_SKIP_POSTGRES=1"
    exit 0
fi
command -v pg_dump >/dev/null && command -v pg_restore >/dev/null \
    || fail "pg_dump and pg_restore are needed (apt install postgresql-client)"
pg_start
export RECEIPTD_STORE_POSTGRES="$PG_CONNINFO"
# A ledger with one verified transaction, claimed: what the restore must bring back.
make_ledger_world "$WORK/world" ""
"$RECEIPTD" testing receipt --ca "$WORK/world/ca" --bundle-id com.example.app --app-version 1.0 \
    --purchase product=coins.100,transaction=4242,purchased=2026-01-01T00:00:00Z --out "$WORK/receipt.der" 2>/dev/null
start_server "$WORK/world/receiptd.json"
curl -sS --max-time 10 -o /dev/null -H 'Content-Type: application/octet-stream' --data-binary @"$WORK/receipt.der" \
    "$BASE_URL/v1/validate"
curl -sS --max-time 10 -o /dev/null -d '{"account": "docs-reader"}' "$BASE_URL/v1/transactions/4242/claim"
stop_server

# Dump, then lose the claim, then restore (servers stopped, as the page says).
sh_block 3 >"$WORK/block2.sh"
sed -n '1,2p' "$WORK/block2.sh" >"$WORK/block2-dump.sh"
sed -n '3,$p' "$WORK/block2.sh" >"$WORK/block2-restore.sh"
[ "$(wc -l <"$WORK/block2.sh")" -eq 3 ] || fail "docs/ledger.md's PostgreSQL block is no longer 3 lines: update this test"
(cd "$WORK/cwd" && TMPDIR="$WORK/tmp" timeout 60 bash -euo pipefail "$WORK/block2-dump.sh") >"$WORK/block2.out" 2>&1 \
    || { sed 's/^/    /' "$WORK/block2.out" >&2; fail "docs/ledger.md's pg_dump lines failed"; }
grep -q '^store: postgres$' "$WORK/block2.out" && grep -q '^claims: 1$' "$WORK/block2.out" \
    || { sed 's/^/    /' "$WORK/block2.out" >&2; fail "store status on PostgreSQL did not show the claim"; }
! grep -q "$PG_DIR" "$WORK/block2.out" || fail "store status printed the connection string"
psql -X -q "$PG_CONNINFO" -c 'DELETE FROM claims' >/dev/null
[ "$(timeout 30 receiptd store status --json | jq .counts.claims)" = 0 ] || fail "the claim could not be deleted"
(cd "$WORK/cwd" && TMPDIR="$WORK/tmp" timeout 60 bash -euo pipefail "$WORK/block2-restore.sh") >>"$WORK/block2.out" 2>&1 \
    || { sed 's/^/    /' "$WORK/block2.out" >&2; fail "docs/ledger.md's pg_restore line failed"; }
[ "$(timeout 30 receiptd store status --json | jq .counts.claims)" = 1 ] || fail "pg_restore did not bring the claim back"
rm -f "$WORK/cwd/receiptd.dump"
left="$(find "$WORK/tmp" "$WORK/cwd" -mindepth 1)"
[ -z "$left" ] || fail "block 2 left more than receiptd.dump: $left"
echo "test-ledger-docs: docs/ledger.md's blocks ran as written (SQLite store commands; SQLite backup and restore;" \
    "pg_dump and pg_restore)"
