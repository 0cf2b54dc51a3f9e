#!/usr/bin/env bash
# Runs the "Refund history and app transaction info" recipe of docs/server-api.md exactly as written (from the
# clone's root, after `swift build`) and checks what it prints: the refund read from Apple's refund history is new,
# the ledger emitted REFUND for it, and the app transaction was verified and printed.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
cd "$E2E_ROOT"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export TMPDIR="$WORK"
fail() { cat "$WORK/out" "$WORK/err" >&2; echo "test-refund-history: FAIL: $*" >&2; exit 1; }

docs_sh_block docs/server-api.md test-refund-history.sh >"$WORK/recipe.sh"
[ -s "$WORK/recipe.sh" ] || { echo "e2e: docs/server-api.md has no recipe for test-refund-history.sh" >&2; exit 1; }
timeout 120 bash -euo pipefail "$WORK/recipe.sh" >"$WORK/out" 2>"$WORK/err" || fail "the recipe failed"
grep -q '^com.example.app Production: refunds: 1 read, 1 new, 0 refused (1 of 1 customer purchasing since ' "$WORK/out" \
    || fail "store sync --refunds did not take the refund"
grep -qE '^[^ ]+ REFUND .* original 3001 ' "$WORK/out" || fail "webhooks list shows no REFUND event of 3001"
grep -q '"app_transaction"' "$WORK/out" || fail "lookup app-transaction printed no app transaction"
grep -q '"bundle_id": "com.example.app"' "$WORK/out" || fail "the app transaction is not the app's"
# The recipe removes its temp dir and stops the fake.
[ -z "$(ls -A "$WORK" | grep -v -e '^recipe.sh$' -e '^out$' -e '^err$')" ] \
    || { ls -la "$WORK" >&2; echo "e2e: the recipe left files behind" >&2; exit 1; }
echo "test-refund-history: ok"
