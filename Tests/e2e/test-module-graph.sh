#!/usr/bin/env bash
# README's module graph is the package's: the "target / uses" block under Development lists every target but the
# test suites, each with exactly the dependencies `swift package describe` reports (order aside).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$E2E_ROOT"
described="$(mktemp)"
trap 'rm -f "$described"' EXIT
swift package describe --type json >"$described" 2>/dev/null

python3 - README.md "$described" <<'PY'
import json, sys

readme, described = sys.argv[1], sys.argv[2]
lines = open(readme, encoding="utf-8").read().splitlines()
try:
    start = next(i for i, line in enumerate(lines) if line.split() == ["target", "uses"])
except StopIteration:
    sys.exit("FAIL: README has no module graph block (a line 'target  uses' inside a code block)")
documented = {}
target = None
for line in lines[start + 1:]:
    if line.startswith("```"):
        break
    # An indented line goes on with the line above's list.
    if line[:1].isspace() and target:
        uses = line.strip()
    else:
        target, _, uses = line.strip().partition(" ")
        documented[target] = set()
    documented[target] |= {name.strip() for name in uses.split(",") if name.strip() not in ("", "-")}

package = {
    target["name"]: set(target.get("target_dependencies", []))
    for target in json.load(open(described))["targets"]
    if target["type"] not in ("test", "system-target")
}
failures = 0
for name in sorted(package.keys() | documented.keys()):
    if name not in documented:
        print(f"FAIL: README's module graph leaves out the target {name} (uses {', '.join(sorted(package[name])) or '-'})")
    elif name not in package:
        print(f"FAIL: README's module graph lists {name}, which Package.swift does not declare")
    elif documented[name] != package[name]:
        missing = ", ".join(sorted(package[name] - documented[name])) or "none"
        extra = ", ".join(sorted(documented[name] - package[name])) or "none"
        print(f"FAIL: README says {name} uses {', '.join(sorted(documented[name]))}; missing {missing}, not used {extra}")
    else:
        continue
    failures += 1
print(f"{len(package) - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
PY
