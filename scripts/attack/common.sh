# Shared by scripts/attack-*: a release receiptd on 127.0.0.1 with a test PKI and a forged valid receipt.
# Source it after `cd` to the repository root. Everything lives under $ATTACK_WORK (a fresh temp directory).
set -euo pipefail

ATTACK_WORK=$(mktemp -d /tmp/receiptd-attack.XXXXXX)
ATTACK_PORT=${RECEIPTD_ATTACK_PORT:-18480}
SERVER_PID=""

attack_cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi
    [ -n "${KEEP_ATTACK_WORK:-}" ] || rm -rf "$ATTACK_WORK"
}
trap attack_cleanup EXIT

log() { printf '== %s\n' "$*" >&2; }

# Builds receiptd, makes a test PKI, a valid receipt ($ATTACK_WORK/receipt.der) and a config trusting the PKI.
# Extra JSON members for the config may be passed as the first argument (e.g. '"max_connections": 512,').
attack_prepare() {
    local extra=${1:-}
    swift build -c release --product receiptd >&2
    RECEIPTD=$(swift build -c release --show-bin-path)/receiptd
    "$RECEIPTD" testing init-ca "$ATTACK_WORK/ca" 2>/dev/null
    "$RECEIPTD" testing receipt --ca "$ATTACK_WORK/ca" --bundle-id com.example.attack --app-version 1.0 \
        --purchase "product=pro.monthly,transaction=1001,expires=2099-01-01T00:00:00Z" \
        --out "$ATTACK_WORK/receipt.der" 2>/dev/null
    cat >"$ATTACK_WORK/receiptd.json" <<JSON
{
    "host": "127.0.0.1",
    "port": $ATTACK_PORT,
    "trusted_roots": ["$ATTACK_WORK/ca/root.pem"],
    $extra
    "log_format": "text"
}
JSON
}

# Starts the server in the background (log in $ATTACK_WORK/server.log) and waits until /healthz answers.
attack_start_server() {
    # SERVER_ADDRESS_SPACE_KIB, when set, caps the server's address space (ulimit -v), as a container might.
    (
        [ -z "${SERVER_ADDRESS_SPACE_KIB:-}" ] || ulimit -v "$SERVER_ADDRESS_SPACE_KIB"
        exec "$RECEIPTD" serve --config "$ATTACK_WORK/receiptd.json" >>"$ATTACK_WORK/server.log" 2>&1
    ) &
    SERVER_PID=$!
    for _ in $(seq 1 100); do
        curl -fsS -o /dev/null "http://127.0.0.1:$ATTACK_PORT/healthz" 2>/dev/null && return 0
        sleep 0.1
    done
    log "receiptd did not come up"; cat "$ATTACK_WORK/server.log" >&2; return 1
}

# Resident set size of the server in MiB, from /proc.
attack_rss_mib() { awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$SERVER_PID/status"; }
attack_hwm_mib() { awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$SERVER_PID/status"; }

# One validation through curl: prints the HTTP status and fails unless it is 200 with "valid": true.
attack_check_validation() {
    local body status
    body=$(curl -sS -m 10 -w '\n%{http_code}' -H 'Content-Type: application/octet-stream' \
        --data-binary "@$ATTACK_WORK/receipt.der" "http://127.0.0.1:$ATTACK_PORT/v1/validate")
    status=${body##*$'\n'}
    echo "$status"
    [ "$status" = 200 ] && grep -q '"valid" *: *true' <<<"$body"
}
