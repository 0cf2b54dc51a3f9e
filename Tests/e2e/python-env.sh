# shellcheck shell=bash
# Shared by end-to-end scripts that need packages from PyPI. Source it after lib.sh. Needs bash and python3 (3.8+).
#
# e2e_python_venv DIR PACKAGE…: makes a virtualenv, pip-installs the (pinned) packages into it, sets E2E_PYTHON to
# its interpreter. DIR is normally inside the script's temp dir, so it is removed with it. To reuse one venv across
# runs (faster, and no PyPI access after the first), set E2E_VENV=/some/dir: that venv is created once, topped up
# with missing packages, and never removed.
e2e_python_venv() {
    local dir="${E2E_VENV:-$1}"
    shift
    if [ ! -x "$dir/bin/python" ]; then
        timeout 120 python3 -m venv "$dir" || { echo "e2e: python3 -m venv $dir failed (apt-get install python3-venv?)" >&2; return 1; }
    fi
    # pip check-then-install: a reused venv with the pins already satisfied does not touch the network.
    if ! "$dir/bin/python" - "$@" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version, PackageNotFoundError
for pin in sys.argv[1:]:
    name, _, wanted = pin.partition("==")
    try:
        installed = version(name)
    except PackageNotFoundError:
        sys.exit(1)
    if wanted and installed != wanted:
        sys.exit(1)
PY
    then
        timeout 300 "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --timeout 30 "$@" \
            || { echo "e2e: pip install $* failed" >&2; return 1; }
    fi
    E2E_PYTHON="$dir/bin/python"
    export E2E_PYTHON
}
