#!/usr/bin/env bash
# The command line as a user meets it: receiptd testing makes a PKI and receipts, receiptd verify judges them, and
# every mistake is a usage error (exit 2) that names what is wrong. StoreKit 2 signed data: test-storekit-cli.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
failures=0

R="$RECEIPTD"
device=6C:40:08:B5:94:5E
check "init-ca makes a PKI" 0 "$R" testing init-ca ca
contains "init-ca says how to trust it" err.txt '"trusted_roots"'
for file in root.pem intermediate.pem signing.pem signing.key.pem README.txt jws-root.pem jws-signing.key.pem; do
    [ -s "ca/$file" ] || { echo "FAIL: init-ca did not write $file"; failures=$((failures + 1)); }
done
contains "the PKI says it is for tests" ca/README.txt "FOR TESTS ONLY"
check "init-ca refuses to overwrite" 2 "$R" testing init-ca ca
echo '{"trusted_roots": ["ca/root.pem"], "apps": [{"bundle_id": "com.example.app", "versions": ["1.0"]}]}' > config.json

check "forge a receipt" 0 "$R" testing receipt --ca ca --bundle-id com.example.app --app-version 1.0 \
    --original-version 0.9 --device-id "$device" --environment Sandbox --created 2026-01-02T03:04:05Z \
    --purchase product=pro.monthly,transaction=2,original=1,purchased=2026-01-01T00:00:00Z,expires=2026-02-01T00:00:00Z,trial=true \
    --purchase product=coins,transaction=3,quantity=5 --out good.der
check "verify --json a forged receipt" 0 "$R" verify good.der --config config.json --device-id "$device" --json
jq -e '.valid == true and .environment == "Sandbox" and .receipt.original_application_version == "0.9"
    and .receipt.creation_date == "2026-01-02T03:04:05Z" and (.receipt.in_app | length) == 2
    and (.receipt.in_app[] | select(.product_id == "pro.monthly") | .is_trial_period) == true
    and (.receipt.in_app[] | select(.product_id == "coins") | .quantity) == 5
    and .checks.device_hash == "passed"' out.txt >/dev/null || { echo "FAIL: verify --json fields"; cat out.txt; failures=$((failures + 1)); }

check "forge base64 to stdout with a random device" 0 "$R" testing receipt --ca ca --bundle-id com.example.app --app-version 1.0 --format base64
contains "a random device id is printed" err.txt "device id: "
cp out.txt good.b64
random_device="$(sed -n 's/^device id: //p' err.txt)"
check "verify reads base64 and the printed device id matches" 0 "$R" verify good.b64 --config config.json --device-id "$random_device"

check "a receipt forged for another app" 0 "$R" testing receipt --ca ca --bundle-id com.example.other --app-version 1.0 --out other.der
check "verify says invalid (exit 1)" 1 "$R" verify other.der --config config.json
contains "verify names the code" out.txt "INVALID (bundle_id_mismatch)"
check "--bundle-id overrides the configured apps" 0 "$R" verify other.der --config config.json --bundle-id com.example.other

"$R" testing init-ca other-ca 2>/dev/null
check "a receipt from an untrusted CA" 0 "$R" testing receipt --ca other-ca --bundle-id com.example.app --app-version 1.0 --out untrusted.der
check "is untrusted" 1 "$R" verify untrusted.der --config config.json
contains "untrusted code" out.txt "certificate_untrusted"
cp good.der tampered.der
printf '\x00' | dd of=tampered.der bs=1 seek=200 conv=notrunc 2>/dev/null
check "a tampered receipt is invalid" 1 "$R" verify tampered.der --config config.json

check "many files end with a summary" 1 "$R" verify good.der other.der untrusted.der --config config.json
contains "summary counts valid" out.txt "valid                  1"
contains "summary counts each code" out.txt "certificate_untrusted  1"
check "many files as JSON lines name each file" 1 "$R" verify good.der other.der --config config.json --json
[ "$(jq -r .file out.txt | tr '\n' ' ')" = "good.der other.der " ] || { echo "FAIL: JSON lines"; failures=$((failures + 1)); }

