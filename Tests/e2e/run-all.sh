#!/usr/bin/env bash
# Runs every Tests/e2e/test-*.sh in turn (each starts and stops its own servers), one line per script, and a closing
# line "N passed, M failed". Exits non-zero if any failed. A failing script's output is shown; a passing one's is not
# unless E2E_VERBOSE=1. Each script gets at most E2E_SCRIPT_TIMEOUT seconds (default 600).
# Usage: Tests/e2e/run-all.sh [PATTERN]   e.g. run-all.sh openapi runs only scripts whose name contains "openapi".
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
TIMEOUT="${E2E_SCRIPT_TIMEOUT:-600}"
PATTERN="${1:-}"

passed=0 failed=0
output="$(mktemp)"
trap 'rm -f "$output"' EXIT

shopt -s nullglob
for script in "$HERE"/test-*.sh; do
    name="$(basename "$script")"
    [ -z "$PATTERN" ] || [[ "$name" == *"$PATTERN"* ]] || continue
    started=$SECONDS
    # --kill-after: a script ignoring SIGTERM is killed 15 s later. Scripts run by bash, so none needs +x.
    timeout --kill-after=15 "$TIMEOUT" bash "$script" >"$output" 2>&1 </dev/null
    status=$?
    elapsed=$((SECONDS - started))
    if [ "$status" -eq 0 ]; then
        passed=$((passed + 1))
        printf 'PASS %s (%ss)\n' "$name" "$elapsed"
        [ "${E2E_VERBOSE:-0}" = 1 ] && sed 's/^/    /' "$output"
    else
        failed=$((failed + 1))
        reason="exit $status"
        [ "$status" -eq 124 ] || [ "$status" -eq 137 ] && reason="timed out after ${TIMEOUT}s"
        printf 'FAIL %s (%ss, %s)\n' "$name" "$elapsed" "$reason"
        sed 's/^/    /' "$output"
    fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
