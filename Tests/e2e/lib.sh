# shellcheck shell=bash
# Shared by the end-to-end scripts: find the receiptd binary, start it on a free port, stop it cleanly.
# Source it: `. "$(dirname "$0")/lib.sh"`. Needs bash.

E2E_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RECEIPTD="${RECEIPTD:-$E2E_ROOT/.build/debug/receiptd}"
[ -x "$RECEIPTD" ] || { echo "e2e: $RECEIPTD is not built (run swift build first)" >&2; exit 1; }

# start_server CONFIG [extra serve flags…]: starts `receiptd serve` on a free port, waits until /healthz answers,
# and sets RECEIPTD_PID, PORT, BASE_URL and SERVER_LOG.
start_server() {
    local config="$1"
    shift
    SERVER_LOG="$(mktemp)"
    "$RECEIPTD" serve --config "$config" --port 0 "$@" >"$SERVER_LOG" 2>&1 &
    RECEIPTD_PID=$!
    PORT=""
    for _ in $(seq 1 100); do
        PORT="$(grep -oE 'listening address=http://[^ ]+:[0-9]+' "$SERVER_LOG" | grep -oE '[0-9]+$' | head -n 1 || true)"
        if [ -n "$PORT" ] && curl -fsS --max-time 2 "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1; then break; fi
        kill -0 "$RECEIPTD_PID" 2>/dev/null || { echo "e2e: receiptd exited:" >&2; cat "$SERVER_LOG" >&2; return 1; }
        sleep 0.1
    done
    [ -n "$PORT" ] || { echo "e2e: receiptd did not start:" >&2; cat "$SERVER_LOG" >&2; return 1; }
    BASE_URL="http://127.0.0.1:$PORT"
    export PORT BASE_URL
}

# stop_server: SIGTERM, and the server must exit 0 within 15 s.
stop_server() {
    [ -n "${RECEIPTD_PID:-}" ] || return 0
    kill -TERM "$RECEIPTD_PID" 2>/dev/null || true
    local status=0
    for _ in $(seq 1 150); do
        kill -0 "$RECEIPTD_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$RECEIPTD_PID" 2>/dev/null; then
        echo "e2e: receiptd did not stop within 15 s of SIGTERM" >&2
        kill -KILL "$RECEIPTD_PID"
        status=1
    fi
    wait "$RECEIPTD_PID" || status=$?
    RECEIPTD_PID=""
    [ "$status" -eq 0 ] || { echo "e2e: receiptd exited $status after SIGTERM" >&2; cat "$SERVER_LOG" >&2; }
    rm -f "$SERVER_LOG"
    return "$status"
}

# make_test_world DIR: a test PKI in DIR/ca and a config DIR/receiptd.json trusting it, for com.example.app 1.0
# with shared secret "s3cret", Production and Sandbox accepted.
make_test_world() {
    local dir="$1"
    mkdir -p "$dir"
    "$RECEIPTD" testing init-ca "$dir/ca" 2>/dev/null
    cat >"$dir/receiptd.json" <<JSON
{
    "trusted_roots": ["ca/root.pem"],
    "apps": [{"bundle_id": "com.example.app", "versions": ["1.0", "1.1"], "shared_secret": "s3cret"}],
    "environments": ["Production", "Sandbox"]
}
JSON
}

# check / fail / contains: a script's checks that go on after a failure and count them in `failures` (set it to 0
# first); each command's output lands in out.txt and err.txt in the working directory.
check() { # check DESCRIPTION EXPECTED-EXIT COMMAND...
    local description="$1" expected="$2"
    shift 2
    local status=0
    "$@" >out.txt 2>err.txt || status=$?
    if [ "$status" -ne "$expected" ]; then
        echo "FAIL: $description: exit $status, expected $expected"
        sed 's/^/    /' err.txt | head -n 5
        failures=$((failures + 1))
    fi
}
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}
# wait_until SECONDS DESCRIPTION COMMAND…: polls COMMAND (quietly) until it succeeds; after SECONDS, `fail`s naming
# DESCRIPTION and returns 1.
wait_until() {
    local limit="$1" description="$2"
    shift 2
    local deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$deadline" ] || { fail "$description: not within $limit s"; return 1; }
        sleep 0.2
    done
}
contains() { # contains DESCRIPTION FILE TEXT
    grep -qF -- "$3" "$2" || { fail "$1: '$3' not in $2"; sed 's/^/    /' "$2" | head -n 5; }
}

# docs_sh_block PAGE SCRIPT: the ```sh block of PAGE that follows the line `<!-- run by Tests/e2e/SCRIPT -->`,
# so a page may hold several recipes, each run as written by the test it names.
docs_sh_block() {
    awk -v marker="<!-- run by Tests/e2e/$2 -->" '
        $0 == marker { armed = 1; next }
        /^```/ { if (inside) { exit } if (armed && $0 == "```sh") { inside = 1; next } }
        inside' "$1"
}
