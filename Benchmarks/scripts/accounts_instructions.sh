#!/usr/bin/env bash
# Issue 24's speed point in instructions, which other work on the machine does not move: each request of an account
# of 3 subscriptions and 200 transactions, and of its subscriptions, answered in process through ReceiptRoutes.handle
# (callgrind, every thread). Each figure is (a run of 12 requests - a run of 2) / 10, so that filling the ledger and
# the first request (which writes the texts the others copy) cancel out.
#   Benchmarks/scripts/accounts_instructions.sh [RECEIPT_BENCH]   default Benchmarks/.build/release/receipt-bench
set -euo pipefail
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
bench=$(realpath "${1:-$here/../.build/release/receipt-bench}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
instructions() {
    local out="$work/callgrind.out"
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bench" profile-accounts --target "$1" --count "$2" \
        >/dev/null 2>"$work/valgrind.log" || { cat "$work/valgrind.log" >&2; exit 1; }
    awk '/^(summary|totals):/ { print $2; exit }' "$out"
}
declare -A per
for target in /v1/accounts/spread /v1/subscriptions/1000000001 /v1/subscriptions/1000000002 \
    /v1/subscriptions/1000000003 /v1/accounts/long /v1/subscriptions/1000000011; do
    per[$target]=$(( ($(instructions "$target" 12) - $(instructions "$target" 2)) / 10 ))
    printf '%-32s %12d instructions a request\n' "$target" "${per[$target]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
echo "spread: account / its subscriptions: $(ratio "${per[/v1/accounts/spread]}" "${per[/v1/subscriptions/1000000001]}")," \
    "$(ratio "${per[/v1/accounts/spread]}" "${per[/v1/subscriptions/1000000002]}")," \
    "$(ratio "${per[/v1/accounts/spread]}" "${per[/v1/subscriptions/1000000003]}")"
echo "long: account / its 190-renewal subscription: $(ratio "${per[/v1/accounts/long]}" "${per[/v1/subscriptions/1000000011]}")"
