#!/usr/bin/env bash
# docs/openapi.yaml against the live server: the spec loads, schemathesis (from PyPI, in a throwaway venv) fuzzes
# every operation and checks status codes, content types, headers and response schemas, and test-openapi.py sends
# the requests a fuzzer cannot make (forged receipts and StoreKit 2 JWS, notifications, the ledger's endpoints on a
# server with a SQLite store, every verifyReceipt status, the HTTP limits) and validates each answer against the
# spec's schema for that operation and status.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
. "$HERE/python-env.sh"
SPEC="$E2E_ROOT/docs/openapi.yaml"

WORK="$(mktemp -d)"
PIDS=() LOGS=()
cleanup() {
    local status=$? i
    set +e
    for i in "${!PIDS[@]}"; do
        RECEIPTD_PID="${PIDS[$i]}" SERVER_LOG="${LOGS[$i]}"
        stop_server || status=1
        rm -f "${LOGS[$i]}"
    done
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# serve NAME JQ_EDIT: starts a server on the test world's config edited by JQ_EDIT; sets NAME_URL.
serve() {
    jq "$2" "$WORK/receiptd.json" >"$WORK/$1.json"
    start_server "$WORK/$1.json"
    PIDS+=("$RECEIPTD_PID") LOGS+=("$SERVER_LOG")
    printf -v "$1_URL" '%s' "$BASE_URL"
}

e2e_python_venv "$WORK/venv" schemathesis==4.32.5 jsonschema PyYAML

make_test_world "$WORK"
"$RECEIPTD" testing init-ca "$WORK/untrusted-ca" 2>/dev/null
serve MAIN '.max_body_bytes = 65536 | .max_header_bytes = 8192 | .header_read_timeout = 1'
serve PRODUCTION_ONLY '.environments = ["Production"]'
serve SMALL '.max_connections = 2 | .max_receipt_bytes = 1024'
# The ledger: a SQLite file in the temp world (relative to the config's folder), and the EC test chain trusted so that
# forged StoreKit 2 data verifies.
serve STORE '.trusted_roots += ["ca/jws-root.pem"] | .store = {"sqlite": "ledger.sqlite"}'
# Who may call: a server with api_tokens (one token with every scope, one with `metrics` only) and a ledger, so that
# the guarded operations answer 401 and 403 as documented, and schemathesis' ignored_auth check has teeth. The other
# servers have no api_tokens and so trust their loopback callers, which is why they skip that check.
"$RECEIPTD" token new --name e2e --scopes validate,ledger:read,claim,metrics,support,accounts:write >"$WORK/token-all.txt"
"$RECEIPTD" token new --name e2e-metrics --scopes metrics >"$WORK/token-metrics.txt"
AUTH_TOKEN="$(sed -n 's/^token: //p' "$WORK/token-all.txt")"
METRICS_TOKEN="$(sed -n 's/^token: //p' "$WORK/token-metrics.txt")"
entries="$(sed -n 's/^api_tokens entry: //p' "$WORK/token-all.txt" "$WORK/token-metrics.txt" | paste -sd, -)"
serve AUTH ".trusted_roots += [\"ca/jws-root.pem\"] | .store = {\"sqlite\": \"auth-ledger.sqlite\"} | .api_tokens = [$entries]"

echo "== schemathesis: every operation, bounded"
# Checks that the spec cannot honour by design are left out where they do not apply:
# - /v1/validate: positive_data_acceptance (a schema-valid body is any bytes; only a genuine receipt gets 2xx, any
#   other answers 422 with the verdict, which the spec documents);
# - verifyReceipt: negative_data_rejection and unsupported_method (Apple's contract answers every request, whatever
#   its body or method, with HTTP 200 and a status; 21000 for one it cannot read);
# - /v1/notifications: positive_data_acceptance, as for /v1/validate (a schema-valid signedPayload is any string;
#   only a notification signed by a trusted chain gets 2xx, any other answers 422 with the verdict).
# The ledger's and notifications' operations run against the server with a store, so that their answers are the
# ledger's (404 for ids it never saw, 400 for bad bodies) and not all 503 store_not_configured; every check applies to
# the ledger's reads and claims (positive_data_acceptance takes their 404 for an unknown id).
# - accounts: as the ledger's, on the server with a store, but a posted purchase is a /v1/validate body (see above).
# - /lookup (tag support) answers an id it cannot find in the ledger and takes for an order id with 503
#   server_api_not_configured, as documented: it runs on its own, on the server with a store and tokens, without
#   not_a_server_error and positive_data_acceptance.
# Run from the temp dir: schemathesis writes a .schemathesis/ cache into the working directory.
st() {
    local url="$1"
    shift
    (cd "$WORK" && timeout 150 "$(dirname "$E2E_PYTHON")/schemathesis" run "$SPEC" --url "$url" \
        --max-examples 20 --seed 20260101 --request-timeout 10 --workers 1 --suppress-health-check all \
        --warnings off --output-truncate false "$@")
}
# server-api: without Apple every answer is 503 by design; Tests/ReceiptServiceTests/OrderLookupRouteTests.swift and
# RenewalExtensionTests.swift drive it against a fake Apple.
st "$MAIN_URL" --exclude-tag apple-compatible --exclude-tag ledger --exclude-tag notifications --exclude-tag server-api \
    --exclude-tag support --exclude-tag accounts --exclude-checks positive_data_acceptance,ignored_auth
st "$STORE_URL" --include-tag ledger --exclude-checks ignored_auth
# accounts: a posted purchase is a /v1/validate body, so positive_data_acceptance does not apply, as there.
st "$STORE_URL" --include-tag accounts --exclude-checks positive_data_acceptance,ignored_auth
st "$STORE_URL" --include-tag notifications --exclude-checks positive_data_acceptance
st "$MAIN_URL" --include-tag apple-compatible --exclude-checks negative_data_rejection,unsupported_method
st "$AUTH_URL" --header "Authorization: Bearer $AUTH_TOKEN" --exclude-tag apple-compatible --exclude-tag notifications \
    --exclude-tag server-api --exclude-tag support --exclude-checks positive_data_acceptance
st "$AUTH_URL" --header "Authorization: Bearer $AUTH_TOKEN" --include-tag support \
    --exclude-checks positive_data_acceptance,not_a_server_error

echo "== hand-written requests, every endpoint and status"
SPEC="$SPEC" RECEIPTD="$RECEIPTD" CA="$WORK/ca" UNTRUSTED_CA="$WORK/untrusted-ca" MAIN_URL="$MAIN_URL" \
    PRODUCTION_ONLY_URL="$PRODUCTION_ONLY_URL" SMALL_URL="$SMALL_URL" STORE_URL="$STORE_URL" \
    LEDGER="$WORK/ledger.sqlite" AUTH_URL="$AUTH_URL" AUTH_TOKEN="$AUTH_TOKEN" METRICS_TOKEN="$METRICS_TOKEN" \
    timeout 120 "$E2E_PYTHON" "$HERE/test-openapi.py"
