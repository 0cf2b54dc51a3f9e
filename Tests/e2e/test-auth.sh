#!/usr/bin/env bash
# Who may call, against the real binary: docs/threat-model.md's ```sh block run exactly as written (receiptd on the
# PATH, from a scratch folder), its token then used with curl as Bearer and as Basic (`curl -u :TOKEN`) on a server
# with that api_tokens entry and a public listener: 401 with both challenges, 403 naming the scope, the public
# port serving only notifications and /healthz, the access log naming the token and never showing it. Then
# deploy/kubernetes read as a pod does (the Secret's placeholder tokens, the public port, the Ingress's one path), and
# the Dockerfile's placeholder.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
DOC="$E2E_ROOT/docs/threat-model.md"
K8S="$E2E_ROOT/deploy/kubernetes"

WORK="$(mktemp -d)"
cleanup() {
    local status=$?
    set +e
    stop_server || status=1
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "test-auth: FAIL: $*" >&2; [ -z "${SERVER_LOG:-}" ] || sed 's/^/    /' "$SERVER_LOG" >&2; exit 1; }
unset RECEIPTD_API_TOKENS RECEIPTD_CONFIG RECEIPTD_STORE_POSTGRES

# --- docs/threat-model.md's block ---------------------------------------------------------------------------------------
[ "$(grep -c '^```sh$' "$DOC")" -eq 1 ] || fail "docs/threat-model.md no longer has 1 sh block: update this test"
! grep -qE '^```(bash|shell|console)$' "$DOC" || fail "docs/threat-model.md has a shell block this test does not run"
awk '/^```/ { if (inside) exit; if ($0 == "```sh") { inside = 1; next } } inside' "$DOC" >"$WORK/block.sh"
mkdir "$WORK/cwd"
(cd "$WORK/cwd" && PATH="$(cd "$(dirname "$RECEIPTD")" && pwd):$PATH" timeout 30 bash -euo pipefail "$WORK/block.sh") \
    >"$WORK/token.out" 2>&1 || fail "the sh block failed: $(cat "$WORK/token.out")"
[ "$(wc -l <"$WORK/token.out")" -eq 2 ] || fail "token new printed other than two lines: $(cat "$WORK/token.out")"
TOKEN="$(sed -n 's/^token: //p' "$WORK/token.out")"
ENTRY="$(sed -n 's/^api_tokens entry: //p' "$WORK/token.out")"
[[ "$TOKEN" =~ ^[A-Za-z0-9_-]{43}$ ]] || fail "the token is not 32 bytes of base64url: $TOKEN"
[ "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)" = "$(jq -r .sha256 <<<"$ENTRY")" ] \
    || fail "the entry's sha256 is not the token's"
[ "$(jq -c .scopes <<<"$ENTRY")" = '["validate","ledger:read","claim"]' ] || fail "the entry's scopes: $ENTRY"
[ -z "$(ls -A "$WORK/cwd")" ] || fail "token new wrote files: $(ls -A "$WORK/cwd")"

# --- a server with that token and a public listener ---------------------------------------------------------------------
jq -n --argjson entry "$ENTRY" '{port: 0, public: {host: "127.0.0.1", port: 0}, api_tokens: [$entry]}' \
    >"$WORK/receiptd.json"
start_server "$WORK/receiptd.json"
PUBLIC="$(grep -oE 'public_address=http://[^ ]+' "$SERVER_LOG" | cut -d= -f2)"
[ -n "$PUBLIC" ] || fail "no public_address in the listening line"

code() { curl -s -o "$WORK/body" -D "$WORK/head" -w '%{http_code}' "$@"; }
[ "$(code "$BASE_URL/v1/transactions/1000000001")" = 401 ] || fail "no token: not 401"
grep -qi '^WWW-Authenticate: Bearer realm="receiptd", Basic realm="receiptd"' "$WORK/head" \
    || fail "401 without both challenges: $(cat "$WORK/head")"
