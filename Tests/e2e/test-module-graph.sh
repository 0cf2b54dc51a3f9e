#!/usr/bin/env bash
# README's module graph is the package's: the "target / uses" block under Development lists every target but the
# test suites, each with exactly the dependencies `swift package describe` reports (order aside).
# And the sources keep to it: every target (tests and fuzzers too) imports only the modules Package.swift declares
# for it (its targets, and the modules of the products it uses) or the toolchain's own, and each C module is imported
# by its owner alone.
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

swift package show-dependencies --format json >"$described.deps" 2>/dev/null || echo '{}' >"$described.deps"
trap 'rm -f "$described" "$described.deps"' EXIT
python3 - "$described" "$described.deps" <<'PY'
import json, os, re, subprocess, sys

described, dependencies = sys.argv[1], sys.argv[2]
package = json.load(open(described))
root = package.get("path", os.getcwd())

# The toolchain's modules: any target may import them.
TOOLCHAIN = {
    "Swift", "_Concurrency", "Foundation", "FoundationEssentials", "FoundationInternationalization",
    "FoundationNetworking", "Dispatch", "Synchronization", "Glibc", "Musl", "Darwin", "os", "Testing", "XCTest",
}
# Each C module and the one target that may import it.
OWNERS = {"COpenSSL": "CryptoFloor", "CSQLite": "Ledger", "CPostgres": "Ledger", "CCurl": "AppStoreServerAPI",
          "CEpoll": "HTTP1Server"}


def package_paths(node):
    for dependency in node.get("dependencies", []):
        yield dependency.get("path")
        yield from package_paths(dependency)


def product_modules():
    """Each product of a dependency package, as the modules it lets a target import: its targets and theirs."""
    modules = {}
    for path in {p for p in package_paths(json.load(open(dependencies))) if p}:
        try:
            text = subprocess.run(["swift", "package", "--package-path", path, "describe", "--type", "json"],
                                  capture_output=True, text=True, check=True).stdout
            other = json.loads(text)
        except (subprocess.CalledProcessError, json.JSONDecodeError, OSError):
            continue
        targets = {t["name"]: t for t in other.get("targets", [])}

        def closure(name, seen):
            if name in seen or name not in targets:
                return
            seen.add(name)
            for dependency in targets[name].get("target_dependencies", []):
                closure(dependency, seen)
        for product in other.get("products", []):
            seen = set()
            for target in product.get("targets", []):
                closure(target, seen)
            modules.setdefault(product["name"], set()).update(seen)
    return modules


# `import X`, `internal import X`, `@testable import X`, `@_implementationOnly import X`, `import struct X.Y`.
IMPORT = re.compile(
    r"^\s*(?:@[A-Za-z_]+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?"
    r"import\s+(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?([A-Za-z_][A-Za-z0-9_]*)")
targets = [t for t in package["targets"] if t.get("type") != "system-target"]
products = product_modules() if any(t.get("product_dependencies") for t in targets) else {}
failures = 0
checked = 0
for target in sorted(targets, key=lambda t: t["name"]):
    name = target["name"]
    allowed = {name} | set(target.get("target_dependencies", [])) | TOOLCHAIN
    for product in target.get("product_dependencies", []):
        # A product not found among the checkouts is taken to be the module of its name.
        allowed |= products.get(product) or {product}
    for source in target.get("sources", []):
        path = os.path.join(root, target["path"], source)
        if not path.endswith(".swift"):
            continue
        for number, line in enumerate(open(path, encoding="utf-8"), 1):
            match = IMPORT.match(line)
            if not match:
                continue
            module = match.group(1)
            checked += 1
            where = f"{os.path.relpath(path, root)}:{number}"
            if module in OWNERS and OWNERS[module] != name:
                print(f"FAIL: {where}: {name} imports {module}, which only {OWNERS[module]} may import")
                failures += 1
            elif module not in allowed:
                print(f"FAIL: {where}: {name} imports {module}, which Package.swift does not declare for it")
                failures += 1
print(f"imports: {checked} checked, {failures} failed")
sys.exit(1 if failures else 0)
PY
