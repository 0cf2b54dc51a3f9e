#!/usr/bin/env bash
# What PostgreSQL alone costs for the rows an ingested notification must leave (issue 25's 1,000/s): the floor under
# `ingest.sh`'s PostgreSQL figures. A throwaway cluster (Unix socket, as ../shared/TOOLS.md); receiptd stores COUNT
# forged notifications with one webhook (a receiver that never answers) so that the schema and the rows are the real
# ones; then pgbench, with no receiptd running, replays only the writes: per notification its row (the signed payload),
# its transaction, the transaction's source, the renewal info (replaced), the stream's number and the event (a stored
# body of median length), its delivery; GROUP notifications per transaction, as the writer groups them; then, per
# group, the deliveries' lease and their finish as two UPDATEs. No reads, no savepoints: what any design must write.
# Originals are drawn so that a group takes its row locks in one order (no deadlocks), 200 of them as in ingest.sh.
#
#   Benchmarks/scripts/postgres_floor.sh                   groups of 8, 4 and 8 clients, 10 s each
#   CLIENTS="4 8 16" GROUP=4 SECONDS_EACH=20 Benchmarks/scripts/postgres_floor.sh
#   RECEIPTD=/tmp/receiptd BENCH=/tmp/receipt-bench Benchmarks/scripts/postgres_floor.sh   (default: the release
#                                                         builds, built when absent)
#
# Prints per run notifications/s, PostgreSQL's CPU per 1,000 notifications (every process of the cluster, exited
# backends too) and the whole machine's (pgbench included: it stands in for receiptd's side of the connection).
set -euo pipefail

benchmarks=$(cd "$(dirname "$0")/.." && pwd)
root=$(dirname "$benchmarks")
count=${COUNT:-4000}
group=${GROUP:-8}
clients=${CLIENTS:-4 8}
seconds=${SECONDS_EACH:-10}

# The binaries given, or the release builds, made if absent (only the rows' shapes and sizes come from them).
RECEIPTD=${RECEIPTD:-$root/.build/release/receiptd}
BENCH=${BENCH:-$benchmarks/.build/release/receipt-bench}
[ -x "$RECEIPTD" ] || (cd "$root" && swift build -c release --product receiptd 2>&1 | tail -1)
[ -x "$BENCH" ] || (cd "$benchmarks" && swift build -c release 2>&1 | tail -1)
for tool in wrk pgbench; do
    command -v $tool >/dev/null || { echo "postgres_floor.sh needs $tool" >&2; exit 2; }
done

work=$(mktemp -d)
chmod 755 "$work"
pg=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
cluster=$work/pg
server=""
receiver=""
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
    for pid in $server $receiver; do kill "$pid" 2>/dev/null || true; done
    as_postgres "$pg/pg_ctl" -D "$cluster/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir "$cluster"
[ "$(id -u)" = 0 ] && chown postgres "$cluster"
as_postgres "$pg/initdb" -D "$cluster/data" -A trust -U postgres >/dev/null
as_postgres "$pg/pg_ctl" -D "$cluster/data" -o "-k $cluster -c listen_addresses=''" -l "$cluster/log" -w start \
    >/dev/null
as_postgres "$pg/createdb" -h "$cluster" -U postgres ledger
psql_ledger() { psql -qtA -h "$cluster" -U postgres -d ledger -c "$1"; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
"$BENCH" forge-notifications --count "$count" --out "$work/forged" >/dev/null
receiver_port=$(free_port)
port=$(free_port)
head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=' >"$work/webhook.secret"
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1024); time.sleep(86400)' "$receiver_port" &
receiver=$!
webhook="{\"name\": \"bench\", \"url\": \"http://127.0.0.1:$receiver_port/events\","
webhook+=" \"secret_file\": \"$work/webhook.secret\", \"allow_http\": true}"
printf '{"host": "127.0.0.1", "port": %s, "trusted_roots": ["%s"], "webhooks": [%s], "store": {"postgres": "%s"}}\n' \
    "$port" "$work/forged/jws-root.pem" "$webhook" "host=$cluster user=postgres dbname=ledger" >"$work/config.json"
