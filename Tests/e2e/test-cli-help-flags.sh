#!/usr/bin/env bash
# Every flag a `--help` lists is one the command accepts: for each command named in `receiptd --help`, each
# `--flag` its own `--help` shows is tried, with a value and without, and must never be "unknown argument".
set -euo pipefail
. "$(dirname "$0")/lib.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

python3 - "$RECEIPTD" <<'PY'
import re, subprocess, sys

receiptd = sys.argv[1]

def run(args):
    done = subprocess.run([receiptd, *args], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    return done.stdout + done.stderr

# "receiptd store status|backup FILE|migrate [--config PATH]" names three commands; words stop at the first flag,
# placeholder or bracket.
commands = []
for line in run(["--help"]).splitlines():
    words = line.split()
    if len(words) < 2 or words[0] != "receiptd":
        continue
    path = []
    for word in words[1:]:
        if not re.fullmatch(r"[a-z][a-z0-9-]*(\|[a-zA-Z][A-Za-z0-9-]*)*", word):
            break
        path.append(word)
    if not path or path[0] in ("help", "version"):
        continue
    *parents, last = path
    for alternative in last.split("|"):
        if alternative.islower():
            commands.append(parents + [alternative])
# The forms after an alternative ("backup FILE|migrate") start with the next alternative.
if not commands:
    sys.exit("FAIL: receiptd --help names no commands")

failures = 0
tried = 0
for command in commands:
    usage = run([*command, "--help"])
    if "usage: receiptd" not in usage:
        print(f"FAIL: receiptd {' '.join(command)} --help prints no usage")
        failures += 1
        continue
    for flag in sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", usage))):
        if flag == "--help":
            continue
        tried += 1
        refusals = [run([*command, flag, *value]) for value in (["x"], [])]
        if all(f"unknown argument {flag}" in output for output in refusals):
            print(f"FAIL: receiptd {' '.join(command)} --help lists {flag}, which it refuses as unknown")
            failures += 1

print(f"{tried - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
PY
