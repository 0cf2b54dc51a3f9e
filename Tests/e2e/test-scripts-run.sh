#!/usr/bin/env bash
# README's first command, run as written from the clone's root: `scripts/run` builds receiptd and serves
# Config/receiptd.json on 127.0.0.1:8080; /healthz answers there, and SIGTERM stops it with exit status 0.
# The port is README's, not a free one: if something else already listens on 8080, this fails and says so rather
# than testing that other server.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
log="$(mktemp)"
pid=""
cleanup() {
    local status=$?
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -f "$log"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "test-scripts-run: $*" >&2; sed 's/^/    /' "$log" | tail -n 20 >&2; exit 1; }

if (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; then
    echo "test-scripts-run: something already listens on 127.0.0.1:8080 (README's port); stop it and run again:" >&2
    (ss -ltnp 'sport = :8080' 2>/dev/null || true) | sed 's/^/    /' >&2
    exit 1
fi

# The default config must be the one README promises, or this test would check another address.
[ "$(jq -r '"\(.host):\(.port)"' Config/receiptd.json)" = "127.0.0.1:8080" ] \
    || fail "Config/receiptd.json does not listen on 127.0.0.1:8080"

# Not through `timeout`: scripts/run must itself be the server (it execs the binary), which SIGTERM below checks.
env -u RECEIPTD_CONFIG -u RECEIPTD_HOST -u RECEIPTD_PORT scripts/run >"$log" 2>&1 &
pid=$!

# A first release build takes minutes on 2 cores; a later one, a few seconds.
for _ in $(seq 1 480); do
    grep -q 'listening address=http://127.0.0.1:8080 ' "$log" && break
    kill -0 "$pid" 2>/dev/null || fail "scripts/run exited before listening on 127.0.0.1:8080"
    sleep 1
done
grep -q 'listening address=http://127.0.0.1:8080 ' "$log" \
    || fail "scripts/run did not listen on 127.0.0.1:8080 within 8 minutes"
grep -q "config=Config/receiptd.json" "$log" || fail "scripts/run did not serve Config/receiptd.json"

health="$(curl -sS --max-time 5 http://127.0.0.1:8080/healthz)" || fail "GET /healthz on 127.0.0.1:8080 failed"
jq -e '.status == "ok" and (.version | type) == "string" and (.started_at | test("^[0-9-]+T[0-9:]+Z$"))' \
    <<<"$health" >/dev/null || fail "/healthz answered $health"
# The exec'd binary is scripts/run's own pid, so the server that answered is the one this test started.
[ "$(basename "$(readlink "/proc/$pid/exe")")" = receiptd ] \
    || fail "scripts/run's process is $(readlink "/proc/$pid/exe"), not receiptd: it must exec the server"

kill -TERM "$pid"
status=0
for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "receiptd did not stop within 15 s of SIGTERM"
wait "$pid" || status=$?
pid=""
[ "$status" -eq 0 ] || fail "scripts/run exited $status after SIGTERM, not 0"
grep -q 'stopped' "$log" || fail "receiptd did not log its clean stop"

# Config/README.md's command, as written, with the binary scripts/run built on the PATH.
PATH="$(swift build -c release --show-bin-path):$PATH"
receiptd serve --config Config/receiptd.json >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    grep -q 'listening address=http://127.0.0.1:8080 ' "$log" && break
    kill -0 "$pid" 2>/dev/null || fail "receiptd serve --config Config/receiptd.json exited: $(cat "$log")"
    sleep 0.1
done
curl -sS --max-time 5 http://127.0.0.1:8080/healthz >/dev/null \
    || fail "receiptd serve --config Config/receiptd.json did not answer /healthz"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
[ "$status" -eq 0 ] || fail "receiptd serve --config Config/receiptd.json exited $status after SIGTERM, not 0"
echo "test-scripts-run: scripts/run and Config/README.md's command served Config/receiptd.json on 127.0.0.1:8080" \
    "and stopped cleanly on SIGTERM"
