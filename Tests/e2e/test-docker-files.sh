#!/usr/bin/env bash
# No Docker engine runs on our machines, so README's `docker build` and `docker run` are not run: this checks what
# can be checked without one, `scripts/check-docker` as README shows it, against the binary the Dockerfile builds
# (release, static Swift standard library), which is the .build/release/receiptd it picks up.
set -euo pipefail
cd "$(dirname "$0")/../.."
swift build -c release --static-swift-stdlib --product receiptd >/dev/null
[ "$(cd .build/release && pwd -P)" = "$(cd "$(swift build -c release --show-bin-path)" && pwd -P)" ] \
    || { echo "test-docker-files: .build/release is not the release build just made" >&2; exit 1; }
scripts/check-docker