"$RECEIPTD" serve --config "$work/config.json" >/dev/null 2>"$work/server.log" &
server=$!
for _ in $(seq 200); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.05; done
BODY_DIR=$work/forged/notifications wrk -t1 -c16 -d600s -s "$benchmarks/scripts/wrk_post_dir_count.lua" \
    "http://127.0.0.1:$port/v1/notifications" >/dev/null
kill -TERM "$server"; wait "$server" 2>/dev/null || true; server=""

# The values pgbench binds, taken from what receiptd stored.
psql_ledger "SELECT signed_payload FROM notifications LIMIT 1" >"$work/payload"
psql_ledger "SELECT payload_json FROM transactions LIMIT 1" >"$work/transaction"
psql_ledger "SELECT payload_json FROM renewal_infos LIMIT 1" >"$work/renewal"
psql_ledger "SELECT body FROM events ORDER BY length(body) OFFSET (SELECT count(*) / 2 FROM events) LIMIT 1" \
    >"$work/body"
echo "== $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); the ledger holds" \
    "$(psql_ledger "SELECT count(*) FROM events") events; bound: payload $(wc -c <"$work/payload") B," \
    "event body $(wc -c <"$work/body") B"

# pgbench turns `:name` into a parameter even inside a literal, so no literal holds a colon before a letter.
python3 - "$group" >"$work/floor.sql" <<'EOF'
import sys
group = int(sys.argv[1])
lines = []
for i in range(1, group + 1):
    lines.append(f"\\set n{i} random(1, 1000000000000)")
    lines.append(f"\\set o{i} random({(i - 1) * 200 // group + 1}, {i * 200 // group})")
lines.append("BEGIN;")
for i in range(1, group + 1):
    n, o = f"CAST(:n{i} AS text)", f"CAST(:o{i} AS text)"
    lines += [
        f"""INSERT INTO notifications (uuid, type, subtype, signed_date, environment, bundle_id, signed_payload,
    transaction_id, original_transaction_id, app_transaction_json, received_at)
    VALUES ('u' || {n}, 'DID_RENEW', NULL, 1795857541430, 'Production', 'com.example.bench', :payload,
    't' || {n}, {o}, NULL, 1795857613279);""",
        f"""INSERT INTO transactions (transaction_id, original_transaction_id, product_id, bundle_id, type,
    purchase_date, original_purchase_date, expires_date, revocation_date, revocation_reason, in_app_ownership_type,
    web_order_line_item_id, environment, signed_date, payload_json, first_seen, updated_at, source,
    notification_uuid, is_upgraded, app_account_token)
    VALUES ('t' || {n}, {o}, 'pro.monthly', 'com.example.bench', 'Auto-Renewable Subscription', 1795857481430,
    1795857481430, 1798449541430, NULL, NULL, 'PURCHASED', 'w' || {n}, 'Production', 1795857541430, :transaction,
    1795857613279, 1795857613279, 'notification', 'u' || {n}, NULL, NULL);""",
        f"""INSERT INTO transaction_sources (transaction_id, source, first_seen)
    VALUES ('t' || {n}, 'notification', 1795857613279);""",
        f"""INSERT INTO renewal_infos (original_transaction_id, product_id, auto_renew_product_id, auto_renew_status,
    expiration_intent, is_in_billing_retry_period, grace_period_expires_date, environment, signed_date, payload_json,
    source, updated_at, price_increase_status, notification_uuid)
    VALUES ({o}, 'pro.monthly', 'pro.monthly', 1, NULL, NULL, NULL, 'Production', :n{i}, :renewal, 'notification',
    1795857613343, NULL, 'u' || {n})
    ON CONFLICT (original_transaction_id) DO UPDATE SET signed_date = excluded.signed_date,
    payload_json = excluded.payload_json, updated_at = excluded.updated_at,
    notification_uuid = excluded.notification_uuid;""",
        f"""WITH numbered AS (
    INSERT INTO event_streams (stream, last_sequence) VALUES ('otx' || chr(58) || {o}, 1)
    ON CONFLICT (stream) DO UPDATE SET last_sequence = event_streams.last_sequence + 1 RETURNING last_sequence)
    INSERT INTO events (event_id, dedupe_key, type, account, original_transaction_id, stream, sequence, created_at,
    body)
    SELECT 'evt_' || {n}, 'RENEWAL' || chr(58) || 't' || {n}, 'RENEWAL', NULL, {o}, 'otx' || chr(58) || {o},
    last_sequence, 1795857613279, CAST(:body AS text) FROM numbered;""",
        f"""INSERT INTO event_deliveries (event_id, webhook, stream, sequence, state, attempts, next_attempt_at)
    VALUES ('evt_' || {n}, 'bench', 'otx' || chr(58) || {o}, :n{i}, 'pending', 0, 1795857613279);""",
    ]
