#!/usr/bin/env bash
# No Docker engine runs on our machines: check what can be checked without one (scripts/check-docker) against the
# binary the Dockerfile builds (release, static Swift standard library).
set -euo pipefail
cd "$(dirname "$0")/../.."
swift build -c release --static-swift-stdlib --product receiptd >/dev/null
scripts/check-docker "$(swift build -c release --show-bin-path)/receiptd"