check "bad device id is a usage error" 2 "$R" verify good.der --device-id not-a-device
contains "it says what a device id is" err.txt "--device-id"
check "missing file is a usage error" 2 "$R" verify missing.der
check "unknown option" 2 "$R" verify good.der --frobnicate
echo '{"aps": []}' > misspelt.json
check "unknown config key" 2 "$R" verify good.der --config misspelt.json
contains "the key is named" err.txt "aps"
check "bad purchase spec" 2 "$R" testing receipt --ca ca --bundle-id b --app-version 1 --purchase product=p,transaction=1,expires=soon
contains "the field is named" err.txt "expires"
check "missing --ca" 2 "$R" testing receipt --bundle-id b --app-version 1
check "bad environment" 2 "$R" testing receipt --ca ca --bundle-id b --app-version 1 --environment Staging
check "unknown command" 2 "$R" frobnicate
check "help for an unknown command" 2 "$R" help frobnicate
check "a group without its command" 2 "$R" store
check "--kind receipt, as ?kind=receipt" 0 "$R" verify good.der --config config.json --kind receipt
check "a bad --kind" 2 "$R" verify good.der --config config.json --kind receipts
contains "the kinds are named" err.txt "renewal_info"
for shell in bash zsh fish; do
    check "a $shell completion script" 0 "$R" --generate-completion-script "$shell"
    contains "the $shell script completes store restore" out.txt "restore"
done
check "an unknown shell" 2 "$R" --generate-completion-script tcsh
check "check-config of a good config" 0 "$R" check-config --config config.json
contains "check-config says so" out.txt "check-config: ok"
echo '{"trusted_roots": ["ca/missing.pem"]}' > broken.json
check "check-config of a broken config" 1 "$R" check-config --config broken.json
contains "check-config names the file" err.txt "missing.pem"

check "--version" 0 "$R" --version
contains "--version names the program" out.txt "receiptd "
check "version" 0 "$R" version
for command in serve verify testing "testing init-ca" "testing receipt" "help verify"; do
    # shellcheck disable=SC2086 # the subcommand is two words
    check "$command --help" 0 "$R" $command --help
    contains "$command --help prints its usage" out.txt "USAGE: receiptd"
done
check "serve --help" 0 "$R" serve --help
for variable in RECEIPTD_CONFIG RECEIPTD_HOST RECEIPTD_PORT RECEIPTD_STORE_POSTGRES RECEIPTD_API_TOKENS; do
    contains "serve --help names $variable, which serve reads" out.txt "$variable"
done
check "--help" 0 "$R" --help
contains "--help lists store restore" out.txt "restore BACKUP"
check "a repeated --config keeps the last" 0 "$R" verify good.der --config misspelt.json --config config.json
RECEIPTD_CONFIG="" check "an empty RECEIPTD_CONFIG is unset (defaults: Apple's root only)" 1 "$R" verify good.der
contains "so the test CA is untrusted" out.txt "certificate_untrusted"
RECEIPTD_CONFIG=config.json check "RECEIPTD_CONFIG names the file" 0 "$R" verify good.der

# What people actually pass: each answer names what it saw and what to do.
mkdir receipts-folder
check "verify a directory" 2 "$R" verify receipts-folder --config config.json
contains "a directory is named as one" err.txt "is a directory"
check "verify a missing file" 2 "$R" verify no-such.der --config config.json
contains "a missing file is named as one" err.txt "no such file"
check "verify - reads standard input" 0 sh -c "\"$R\" verify - --config config.json < good.der"
check "verify - with nothing piped in" 2 sh -c "\"$R\" verify - --config config.json < /dev/null"
contains "empty standard input is named" err.txt "standard input is empty"
printf '\x89PNG\r\n\x1a\nnot really an image' > screenshot.png
check "verify a PNG" 1 "$R" verify screenshot.png --config config.json --json
contains "a PNG is named as an image" out.txt '"reason": "not_a_receipt_file"'
# Every character of a PEM block is base64url or whitespace, and this one even decodes: still PEM, not a damaged receipt.
printf -- '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n' > cert.pem
check "verify a PEM file" 1 "$R" verify cert.pem --config config.json --json
contains "a PEM file is named as PEM" out.txt '"reason": "pem"'

[ "$failures" -eq 0 ] || { echo "test-cli: $failures failures"; exit 1; }
echo "test-cli: all checks passed"
