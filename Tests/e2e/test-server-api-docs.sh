#!/usr/bin/env bash
# Runs the ```sh block of docs/server-api.md exactly as written (from the clone's root, after `swift build`) and
# checks what it prints: the sync took the notification, the second run found nothing new, the order's transaction.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
cd "$E2E_ROOT"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export TMPDIR="$WORK"

[ "$(grep -c '^```sh$' docs/server-api.md)" -eq 1 ] \
    || { echo "e2e: docs/server-api.md no longer has 1 sh block: update this test" >&2; exit 1; }
awk '/^```/ { if (inside) { inside = 0; next } if ($0 == "```sh") { inside = 1; next } } inside' docs/server-api.md \
    >"$WORK/recipe.sh"
timeout 120 bash -euo pipefail "$WORK/recipe.sh" >"$WORK/out" 2>"$WORK/err" \
    || { cat "$WORK/out" "$WORK/err" >&2; echo "e2e: docs/server-api.md's recipe failed" >&2; exit 1; }
grep -q '^com.example.app Production: .* 1 page, notifications: 1 new, 0 already known, 0 refused$' "$WORK/out" \
    || { cat "$WORK/out" >&2; echo "e2e: the first sync did not take the notification" >&2; exit 1; }
grep -q '^server_api sync: com.example.app Production: notification history read up to ' "$WORK/out" \
    || { cat "$WORK/out" >&2; echo "e2e: store status did not show the sync cursor" >&2; exit 1; }
grep -q '"transaction_id": "2001"' "$WORK/out" \
    || { cat "$WORK/out" >&2; echo "e2e: the order lookup did not print transaction 2001" >&2; exit 1; }
# The recipe removes its temp dir and stops the fake.
[ -z "$(ls -A "$WORK" | grep -v -e '^recipe.sh$' -e '^out$' -e '^err$')" ] \
    || { ls -la "$WORK" >&2; echo "e2e: the recipe left files behind" >&2; exit 1; }
echo "test-server-api-docs: ok"
