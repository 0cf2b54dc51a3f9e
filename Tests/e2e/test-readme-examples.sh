#!/usr/bin/env bash
# Follows README.md's tour as a new user would, on a free port, and checks every output it shows.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || { echo "test-readme-examples: jq is required (scripts/install-deps installs it)" >&2; exit 1; }
workdir="$(mktemp -d)"
trap 'rm -rf "$workdir"' EXIT
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
python3 "$E2E_ROOT/Tests/e2e/readme_examples.py" "$E2E_ROOT/README.md" "$port" "$workdir"
