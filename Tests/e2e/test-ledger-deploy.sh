#!/usr/bin/env bash
# The ledger as deploy/kubernetes ships it: the ConfigMap's config has no store (the replicas share PostgreSQL), the
# Deployment takes RECEIPTD_STORE_POSTGRES from the Secret, whose value is a marked placeholder, and receiptd reads
# that config as the pods do: no store without the variable, PostgreSQL with it, the password never printed.
# (kubernetes-validate checks the same files against the schemas: test-kubernetes-manifests.sh.)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
K8S="$E2E_ROOT/deploy/kubernetes"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "test-ledger-deploy: FAIL: $*" >&2; exit 1; }
unset RECEIPTD_STORE_POSTGRES RECEIPTD_CONFIG

# The ConfigMap's receiptd.json: the indented block under "receiptd.json: |".
awk '/^  receiptd.json: \|$/ { inside = 1; next } inside && /^    / { sub(/^    /, ""); print; next } inside { exit }' \
    "$K8S/configmap.yaml" >"$WORK/receiptd.json"
python3 -m json.tool "$WORK/receiptd.json" >/dev/null || fail "the ConfigMap's receiptd.json is not JSON"
python3 -c 'import json, sys; sys.exit("store" in json.load(open(sys.argv[1])))' "$WORK/receiptd.json" \
    || fail "the ConfigMap's config has a store: the replicas must share PostgreSQL from the Secret"

status=0
timeout 10 "$RECEIPTD" store status --config "$WORK/receiptd.json" >"$WORK/none.out" 2>&1 || status=$?
[ "$status" = 1 ] && grep -q "no store configured" "$WORK/none.out" \
    || fail "without RECEIPTD_STORE_POSTGRES the ConfigMap's config should have no store: $(cat "$WORK/none.out")"

grep -qE '^  RECEIPTD_STORE_POSTGRES: ".*password=REPLACE-ME' "$K8S/secret.yaml" \
    || fail "secret.yaml should hold a placeholder RECEIPTD_STORE_POSTGRES (password=REPLACE-ME)"
grep -q '^# PLACEHOLDER VALUE' "$K8S/secret.yaml" || fail "secret.yaml does not say its value is a placeholder"
secret_name="$(awk '/^metadata:/ { m = 1 } m && /^  name:/ { print $2; exit }' "$K8S/secret.yaml")"
grep -A4 -- '- name: RECEIPTD_STORE_POSTGRES' "$K8S/deployment.yaml" | grep -q "name: $secret_name" \
    || fail "the Deployment does not take RECEIPTD_STORE_POSTGRES from the Secret $secret_name"
grep -qx '  - secret.yaml' "$K8S/kustomization.yaml" || fail "kustomization.yaml does not list secret.yaml"
grep -qi 'sqlite.*one replica' "$K8S/deployment.yaml" || fail "deployment.yaml does not say SQLite is for one replica"

# The placeholder, as a pod would read it: PostgreSQL, unreachable here, and its password never printed.
placeholder="$(sed -nE 's/^  RECEIPTD_STORE_POSTGRES: "(.*)"$/\1/p' "$K8S/secret.yaml" \
    | sed 's/connect_timeout=[0-9]*/connect_timeout=2/')"
status=0
RECEIPTD_STORE_POSTGRES="$placeholder" timeout 30 "$RECEIPTD" store status --config "$WORK/receiptd.json" \
    >"$WORK/pg.out" 2>&1 || status=$?
[ "$status" = 1 ] && grep -q "cannot reach the database (PostgreSQL)" "$WORK/pg.out" \
    || fail "the Secret's placeholder should name an unreachable PostgreSQL: $(cat "$WORK/pg.out")"
! grep -q "REPLACE-ME" "$WORK/pg.out" || fail "store status printed the Secret's password"
echo "test-ledger-deploy: ConfigMap without a store, Secret placeholder as RECEIPTD_STORE_POSTGRES, read as pods do"
