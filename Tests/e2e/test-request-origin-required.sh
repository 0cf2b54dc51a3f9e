#!/usr/bin/env bash
# Where a request came from is never assumed: `HTTPRequest` has no default peer or listener, `HTTPRequestDecoder` none
# either, and `ReceiptRoutes.handle` no default listener. Each snippet that leaves one out must fail to type-check
# against the built modules, naming what is missing; the same code with it must type-check, so the failure is the
# missing argument and not the set-up.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
MODULES="$(cd "$(dirname "$RECEIPTD")" && pwd)/Modules"
[ -f "$MODULES/HTTP1Server.swiftmodule" ] || { echo "test-request-origin-required: no $MODULES/HTTP1Server.swiftmodule" >&2; exit 1; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "test-request-origin-required: FAIL: $*" >&2; exit 1; }

# The modules' own C module maps, and the headers pkg-config gives their system libraries.
flags=(-swift-version 6 -I "$MODULES")
for map in "$E2E_ROOT"/Sources/C*/module.modulemap; do flags+=(-I "$(dirname "$map")"); done
# And the C shims of the Swift packages ReceiptService depends on (swift-atomics', under swift-prometheus).
for map in "$E2E_ROOT"/.build/checkouts/*/Sources/*/include/module.modulemap; do flags+=(-I "$(dirname "$map")"); done
for package in openssl libpq libcurl sqlite3; do
    for include in $(pkg-config --cflags-only-I "$package" 2>/dev/null); do flags+=(-Xcc "$include"); done
done

prelude='import HTTP1Server
import ReceiptService
func peer() -> HTTPPeer { HTTPPeer(address: "127.0.0.1:1", isLoopback: true) }
func listener() -> HTTPListener { HTTPListener(address: "127.0.0.1:8080", isLoopback: true) }
func request() -> HTTPRequest { HTTPRequest(method: .get, target: "/metrics", peer: peer(), listener: listener()) }'

typecheck() {
    printf '%s\n%s\n' "$prelude" "$1" >"$WORK/snippet.swift"
    swiftc -typecheck "${flags[@]}" "$WORK/snippet.swift" >"$WORK/out" 2>&1
}

# name | code that must type-check | the same without the argument | what the compiler must say is missing
cases=(
    "request|_ = HTTPRequest(method: .get, target: \"/\", peer: peer(), listener: listener())|_ = HTTPRequest(method: .get, target: \"/\")|'peer', 'listener'"
    "request without a listener|_ = HTTPRequest(method: .get, target: \"/\", peer: peer(), listener: listener())|_ = HTTPRequest(method: .get, target: \"/\", peer: peer())|'listener'"
    "request without a peer|_ = HTTPRequest(method: .get, target: \"/\", peer: peer(), listener: listener())|_ = HTTPRequest(method: .get, target: \"/\", listener: listener())|'peer'"
    "decoder|_ = HTTPRequestDecoder(peer: peer(), listener: listener())|_ = HTTPRequestDecoder()|'peer', 'listener'"
    "route listener|func answer(_ routes: ReceiptRoutes) { _ = routes.handle(request(), on: .main) }|func answer(_ routes: ReceiptRoutes) { _ = routes.handle(request()) }|'on'"
)
for entry in "${cases[@]}"; do
    IFS='|' read -r name good bad missing <<<"$entry"
    typecheck "$good" || fail "$name: the complete call does not type-check: $(cat "$WORK/out")"
    ! typecheck "$bad" || fail "$name: type-checks without $missing: $bad"
    grep -qF "missing argument" "$WORK/out" && grep -qF "$missing" "$WORK/out" \
        || fail "$name: failed for another reason than $missing: $(cat "$WORK/out")"
done
echo "test-request-origin-required: a request, a decoder and a route call without peer or listener do not compile"
