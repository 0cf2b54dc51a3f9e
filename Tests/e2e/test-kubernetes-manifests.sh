#!/usr/bin/env bash
# deploy/kubernetes against the Kubernetes schemas, offline: kubernetes-validate (PyPI, in a throwaway venv) checks
# every manifest, then again with --strict (no property the schema lacks). Kustomization has no schema there, so its
# resource list is checked by hand against the folder.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/python-env.sh"
ROOT="$(cd "$HERE/../.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

e2e_python_venv "$WORK/venv" kubernetes-validate==1.37.0
validate="$(dirname "$E2E_PYTHON")/kubernetes-validate"
cd "$ROOT"

failed=0
for strict in "" --strict; do
    # shellcheck disable=SC2086 # $strict is one flag or nothing
    if ! "$validate" $strict deploy/kubernetes/*.yaml >"$WORK/out.txt" 2>&1; then
        echo "FAIL: kubernetes-validate $strict deploy/kubernetes/*.yaml:"
        sed 's/^/    /' "$WORK/out.txt"
        failed=1
    fi
    # The one warning expected: Kustomization is kustomize's kind, not the API server's.
    if grep -v '^INFO ' "$WORK/out.txt" | grep -v 'kustomization.yaml Couldn.t find schema for kind Kustomization' \
        | grep -q .; then
        echo "FAIL: kubernetes-validate $strict said more than the expected Kustomization warning:"
        sed 's/^/    /' "$WORK/out.txt"
        failed=1
    fi
done

listed="$(sed -n 's/^  - //p' deploy/kubernetes/kustomization.yaml | sort)"
present="$(cd deploy/kubernetes && ls ./*.yaml | sed 's|^\./||' | grep -vx kustomization.yaml | sort)"
if [ "$listed" != "$present" ]; then
    echo "FAIL: kustomization.yaml lists [$(echo $listed)], the folder has [$(echo $present)]"
    failed=1
fi

[ "$failed" -eq 0 ] || exit 1
echo "test-kubernetes-manifests: $(echo "$present" | wc -l) manifests valid against the Kubernetes 1.37 schemas" \
    "(strict)"
