#!/usr/bin/env bash
# Runs every ```sh block of docs/testing.md exactly as it is written, as the page tells a new user to (from the
# clone's root, after `swift build`): the recipe, the worked examples, and the ways to run this suite (but its bare
# `Tests/e2e/run-all.sh`, which would run this script again: scripts/test runs that one). Checks they cleaned up
# after themselves: no temp dir left, no server left running.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
export RECEIPTD  # the examples read it; unset, lib.sh's default is the same .build/debug/receiptd they fall back to

WORK="$(mktemp -d)"
cleanup() {
    local status=$?
    # A server an example left behind runs with a config under $WORK: stop it (and fail).
    local pid
    for pid in $(pgrep -f -- "serve --config $WORK/" || true); do
        echo "e2e: an example left receiptd $pid running" >&2
        kill -TERM "$pid" 2>/dev/null || true
        status=1
    done
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The examples make their temp dirs with mktemp / tempfile, which honour TMPDIR: give them one to watch.
export TMPDIR="$WORK"
cd "$E2E_ROOT"

# Pages whose shell blocks a test runs: this one (testing.md), test-ledger-docs.sh, test-server-api-docs.sh,
# test-auth.sh (threat-model.md), test-storekit-cli.sh (testing.md's console blocks), test-cli-docs.sh (cli.md),
# test-accounts.sh (accounts.md), test-webhooks.sh (events.md). Any other page (http-api.md and
# operations.md, which README's reference moved to) must show no command, or a test must run it.
for page in docs/*.md; do
    case "$(basename "$page")" in testing.md | ledger.md | server-api.md | threat-model.md | cli.md | accounts.md | events.md) continue ;; esac
    ! grep -qE '^```(sh|bash|shell|console)$' "$page" \
        || { echo "e2e: $page has a shell block that no test runs: run it from a test" >&2; exit 1; }
done

# sh_block N: the Nth ```sh block of docs/testing.md.
sh_block() {
    awk -v n="$1" '
        /^```/ { if (inside) { inside = 0; next } if ($0 == "```sh" && ++k == n) { inside = 1; next } }
        inside' docs/testing.md
}
[ "$(grep -c '^```sh$' docs/testing.md)" -eq 3 ] \
    || { echo "e2e: docs/testing.md no longer has 3 sh blocks: update this test" >&2; exit 1; }

echo "== docs/testing.md, the recipe"
sh_block 1 >"$WORK/recipe.sh"
timeout 120 bash -euo pipefail "$WORK/recipe.sh" >"$WORK/recipe.out" 2>&1 \
    || { cat "$WORK/recipe.out" >&2; echo "e2e: the recipe failed" >&2; exit 1; }
grep -q '"valid":true' "$WORK/recipe.out" \
    || { cat "$WORK/recipe.out" >&2; echo "e2e: the recipe's receipt was not valid" >&2; exit 1; }
rm "$WORK/recipe.sh" "$WORK/recipe.out"

# One command a line, each run as written; comments after them are bash comments.
run_lines() {
    local line
    while IFS= read -r line; do
        echo "== $line"
        timeout 120 bash -euo pipefail -c "$line" </dev/null
    done
}

sh_block 2 | run_lines

first="$(sh_block 3 | head -n 1)"
[ "$(echo ${first%%#*})" = "Tests/e2e/run-all.sh" ] \
    || { echo "e2e: docs/testing.md's suite block no longer starts with the bare run-all.sh: $first" >&2; exit 1; }
sh_block 3 | tail -n +2 | run_lines

left="$(ls -A "$WORK")"
[ -z "$left" ] || { echo "e2e: the examples left files in their temp dir: $left" >&2; exit 1; }
