#!/usr/bin/env bash
# Runs every ```sh block of docs/cli.md exactly as written: `receiptd` on the PATH, from the clone's root (block 1
# checks the shipped config), with HOME a scratch folder (block 2 installs the completion scripts there). Checks the
# scripts landed, and that each is one its shell can read.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
DOC="$E2E_ROOT/docs/cli.md"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "test-cli-docs: FAIL: $*" >&2; exit 1; }

sh_block() {
    awk -v n="$1" '
        /^```/ { if (inside) { inside = 0; next } if ($0 == "```sh" && ++k == n) { inside = 1; next } }
        inside' "$DOC"
}
[ "$(grep -c '^```sh$' "$DOC")" -eq 2 ] || fail "docs/cli.md no longer has 2 sh blocks: update this test"
! grep -qE '^```(bash|shell|console)$' "$DOC" || fail "docs/cli.md has a shell block this test does not run"

unset RECEIPTD_CONFIG RECEIPTD_STORE_POSTGRES RECEIPTD_PORT RECEIPTD_HOST RECEIPTD_API_TOKENS
export PATH="$(cd "$(dirname "$RECEIPTD")" && pwd):$PATH"

cd "$E2E_ROOT"
sh_block 1 > "$WORK/block1.sh"
bash -euo pipefail "$WORK/block1.sh" > "$WORK/block1.out" 2>&1 || { cat "$WORK/block1.out"; fail "block 1 (check-config) failed"; }
grep -q "check-config: ok" "$WORK/block1.out" || fail "check-config did not say ok"

sh_block 2 > "$WORK/block2.sh"
HOME="$WORK/home" bash -euo pipefail "$WORK/block2.sh" || fail "block 2 (completion) failed"
bash_script="$WORK/home/.local/share/bash-completion/completions/receiptd"
for script in "$bash_script" "$WORK/home/.zfunc/_receiptd" "$WORK/home/.config/fish/completions/receiptd.fish"; do
    [ -s "$script" ] || fail "no completion script at ${script#$WORK/home/}"
    grep -q "check-config" "$script" || fail "${script#$WORK/home/} does not complete check-config"
done
bash -n "$bash_script" || fail "the bash completion script does not parse"
# The bash script completes a subcommand when sourced: `receiptd store re<TAB>` offers restore.
completions="$(bash -c '
    source "$1"
    COMP_WORDS=(receiptd store re); COMP_CWORD=2; COMP_LINE="receiptd store re"; COMP_POINT=${#COMP_LINE}
    _receiptd 2>/dev/null || true
    printf "%s\n" "${COMPREPLY[@]}"' _ "$bash_script")"
grep -qx "restore" <<<"$completions" || fail "bash completion of 'receiptd store re' did not offer restore: $completions"
if command -v zsh >/dev/null; then zsh -n "$WORK/home/.zfunc/_receiptd" || fail "the zsh script does not parse"; fi
if command -v fish >/dev/null; then fish -n "$WORK/home/.config/fish/completions/receiptd.fish" || fail "the fish script does not parse"; fi
echo "test-cli-docs: docs/cli.md's commands run as written"