[ "$(jq -r .error.code "$WORK/body")" = unauthorized ] || fail "401 code: $(cat "$WORK/body")"
[ "$(jq -r .error.detail "$WORK/body")" = missing_token ] || fail "no token: $(cat "$WORK/body")"
[ "$(code -H "Authorization: Bearer wrong" "$BASE_URL/v1/transactions/1000000001")" = 401 ] || fail "wrong token"
[ "$(jq -r .error.detail "$WORK/body")" = unknown_token ] || fail "wrong token: $(cat "$WORK/body")"
# No store configured: past authorization, the ledger's own answer.
[ "$(code -H "Authorization: Bearer $TOKEN" "$BASE_URL/v1/transactions/1000000001")" = 503 ] || fail "Bearer"
[ "$(code -u ":$TOKEN" "$BASE_URL/v1/transactions/1000000001")" = 503 ] || fail "curl -u :TOKEN"
[ "$(code -u "anyone:$TOKEN" "$BASE_URL/v1/subscriptions/1000000001")" = 503 ] || fail "Basic with a user"
[ "$(code -u ":$TOKEN" "$BASE_URL/metrics")" = 403 ] || fail "missing scope: not 403"
[ "$(jq -r '.error.code + " " + .error.scope' "$WORK/body")" = "forbidden metrics" ] \
    || fail "403 body: $(cat "$WORK/body")"
[ "$(code -u ":$TOKEN" "$BASE_URL/v1/transactions/$(printf 'x%.0s' $(seq 65))")" = 400 ] || fail "a 65-character id"
# Sent as written (curl would resolve them itself): dot-segments are not ids, or libcurl would take them to Apple.
for id in . ..; do
    [ "$(code --path-as-is -u ":$TOKEN" "$BASE_URL/v1/transactions/$id")" = 400 ] || fail "transaction id $id"
    [ "$(jq -r .error.detail "$WORK/body")" = invalid_id ] || fail "transaction id $id: $(cat "$WORK/body")"
    [ "$(code --path-as-is -u ":$TOKEN" "$BASE_URL/v1/transactions/$id/claim" -X POST --data '{"account":"a"}')" = 400 ] \
        || fail "claim of $id"
done
for open in healthz readyz; do
    [ "$(code "$BASE_URL/$open")" = 200 ] || fail "/$open asked for a token"
done

[ "$(code "$PUBLIC/healthz")" = 200 ] || fail "public /healthz"
[ "$(code -X POST --data '{}' "$PUBLIC/v1/notifications")" = 400 ] || fail "public notifications: not the route's 400"
for path in / /metrics /readyz /v1/transactions/1 /v1/subscriptions/1 /verifyReceipt /v1/validate /nope; do
    [ "$(code -u ":$TOKEN" "$PUBLIC$path")" = 404 ] || fail "public GET $path: not 404"
    [ "$(code -u ":$TOKEN" -X POST --data '{}' "$PUBLIC$path")" = 404 ] || fail "public POST $path: not 404"
    ! grep -qiE '^(allow|www-authenticate):' "$WORK/head" || fail "public $path leaks: $(cat "$WORK/head")"
done

grep -q ' token=backend' "$SERVER_LOG" || fail "the access log does not name the token"
! grep -qF -- "$TOKEN" "$SERVER_LOG" || fail "the access log shows the token"
! grep -q 'warning' "$SERVER_LOG" || fail "a warning with tokens configured"
stop_server
SERVER_LOG=""

# --- no api_tokens, bound to loopback: direct callers only --------------------------------------------------------------
jq -n '{host: "127.0.0.1", port: 0}' >"$WORK/loopback.json"
start_server "$WORK/loopback.json"
[ "$(code "$BASE_URL/metrics")" = 200 ] || fail "loopback without tokens: /metrics not served"
for header in "Forwarded: for=198.51.100.17" "X-Forwarded-For: 198.51.100.17" "X-Real-IP: 198.51.100.17" "Via: 1.1 nginx"; do
    [ "$(code -H "$header" "$BASE_URL/metrics")" = 403 ] || fail "forwarded ($header): not 403"
    [ "$(jq -r '.error.code + " " + .error.detail' "$WORK/body")" = "auth_not_configured forwarded_by_proxy" ] \
        || fail "forwarded ($header): $(cat "$WORK/body")"
    jq -r .error.message "$WORK/body" | grep -q 'api_tokens' || fail "forwarded: the message does not say how to fix it"
    [ "$(code -H "$header" "$BASE_URL/healthz")" = 200 ] || fail "forwarded ($header): /healthz refused"
