#!/usr/bin/env bash
# Every command `receiptd --help` lists (and every subcommand of those) answers --help, `receiptd help COMMAND` says
# the same, and each `--flag` its help shows is one the command accepts: tried with a value and without, it must never
# be refused as unknown.
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
    return done.returncode, done.stdout + done.stderr

def section(text, title):
    """The lines of one section of ArgumentParser's help (SUBCOMMANDS:, OPTIONS:)."""
    lines, inside = [], False
    for line in text.splitlines():
        if re.fullmatch(r"[A-Z ]+:.*", line):
            inside = line.startswith(title)
            continue
        if inside:
            lines.append(line)
    return lines

failures = 0
tried = 0
commands = 0
pending = [[]]
while pending:
    command = pending.pop(0)
    status, usage = run([*command, "--help"])
    name = " ".join(["receiptd", *command])
    if status != 0 or f"USAGE: {name}" not in usage:
        print(f"FAIL: {name} --help: exit {status}, no usage")
        failures += 1
        continue
    if command:
        commands += 1
        status, via_help = run(["help", *command])
        if status != 0 or via_help != usage:
            print(f"FAIL: receiptd help {' '.join(command)} differs from {name} --help (exit {status})")
            failures += 1
    subcommands = [m.group(1) for line in section(usage, "SUBCOMMANDS") if (m := re.match(r"  ([a-z][a-z0-9-]*)\b", line))]
    pending += [[*command, sub] for sub in subcommands if sub != "help"]
    if subcommands:
        continue
    for flag in sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", "\n".join(section(usage, "OPTIONS"))))):
        if flag in ("--help", "--version"):
            continue
        tried += 1
        refusals = [run([*command, flag, *value])[1] for value in (["x"], [])]
        if all(f"Unknown option '{flag}'" in output for output in refusals):
            print(f"FAIL: {name} --help lists {flag}, which it refuses as unknown")
            failures += 1

if commands < 20:
    print(f"FAIL: receiptd --help led to only {commands} commands")
    failures += 1
print(f"{commands} commands, {tried - failures} flags passed, {failures} failed")
sys.exit(1 if failures else 0)
PY
