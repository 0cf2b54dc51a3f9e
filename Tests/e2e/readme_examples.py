#!/usr/bin/env python3
"""Runs every ```console block of README.md, in order, in one bash session, and compares each command's output
with the lines the README shows under it.

A command is a line starting with "$ "; the lines after it, up to the next command or the end of the block, are
its expected output. A line "..." matches any number of lines. The port 8080 in commands is replaced with the one
given, so the tour runs beside anything else listening on 8080.
"""
import os
import re
import subprocess
import sys


def parse(readme):
    commands = []
    in_block = False
    for line in readme.splitlines():
        if line.startswith("```"):
            in_block = line.strip() == "```console"
            continue
        if not in_block:
            continue
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
    return commands


def matches(expected, actual):
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


def main():
    readme_path, port, workdir = sys.argv[1], sys.argv[2], sys.argv[3]
    commands = parse(open(readme_path).read())
    marker = "@@readme-example@@"
    script = ["set -u"]
    for index, (command, _) in enumerate(commands):
        script.append(f"echo '{marker} {index}'")
        script.append(command.replace("8080", port))
    script.append(f"echo '{marker} end'")
    # Jobs started by the tour must not outlive it.
    script.append("kill $(jobs -p) 2>/dev/null; wait")
    repository = os.path.dirname(os.path.abspath(readme_path))
    env = dict(os.environ, TMPDIR=workdir)
    result = subprocess.run(
        ["bash", "-c", "\n".join(script)], cwd=repository, env=env, capture_output=True, text=True, timeout=900
    )
    outputs = {}
    current = None
    for line in result.stdout.splitlines():
        # Output without a final newline (curl's) runs into the next marker.
        found = re.search(f"{marker} (\\d+|end)$", line)
        before = line[: found.start()] if found else line
        if before and current is not None:
            outputs[current].append(before)
        if found:
            current = found.group(1)
            outputs[current] = []
    failures = 0
    for index, (command, expected) in enumerate(commands):
        actual = outputs.get(str(index))
        if actual is None:
            print(f"not run: $ {command}")
            failures += 1
        elif not matches(expected, actual):
            failures += 1
            print(f"MISMATCH: $ {command}\n  expected: {expected}\n  actual:   {actual}")
    if "end" not in outputs:
        print("the tour stopped early; stderr:\n" + result.stderr[-4000:])
        failures += 1
    print(f"README examples: {len(commands) - failures} of {len(commands)} gave the output shown")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
