#!/usr/bin/env bash
# Runs the worked examples of docs/testing.md exactly as it tells a new user to (from the clone's root, after
# `swift build`), and checks they cleaned up after themselves: no temp dir left, no server left running.
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

echo "== docs/examples/integration-test.sh"
timeout 120 docs/examples/integration-test.sh

echo "== python3 docs/examples/test_purchase_flow.py"
timeout 120 python3 docs/examples/test_purchase_flow.py

left="$(ls -A "$WORK")"
[ -z "$left" ] || { echo "e2e: the examples left files in their temp dir: $left" >&2; exit 1; }