lines.append("COMMIT;")
ids = ", ".join(f"'evt_' || CAST(:n{i} AS text)" for i in range(1, group + 1))
lines += [
    f"""UPDATE event_deliveries SET lease_holder = 'bench', lease_until = 1795857673279
    WHERE webhook = 'bench' AND event_id IN ({ids});""",
    f"""UPDATE event_deliveries SET state = 'delivered', attempts = attempts + 1, delivered_at = 1795857613300,
    last_status = 200, lease_holder = NULL, lease_until = NULL WHERE webhook = 'bench' AND event_id IN ({ids});""",
]
print("\n".join(lines))
EOF

postmaster=$(head -1 "$cluster/data/postmaster.pid")
ticks=$(getconf CLK_TCK)
# The cluster's CPU in ms: the postmaster, what it reaped (exited backends), and its live children.
cluster_ms() {
    local total pid
    total=$(sed 's/.*) //' "/proc/$postmaster/stat" | awk '{print $12 + $13 + $14 + $15}')
    for pid in $(pgrep -P "$postmaster"); do
        [ -r "/proc/$pid/stat" ] && total=$((total + $(sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}')))
    done
    echo $((total * 1000 / ticks))
}
machine_ms() { awk -v t="$ticks" '/^cpu /{print int(($2 + $3 + $4 + $7 + $8 + $9) * 1000 / t)}' /proc/stat; }

for clients_now in $clients; do
    cluster_before=$(cluster_ms)
    machine_before=$(machine_ms)
    output=$(pgbench -h "$cluster" -U postgres -n -M prepared --max-tries 10 -c "$clients_now" -j 1 -T "$seconds" \
        -f "$work/floor.sql" -D payload="$(cat "$work/payload")" -D transaction="$(cat "$work/transaction")" \
        -D renewal="$(cat "$work/renewal")" -D body="$(cat "$work/body")" ledger 2>&1) || {
        echo "$output" >&2
        exit 1
    }
    cluster_used=$(($(cluster_ms) - cluster_before))
    machine_used=$(($(machine_ms) - machine_before))
    groups=$(echo "$output" | awk '/number of transactions actually processed/ {split($NF, a, "/"); print a[1]}')
    failed=$(echo "$output" | awk '/number of failed transactions/ {print $5}')
    notifications=$((groups * group))
    python3 -c "
n, s = $notifications, $seconds
print(f'{$clients_now} clients, groups of $group: {n / s:,.0f} notifications/s; CPU per 1,000 notifications: '
      f'PostgreSQL {$cluster_used * 1000 / n:,.0f} ms, the machine {$machine_used * 1000 / n:,.0f} ms'
      f' ({$failed} groups failed)')"
done
