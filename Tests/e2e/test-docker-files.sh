#!/usr/bin/env bash
# No Docker engine runs on our machines, so README's `docker build` and `docker run` are not run: this checks what
# can be checked without one, `scripts/check-docker` as README shows it, against the binary the Dockerfile builds
# (release, static Swift standard library), which is the .build/release/receiptd it picks up.
set -euo pipefail
cd "$(dirname "$0")/../.."
swift build -c release --static-swift-stdlib --product receiptd >/dev/null
[ "$(cd .build/release && pwd -P)" = "$(cd "$(swift build -c release --show-bin-path)" && pwd -P)" ] \
    || { echo "test-docker-files: .build/release is not the release build just made" >&2; exit 1; }

# README's one small binary: FoundationEssentials rather than Foundation, whose ICU data made it 76 MB, and no DWARF.
# 24.8 MB before its three Swift packages, which issue 27 allowed 3 MB together (swift-argument-parser took 2.0 MB,
# swift-metrics and swift-prometheus 0.6 MB); 28.3 MB with accounts (issue 24, 0.5 MB of our own code); 29.0 MB with
# webhooks (issue 25); 30.0 MB with Apple's duties (issue 26, 1.0 MB). The bound catches what costs megabytes at once
# (Foundation's ICU data, DWARF, another package), not a feature's own code.
binary=.build/release/receiptd
size=$(stat -c %s "$binary")
[ "$size" -lt 32000000 ] || { echo "test-docker-files: $binary is $size bytes, over 32 MB" >&2; exit 1; }
# grep -c reads nm's whole output: grep -q would quit early, and pipefail would count nm's SIGPIPE as no match.
foundation_symbols=$(nm "$binary" | grep -c -e '\$s10Foundation' -e 'FoundationInternationalization' -e 'icudt[0-9]*_dat' || true)
if [ "$foundation_symbols" -gt 0 ]; then
    echo "test-docker-files: $binary links Foundation or ICU; Sources/ import FoundationEssentials only" >&2
    exit 1
fi
echo "test-docker-files: ok: $binary is $size bytes, with neither Foundation nor ICU"
scripts/check-docker
