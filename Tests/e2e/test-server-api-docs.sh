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

# Every sh block of the page names the test that runs it, and that test exists.
blocks="$(grep -c '^```sh$' docs/server-api.md)"
markers="$(grep -B2 '^```sh$' docs/server-api.md | grep -c '^<!-- run by Tests/e2e/[a-z0-9-]*\.sh -->$' || true)"
[ "$blocks" -eq "$markers" ] \
    || { echo "e2e: docs/server-api.md has $blocks sh blocks but $markers '<!-- run by Tests/e2e/NAME.sh -->' lines before them" >&2; exit 1; }
for script in $(sed -n 's/^<!-- run by Tests\/e2e\/\([a-z0-9-]*\.sh\) -->$/\1/p' docs/server-api.md); do
    [ -f "$HERE/$script" ] || { echo "e2e: docs/server-api.md names Tests/e2e/$script, which does not exist" >&2; exit 1; }
done
docs_sh_block docs/server-api.md test-server-api-docs.sh >"$WORK/recipe.sh"
[ -s "$WORK/recipe.sh" ] || { echo "e2e: docs/server-api.md has no recipe for this test" >&2; exit 1; }
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
