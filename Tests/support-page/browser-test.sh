#!/usr/bin/env bash
# Browser test of the support page (GET /) against a running receiptd.
#
#   Tests/support-page/browser-test.sh PORT VALID_RECEIPT INVALID_RECEIPT [SCREENSHOT_DIR] [--skip-no-js]
#
# PORT: a receiptd listening on 127.0.0.1:PORT. VALID_RECEIPT: a receipt file (DER, or base64 text) that
# server accepts; INVALID_RECEIPT: one it rejects. Screenshots go to SCREENSHOT_DIR (default
# /tmp/receiptd-support-page). Set RECEIPTD_DEVICE_ID to send a device id with the valid receipt.
# Set RECEIPTD_JWS to a StoreKit 2 transaction JWS file to check that a pasted JWS shows its verdict and fields.
# Set RECEIPTD_LOOKUP to a transaction id the server's ledger knows to check the lookup box and its timeline.
# --skip-no-js leaves out the form submission with JavaScript disabled.
# Installs Debian's chromium (without recommended extras) when missing, saying so; websocket-client goes into a
# throwaway virtualenv (E2E_VENV to reuse one, see Tests/e2e/python-env.sh), never the system's Python.
# Exits 0 when every check passes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

if [ $# -lt 3 ]; then
    sed -n '2,13p' "$0" >&2
    exit 2
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! command -v chromium >/dev/null 2>&1; then
    echo "browser-test: apt-get install --no-install-recommends chromium" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
venv_parent="$(mktemp -d)"
trap 'rm -rf "$venv_parent"' EXIT
. "$here/../e2e/python-env.sh"
e2e_python_venv "$venv_parent/venv" websocket-client==1.8.0

if ! curl -fsS -o /dev/null --max-time 5 "http://127.0.0.1:$1/healthz"; then
    echo "browser-test: no receiptd answers on 127.0.0.1:$1 (GET /healthz failed)" >&2
    exit 1
fi

extra=()
[ -z "${RECEIPTD_DEVICE_ID:-}" ] || extra+=(--device-id "$RECEIPTD_DEVICE_ID")
[ -z "${RECEIPTD_JWS:-}" ] || extra+=(--jws "$RECEIPTD_JWS")
[ -z "${RECEIPTD_LOOKUP:-}" ] || extra+=(--lookup "$RECEIPTD_LOOKUP")
"$E2E_PYTHON" "$here/browser_test.py" "$@" "${extra[@]}"
