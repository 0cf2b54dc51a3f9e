# shellcheck shell=bash
# Shared by the Tests/e2e/test-ledger-*.sh scripts, after lib.sh: a throwaway PostgreSQL cluster, forged
# notifications, and small HTTP helpers. Source it: `. "$HERE/ledger-lib.sh"`.

# Whether `receiptd testing notification` exists (it comes with the StoreKit 2 command-line work); tests that need
# it skip those parts, saying so, until it does.
have_notification_forge() {
    "$RECEIPTD" testing notification --help >/dev/null 2>&1
}

skip_line() { echo "SKIP: $*"; }

# forge_notification CA OUT TYPE UUID TRANSACTION ORIGINAL SIGNED EXPIRES [extra flags…]: writes Apple's body
# {"signedPayload": "<JWS>"} for one Sandbox notification of com.example.app to OUT.
forge_notification() {
    local ca="$1" out="$2" type="$3" uuid="$4" transaction="$5" original="$6" signed="$7" expires="$8"
    shift 8
    "$RECEIPTD" testing notification --ca "$ca" --type "$type" --bundle-id com.example.app --environment Sandbox \
        --transaction-id "$transaction" --original-transaction-id "$original" --product-id pro.monthly \
        --purchased "$signed" --expires "$expires" --signed "$signed" --uuid "$uuid" "$@" --out "$out.jws"
    printf '{"signedPayload": "%s"}' "$(tr -d '\n' <"$out.jws")" >"$out"
    rm -f "$out.jws"
}

# make_ledger_world DIR STORE-JSON: a test PKI (receipt and JWS roots) in DIR/ca and DIR/receiptd.json trusting it
# for com.example.app, with the given "store" value (or none when STORE-JSON is empty).
make_ledger_world() {
    local dir="$1" store="$2"
    mkdir -p "$dir"
    "$RECEIPTD" testing init-ca "$dir/ca" >/dev/null 2>&1
    local roots='"ca/root.pem"'
    [ ! -f "$dir/ca/jws-root.pem" ] || roots='"ca/root.pem", "ca/jws-root.pem"'
    {
        echo '{'
        echo "    \"trusted_roots\": [$roots],"
        echo '    "apps": [{"bundle_id": "com.example.app", "versions": [], "shared_secret": null}],'
        if [ -n "$store" ]; then
            echo '    "environments": ["Production", "Sandbox"],'
            echo "    \"store\": $store"
        else
            echo '    "environments": ["Production", "Sandbox"]'
        fi
        echo '}'
    } >"$dir/receiptd.json"
}

# post_notification URL BODY-FILE: prints "STATUS DUPLICATE" ("200 false", "200 true", "503 -", "000 -" when the
# connection failed). Bounded to 10 s.
post_notification() {
    local url="$1" body="$2" answer status
    answer="$(curl -sS --max-time 10 -w '\n%{http_code}' -H 'Content-Type: application/json' \
        --data-binary @"$body" "$url/v1/notifications" 2>/dev/null)" || true
    status="${answer##*$'\n'}"
    [ -n "$status" ] || status=000
    if [ "$status" = 200 ]; then
        echo "200 $(jq -r '.duplicate' <<<"${answer%$'\n'*}" 2>/dev/null || echo '?')"
    else
        echo "$status -"
    fi
}

# --- PostgreSQL: a throwaway cluster on a Unix socket, as in TOOLS.md -------------------------------------------
PG_DIR=""
PG_BIN=""

# pg_available: whether a throwaway cluster can be made here (RECEIPTD_SKIP_POSTGRES=1 says not to try).
pg_available() {
    [ "${RECEIPTD_SKIP_POSTGRES:-0}" != 1 ] || return 1
    PG_BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
    [ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ] && id postgres >/dev/null 2>&1
}

# pg_start: initdb and start a cluster under a new short temp dir (a socket path must stay under 108 bytes); sets
# PG_DIR and PG_CONNINFO. The caller's EXIT trap must call pg_stop.
pg_start() {
    pg_available || { echo "e2e: PostgreSQL server binaries not found (apt install postgresql)" >&2; return 1; }
    PG_DIR="$(mktemp -d /tmp/receiptd-pg.XXXXXX)"
    run_as_postgres() {
        if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
    }
    [ "$(id -u)" != 0 ] || chown postgres "$PG_DIR"
    run_as_postgres "$PG_BIN/initdb" -D "$PG_DIR/data" -A trust -U postgres -N >"$PG_DIR/initdb.log" 2>&1 \
        || { cat "$PG_DIR/initdb.log" >&2; return 1; }
    run_as_postgres "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -o "-k $PG_DIR -c listen_addresses=''" -l "$PG_DIR/log" \
        -w -t 30 start >/dev/null || { cat "$PG_DIR/log" >&2; return 1; }
    PG_CONNINFO="host=$PG_DIR user=postgres dbname=postgres connect_timeout=5"
}

# pg_stop: stops the cluster (fast) and removes its folder; safe to call twice or without a cluster.
pg_stop() {
    [ -n "$PG_DIR" ] || return 0
    if [ -f "$PG_DIR/data/postmaster.pid" ]; then
        if [ "$(id -u)" = 0 ]; then
            runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w -t 20 stop >/dev/null 2>&1 || true
        else
            "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w -t 20 stop >/dev/null 2>&1 || true
        fi
    fi
    rm -rf "$PG_DIR"
    PG_DIR=""
}
