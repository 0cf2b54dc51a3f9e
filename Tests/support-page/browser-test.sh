#!/usr/bin/env bash
# Browser test of the support page (GET /) against a running receiptd.
#
#   Tests/support-page/browser-test.sh PORT VALID_RECEIPT INVALID_RECEIPT [SCREENSHOT_DIR] [--skip-no-js]
#
# PORT: a receiptd listening on 127.0.0.1:PORT. VALID_RECEIPT: a receipt file (DER, or base64 text) that
# server accepts; INVALID_RECEIPT: one it rejects. Screenshots go to SCREENSHOT_DIR (default
# /tmp/receiptd-support-page). Set RECEIPTD_DEVICE_ID to send a device id with the valid receipt.
# --skip-no-js leaves out the form submission with JavaScript disabled.
# Installs Debian's chromium and PyPI's websocket-client when missing. Exits 0 when every check passes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

if [ $# -lt 3 ]; then
    sed -n '2,11p' "$0" >&2
    exit 2
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! command -v chromium >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
if ! command -v python3 >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3 >/dev/null
fi
if ! python3 -c 'import websocket' >/dev/null 2>&1; then
    # Debian's package first (no PyPI access needed); pip where python3 is not Debian's.
    if [ "$(command -v python3)" = /usr/bin/python3 ]; then
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-websocket >/dev/null \
            || python3 -m pip install -q --break-system-packages websocket-client
    else
        python3 -m pip install -q websocket-client
    fi
fi

if ! curl -fsS -o /dev/null --max-time 5 "http://127.0.0.1:$1/healthz"; then
    echo "browser-test: no receiptd answers on 127.0.0.1:$1 (GET /healthz failed)" >&2
    exit 1
fi

extra=()
[ -z "${RECEIPTD_DEVICE_ID:-}" ] || extra+=(--device-id "$RECEIPTD_DEVICE_ID")
exec python3 "$here/browser_test.py" "$@" "${extra[@]}"