done
! grep -q 'warning' "$SERVER_LOG" || fail "a warning on loopback"
stop_server
SERVER_LOG=""

# --- deploy/kubernetes, as the pods read it -----------------------------------------------------------------------------
awk '/^  receiptd.json: \|$/ { inside = 1; next } inside && /^    / { sub(/^    /, ""); print; next } inside { exit }' \
    "$K8S/configmap.yaml" >"$WORK/k8s.json"
[ "$(jq -c .public "$WORK/k8s.json")" = '{"host":"0.0.0.0","port":8443}' ] || fail "the ConfigMap has no public listener"
placeholder="$(sed -nE "s/^  RECEIPTD_API_TOKENS: \"(.*)\"$/\1/p" "$K8S/api-tokens-secret.yaml")"
[ "$placeholder" = "[]" ] || fail "api-tokens-secret.yaml's placeholder is not []"
grep -q '^# PLACEHOLDER VALUE' "$K8S/api-tokens-secret.yaml" || fail "api-tokens-secret.yaml does not say placeholder"
grep -A4 -- '- name: RECEIPTD_API_TOKENS' "$K8S/deployment.yaml" | grep -q 'name: receiptd-api-tokens' \
    || fail "the Deployment does not take RECEIPTD_API_TOKENS from the Secret"
grep -B1 -A1 'containerPort: 8443' "$K8S/deployment.yaml" | grep -q 'name: public' || fail "no public containerPort"
! grep -q 'targetPort: public' "$K8S/service.yaml" || fail "the main Service exposes the public port"
grep -q 'targetPort: public' "$K8S/service-public.yaml" || fail "service-public.yaml does not target the public port"
[ "$(grep -c 'path: ' "$K8S/ingress.yaml")" = 1 ] && grep -q 'path: /v1/notifications$' "$K8S/ingress.yaml" \
    && grep -q 'name: receiptd-public$' "$K8S/ingress.yaml" || fail "the Ingress must route /v1/notifications alone"
grep -qE '^ *RECEIPTD_API_TOKENS=\[\]$' "$E2E_ROOT/Dockerfile" && grep -q 'RECEIPTD_API_TOKENS: PLACEHOLDER' "$E2E_ROOT/Dockerfile" \
    || fail "the Dockerfile does not ship (and name) the RECEIPTD_API_TOKENS placeholder"
# The pod's config with the placeholder: serves, warns once, answers the probes, and refuses the guarded routes to
# every caller: bound to 0.0.0.0, even a loopback peer may be a proxy on this host speaking for anyone.
jq '.public.port = 0' "$WORK/k8s.json" >"$WORK/k8s-test.json"
RECEIPTD_API_TOKENS="$placeholder" start_server "$WORK/k8s-test.json" --log-format text
[ "$(grep -c ' warning message=' "$SERVER_LOG")" = 1 ] || fail "the placeholder should log one warning"
grep ' warning message=' "$SERVER_LOG" | grep -q 'receiptd token new' || fail "the warning does not say how to fix it"
[ "$(code "$BASE_URL/healthz")" = 200 ] || fail "/healthz in the pod's config"
[ "$(code "$BASE_URL/metrics")" = 403 ] || fail "0.0.0.0 without tokens: a loopback caller was served"
[ "$(jq -r '.error.code + " " + .error.detail' "$WORK/body")" = "auth_not_configured listener_not_loopback" ] \
    || fail "0.0.0.0 without tokens: $(cat "$WORK/body")"
echo "test-auth: docs/threat-model.md's token works as Bearer and Basic; 401/403/404 as documented; public listener" \
    "serves its two routes only; the log names the token; without tokens only direct callers of a loopback listener" \
    "are served; deploy/kubernetes ships a placeholder Secret and one path"
