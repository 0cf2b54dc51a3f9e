#!/usr/bin/env bash
# Webhooks (issue 25) through two replicas sharing one PostgreSQL: a rehearsal of the acceptance run's replica half
# (test-webhooks.sh covers one server on SQLite). 1,360 forged notifications for 150 accounts (two originals each,
# four notifications an original) and 40 originals nobody owns, one in 25 sent twice, are posted from 8 threads over
# 45 s, split between replicas A and B; a post answered anything but 200 is sent to the other replica, as Apple
# retries. Two webhooks: audit's receiver always answers 200 (and must go on getting events while backend's hangs);
# backend's answers 200, then 500, hangs, resets connections, is gone and comes back. A is `kill -9`ed while backend's
# receiver hangs on one of its deliveries, B while the receiver answers one of its deliveries 200, each restarted on
# its port; a second round kills A again and leaves it down, so B alone takes over its claims. Once the outbox has
# drained (bounded; no replay), checks for each webhook every signature; that every event of the outbox arrived with
# a 2xx; that no stream's sequence went backwards in the order the receiver first accepted its events; that nothing
# arrived outside the outbox or for a transaction the ledger does not hold; that every notification answered 200 is
# stored, with exactly one purchase event, and each account has one ENTITLEMENTS_CHANGED.
# DRILL_ACCOUNTS, DRILL_UNOWNED, DRILL_PER_ORIGINAL and DRILL_POST_SECONDS scale it (400, 100, 4, 60: 3,600
# notifications in about 90 s). Skips when PostgreSQL is absent and RECEIPTD_SKIP_POSTGRES=1. KEEP_WORK=1 keeps the
# receivers' logs, the replicas' logs, the outbox listing and the posts' answers.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib.sh"
. "$HERE/ledger-lib.sh"
NAME=test-webhooks-replicas
fail() { echo "$NAME: FAIL: $*" >&2; exit 1; }
command -v jq >/dev/null || fail "jq is required (scripts/install-deps installs it)"
# ss tells which replica holds a connection the receiver is hanging on: the kills must land mid-delivery.
command -v ss >/dev/null || fail "ss is required (apt-get install iproute2)"
if ! pg_available; then
    [ "${RECEIPTD_SKIP_POSTGRES:-0}" = 1 ] || fail "PostgreSQL server binaries not found (apt install postgresql)"
    skip_line "two replicas on PostgreSQL: RECEIPTD_SKIP_POSTGRES=1"
    exit 0
fi

ACCOUNTS="${DRILL_ACCOUNTS:-150}"
UNOWNED="${DRILL_UNOWNED:-40}"
PER_ORIGINAL="${DRILL_PER_ORIGINAL:-4}"
POST_SECONDS="${DRILL_POST_SECONDS:-45}"

WORK="$(mktemp -d)"
backend_RECEIVER="" audit_RECEIVER="" POSTER_PID="" A_PID="" B_PID=""
cleanup() {
    local status=$?
    set +e
    for pid in "$POSTER_PID" "$A_PID" "$B_PID" "$backend_RECEIVER" "$audit_RECEIVER"; do
        [ -z "$pid" ] || { kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
    done
    pg_stop
    if [ -n "${KEEP_WORK:-}" ]; then
        echo "kept $WORK" >&2
    else
        [ "$status" = 0 ] || echo "$NAME: KEEP_WORK=1 keeps the logs and listings" >&2
        rm -rf "$WORK"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
have_notification_forge || fail "receiptd testing notification is missing"
started=$SECONDS

# The forge re-signs receiptd's own template for each notification: `receiptd testing notification` takes a third of
# a second a call, too slow for a thousand on two cores.
PYTHON=python3
if ! python3 -c 'import cryptography' 2>/dev/null; then
    . "$HERE/python-env.sh"
    e2e_python_venv "$WORK/venv" cryptography==50.0.2 || fail "no Python cryptography package to forge with"
    PYTHON="$E2E_PYTHON"
fi


# --- the forge: the plan of notifications, each signed like receiptd's template -------------------------------------
cat >"$WORK/forge.py" <<'PY'
"""forge.py TEMPLATE KEY OUT ACCOUNTS UNOWNED PER_ORIGINAL: writes OUT/notes/N.json (Apple's body), OUT/plan.jsonl
(the posting order: file, uuid, transaction, original, account, target replica 0 or 1) and OUT/accounts.txt
(account and appAccountToken). Each account has two originals; each original an INITIAL_BUY then renewals; UNOWNED
originals carry no token. Posting order mixes originals and lets a renewal come before its original now and then;
one notification in 25 is posted a second time, to the other replica, later."""
import base64, json, os, random, sys, uuid
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

template_path, key_path, out = sys.argv[1:4]
accounts, unowned, per_original = map(int, sys.argv[4:7])
random.seed(25)

def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

def unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))

with open(key_path, "rb") as file:
    key = serialization.load_pem_private_key(file.read(), None)
with open(template_path) as file:
    header, payload, _ = file.read().strip().split(".")
template = json.loads(unb64(payload))
transaction_template = json.loads(unb64(template["data"]["signedTransactionInfo"].split(".")[1]))
renewal_template = json.loads(unb64(template["data"]["signedRenewalInfo"].split(".")[1]))

def sign(claims):
    signing_input = header + "." + b64(json.dumps(claims, separators=(",", ":")).encode())
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return signing_input + "." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))

DAY = 86_400_000
START = 1_767_225_600_000  # 2026-01-01
originals = []
for a in range(accounts):
    account = f"acct-{a:03d}"
    for k in range(2):
        originals.append((str(7_100_000_000_000_000 + (2 * a + k) * 100), account))
for u in range(unowned):
    originals.append((str(7_900_000_000_000_000 + u * 100), None))

os.makedirs(out + "/notes", exist_ok=True)
entries = []
for original, account in originals:
    token = str(uuid.uuid5(uuid.NAMESPACE_URL, account)) if account else None
    for n in range(per_original):
        transaction_id = str(int(original) + n)
        purchased = START + n * 30 * DAY
        transaction = dict(transaction_template, transactionId=transaction_id, originalTransactionId=original,
                           webOrderLineItemId=str(int(transaction_id) + 1), purchaseDate=purchased,
                           originalPurchaseDate=START, signedDate=purchased,
                           transactionReason="PURCHASE" if n == 0 else "RENEWAL")
        transaction.pop("appAccountToken", None)
        if token:
            transaction["appAccountToken"] = token
        renewal = dict(renewal_template, originalTransactionId=original, signedDate=purchased,
                       recentSubscriptionStartDate=START)
        note_uuid = str(uuid.UUID(int=random.getrandbits(128), version=4))
        claims = dict(template, notificationType="SUBSCRIBED" if n == 0 else "DID_RENEW",
                      notificationUUID=note_uuid, signedDate=purchased)
        claims.pop("subtype", None)
        if n == 0:
            claims["subtype"] = "INITIAL_BUY"
        claims["data"] = dict(template["data"], signedTransactionInfo=sign(transaction),
                              signedRenewalInfo=sign(renewal))
        path = f"{out}/notes/{transaction_id}.json"
        with open(path, "w") as file:
            json.dump({"signedPayload": sign(claims)}, file)
        entries.append({"file": path, "uuid": note_uuid, "transaction": transaction_id, "original": original,
                        "account": account, "order": n + random.uniform(0, 1.5), "target": random.randrange(2)})
entries.sort(key=lambda entry: entry["order"])
for index in range(0, len(entries), 25):
    again = dict(entries[index], target=1 - entries[index]["target"])
    entries.insert(min(len(entries), index + 40), again)
with open(out + "/plan.jsonl", "w") as file:
    for entry in entries:
        file.write(json.dumps(entry) + "\n")
with open(out + "/accounts.txt", "w") as file:
    for a in range(accounts):
        file.write(f"acct-{a:03d} {uuid.uuid5(uuid.NAMESPACE_URL, f'acct-{a:03d}')}\n")
PY

# --- the poster: Apple, retrying a notification on the other replica until it gets a 200 ----------------------------
cat >"$WORK/post.py" <<'PY'
"""post.py PLAN RESULTS SECONDS URL_A URL_B: posts every planned notification from 8 threads, the n-th not before
n * SECONDS / count after the start, to its target replica; an answer other than 200 (a refused or reset connection,
a 503) is retried on the other replica, then back, every 0.2 s for at most 90 s. RESULTS gets one line each: the
uuid, every answer seen, and the last one."""
import http.client, json, queue, sys, threading, time

plan_path, results_path, seconds, *urls = sys.argv[1:]
seconds = float(seconds)
with open(plan_path) as file:
    plan = [json.loads(line) for line in file]
begin = time.time()
work = queue.Queue()
for index, entry in enumerate(plan):
    work.put((index, entry))
lock = threading.Lock()
results = open(results_path, "w")

def post(url, body):
    host, port = url.split("//")[1].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("POST", "/v1/notifications", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = response.read()
        if response.status == 200:
            return f"200 {str(json.loads(answer).get('duplicate')).lower()}"
        return str(response.status)
    except ValueError:
        return f"200 unreadable: {answer[:80]!r}"
    except (OSError, http.client.HTTPException) as error:
        return "error " + type(error).__name__
    finally:
        connection.close()

def worker():
    while True:
        try:
            index, entry = work.get_nowait()
        except queue.Empty:
            return
        delay = begin + index * seconds / len(plan) - time.time()
        if delay > 0:
            time.sleep(delay)
        with open(entry["file"], "rb") as file:
            body = file.read()
        target, answers, deadline = entry["target"], [], time.time() + 90
        while True:
            answers.append(f"{'AB'[target]} {post(urls[target], body)}")
            if answers[-1].split()[1] == "200" or time.time() > deadline:
                break
            target = 1 - target
            time.sleep(0.2)
        with lock:
            results.write(json.dumps({"uuid": entry["uuid"], "transaction": entry["transaction"],
                                      "answers": answers, "last": answers[-1]}) + "\n")
            results.flush()

threads = [threading.Thread(target=worker) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
PY

# --- the checks -----------------------------------------------------------------------------------------------------
cat >"$WORK/check.py" <<'PY'
"""check.py WEBHOOK LOG OUTBOX PLAN RESULTS SECRET URL: what WEBHOOK's receiver recorded, against the outbox, the plan
and the ledger. Prints one line saying what passed; for a failed check, its problems (at most 10), and exits 1."""
import base64, collections, hashlib, hmac, json, sys, urllib.error, urllib.request
from concurrent.futures import ThreadPoolExecutor

webhook, log_path, outbox_path, plan_path, results_path, secret_path, url = sys.argv[1:]
with open(log_path) as file:
    records = [json.loads(line) for line in file if line.strip()]
with open(outbox_path) as file:
    outbox = {}
    for event in json.load(file):
        event["deliveries"] = [d for d in event["deliveries"] if d["webhook"] == webhook]
        if event["deliveries"]:
            outbox[event["id"]] = event
with open(plan_path) as file:
    plan = {}
    for line in file:
        entry = json.loads(line)
        plan[entry["uuid"]] = entry
with open(results_path) as file:
    results = [json.loads(line) for line in file]
with open(secret_path, "rb") as file:
    secret = file.read().strip()
failures, passes = 0, []

def report(check, problems, passed):
    global failures
    if problems:
        failures += 1
        print(f"FAIL {webhook}: {check}: {len(problems)} problem(s)")
        for problem in problems[:10]:
            print("    " + problem)
    else:
        passes.append(passed)

def stream(event):
    return event["account"] if event.get("account") is not None else "otx:" + event["original_transaction_id"]

accepted = [r for r in records if r["status"] == 200]
bodies = {}
problems = []
for r in records:
    raw = base64.b64decode(r["body"])
    payload = json.loads(raw)
    bodies.setdefault(payload["id"], payload)
    fields = dict(part.strip().partition("=")[::2] for part in (r["signature"] or "").split(","))
    expected = hmac.new(secret, fields.get("t", "").encode() + b"." + raw, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, fields.get("v1", "")):
        problems.append(f"{payload['id']} at {r['at']:.3f}: signature {r['signature']!r} does not verify")
    elif abs(int(fields["t"]) - r["at"]) > 60:
        problems.append(f"{payload['id']}: signed at t={fields['t']}, arrived at {r['at']:.0f}")
    if r["event_id"] != payload["id"]:
        problems.append(f"Receiptd-Event-Id {r['event_id']} on a body whose id is {payload['id']}")
report("signatures", problems, f"{len(records)} POSTs ({len(accepted)} answered 200) signed")

delivered = {json.loads(base64.b64decode(r["body"]))["id"] for r in accepted}
problems = [f"{i} ({e['type']}, stream {stream(e)}, sequence {e['sequence']}): never answered 2xx; deliveries "
            f"{e['deliveries']}" for i, e in outbox.items() if i not in delivered]
problems += [f"{i}: received with a 2xx but the outbox says {e['deliveries']}" for i, e in outbox.items()
             if i in delivered and any(d["state"] != "delivered" for d in e["deliveries"])]
report("complete", problems, f"{len(outbox)} events of the outbox all received")

problems = [f"{i} ({p['type']}, transaction {p['transaction']['transaction_id']}) arrived but is not in the outbox"
            for i, p in bodies.items() if i not in outbox]
report("unknown events", problems, "none from outside it")

# Order: per stream, the events in the order the receiver first accepted each; a later first acceptance with a lower
# sequence is disorder (a duplicate of an accepted event is at-least-once, not disorder).
problems, highest, first, streams = [], {}, set(), set()
for r in accepted:
    payload = json.loads(base64.b64decode(r["body"]))
    if payload["id"] in first:
        continue
    first.add(payload["id"])
    key = stream(payload)
    streams.add(key)
    if key in highest and payload["sequence"] <= highest[key][0]:
        problems.append(f"stream {key}: {payload['id']} ({payload['type']}, sequence {payload['sequence']}) accepted "
                        f"at {r['at']:.3f} after {highest[key][1]} (sequence {highest[key][0]})")
    if key not in highest or payload["sequence"] > highest[key][0]:
        highest[key] = (payload["sequence"], payload["id"])
by_stream = collections.defaultdict(list)
for event in outbox.values():
    by_stream[stream(event)].append(event)
for key, events in by_stream.items():
    sequences = [e["sequence"] for e in events]
    if len(set(sequences)) != len(sequences):
        twice = sorted(s for s, n in collections.Counter(sequences).items() if n > 1)
        problems.append(f"stream {key}: the outbox gives sequences {twice} to more than one event")
report("order", problems, f"{len(streams)} streams in order")

# The ledger: each transaction an event arrived for is stored; each notification answered 200 is stored, and its
# transaction has exactly one purchase event of its kind, on its account's stream, however often it was sent.
def lookup(transaction):
    try:
        with urllib.request.urlopen(f"{url}/v1/transactions/{transaction}", timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError as error:
        return type(error).__name__

acknowledged = {r["uuid"] for r in results if r["last"].split()[1] == "200"}
problems = [f"notification {u} (transaction {r['transaction']}) never got a 200: {r['answers']}" for r in results
            for u in [r["uuid"]] if u not in acknowledged]
transactions = {p["transaction"]["transaction_id"] for p in bodies.values()} | {plan[u]["transaction"]
                                                                                for u in acknowledged}
with ThreadPoolExecutor(8) as pool:
    stored = dict(zip(sorted(transactions), pool.map(lookup, sorted(transactions))))
problems += [f"event {i} ({p['type']}) arrived for transaction {p['transaction']['transaction_id']}, which "
             f"GET /v1/transactions answers {stored[p['transaction']['transaction_id']]}"
             for i, p in bodies.items() if stored[p["transaction"]["transaction_id"]] != 200]
purchases = collections.defaultdict(list)
for i, p in bodies.items():
    if p["type"] in ("INITIAL_PURCHASE", "RENEWAL"):
        purchases[p["transaction"]["transaction_id"]].append(p)
for u in sorted(acknowledged):
    entry = plan[u]
    events = purchases.get(entry["transaction"], [])
    answers = [r["answers"] for r in results if r["uuid"] == u]
    if stored.get(entry["transaction"]) != 200:
        problems.append(f"notification {u} answered {answers} but transaction {entry['transaction']} is not stored: "
                        f"GET /v1/transactions answers {stored.get(entry['transaction'])}")
    elif len(events) != 1:
        problems.append(f"transaction {entry['transaction']} (notification {u}, answered {answers}) has "
                        f"{len(events)} purchase events: {[(e['id'], e['type']) for e in events]}")
    elif events[0]["account"] != entry["account"]:
        problems.append(f"{events[0]['id']} for transaction {entry['transaction']}: account "
                        f"{events[0]['account']}, expected {entry['account']}")
    elif events[0]["type"] != ("INITIAL_PURCHASE" if entry["transaction"] == entry["original"] else "RENEWAL"):
        problems.append(f"{events[0]['id']} for transaction {entry['transaction']} of {entry['original']} is "
                        f"{events[0]['type']}")
# Every transaction of every account lasts until 2099, so each account's names change once, from none to "pro",
# whichever of its two originals, sent to whichever replica, is stored first: one ENTITLEMENTS_CHANGED each.
changes = collections.defaultdict(list)
for i, p in bodies.items():
    if p["type"] == "ENTITLEMENTS_CHANGED":
        changes[p["account"]].append(p)
for account in sorted({plan[u]["account"] for u in acknowledged} - {None} | set(changes), key=str):
    seen = [(p["id"], p.get("entitlements_before"), p["entitlements"]) for p in changes.get(account, [])]
    if account is None or len(seen) != 1 or seen[0][1:] != ([], ["pro"]):
        problems.append(f"account {account}: ENTITLEMENTS_CHANGED events {seen}, expected one from [] to ['pro']")
report("ledger", problems, f"{len(acknowledged)} notifications stored, one purchase event each, "
       f"{len(transactions)} transactions in the ledger, one ENTITLEMENTS_CHANGED for each of {len(changes)} accounts")
print(f"{webhook}: " + "; ".join(passes))
sys.exit(1 if failures else 0)
PY

# --- the world: PostgreSQL, two replicas, two receivers ------------------------------------------------------------
pg_start || fail "could not start PostgreSQL"
WORLD="$WORK/world"
make_ledger_world "$WORLD" "$(jq -cn --arg c "$PG_CONNINFO" '{postgres: $c}')"
# Two webhooks: backend, whose receiver misbehaves, and audit, whose receiver always answers 200 and must not wait
# on backend's.
# start_receiver NAME [PORT]: its log WORK/NAME.jsonl, mode file WORK/NAME.mode, held ports WORK/NAME.open; sets
# NAME_PORT and NAME_RECEIVER (its pid).
start_receiver() {
    local name="$1" port="${2:-0}"
    [ -s "$WORLD/$name-secret" ] || "$RECEIPTD" webhooks secret new >"$WORLD/$name-secret"
    [ -s "$WORK/$name.mode" ] || echo ok >"$WORK/$name.mode"
    rm -f "$WORK/$name.port"
    python3 "$HERE/webhook_receiver.py" "$WORK/$name.jsonl" "$WORK/$name.mode" "$WORK/$name.port" "$WORK/$name.open" \
        "$port" 2>>"$WORK/$name.err" &
    eval "${name}_RECEIVER=$!"
    for _ in $(seq 1 100); do [ -s "$WORK/$name.port" ] && break; sleep 0.1; done
    [ -s "$WORK/$name.port" ] || fail "the $name receiver did not start: $(cat "$WORK/$name.err")"
    eval "${name}_PORT=$(cat "$WORK/$name.port")"
}
start_receiver backend
start_receiver audit
LOG="$WORK/backend.jsonl" MODE="$WORK/backend.mode" OPEN="$WORK/backend.open"
jq --arg backend "http://127.0.0.1:$backend_PORT/hooks" --arg audit "http://127.0.0.1:$audit_PORT/hooks" '
    .apps[0].entitlements = {"pro": ["pro.monthly"]}
    | .webhooks = [{"name": "backend", "url": $backend, "secret_file": "backend-secret", "events": ["*"],
                    "allow_http": true, "timeout": 2},
                   {"name": "audit", "url": $audit, "secret_file": "audit-secret", "allow_http": true, "timeout": 2}]
    ' "$WORLD/receiptd.json" >"$WORLD/receiptd.json.new"
mv "$WORLD/receiptd.json.new" "$WORLD/receiptd.json"
CONFIG="$WORLD/receiptd.json"

# Fixed ports, so that a replica restarted after kill -9 is where the poster already sends.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
A_PORT="$(free_port)" B_PORT="$(free_port)"
A_URL="http://127.0.0.1:$A_PORT" B_URL="http://127.0.0.1:$B_PORT"
# start_replica A|B: starts it on its port (its log appended to WORK/A.log or B.log) and waits until it answers.
start_replica() {
    local name="$1" port pid
    port="$(eval echo "\$${name}_PORT")"
    echo "--- test: start at $((SECONDS - started)) s" >>"$WORK/$name.log"
    "$RECEIPTD" serve --config "$CONFIG" --port "$port" >>"$WORK/$name.log" 2>&1 &
    pid=$!
    eval "${name}_PID=$pid"
    for _ in $(seq 1 100); do
        curl -fsS --max-time 2 "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || fail "replica $name exited at start: $(tail -n 5 "$WORK/$name.log")"
        sleep 0.1
    done
    fail "replica $name did not answer /healthz within 10 s"
}
kill_replica() {
    local name="$1" pid
    pid="$(eval echo "\$${name}_PID")"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    eval "${name}_PID=''"
    echo "--- test: kill -9 at $((SECONDS - started)) s" >>"$WORK/$name.log"
}
# mid_delivery A|B: whether the replica has a connection open to a request the receiver is holding.
mid_delivery() {
    local pid port
    pid="$(eval echo "\$${1}_PID")"
    while read -r port; do
        ss -tnpH state established "( sport = :$port )" 2>/dev/null | grep -q "pid=$pid," && return 0
    done <"$OPEN"
    return 1
}
# accepted [NAME]: how many POSTs NAME's receiver (backend) answered 200.
accepted() { grep -c '"status": 200' "$WORK/${1:-backend}.jsonl" 2>/dev/null || true; }
more_accepted_than() { [ "$(accepted "${2:-backend}")" -gt "$1" ]; }
note() { echo "$((SECONDS - started)) s: $*" >>"$WORK/timeline"; }
set_mode() { echo "$1" >"$MODE"; note "receiver $1"; }

start_replica A
start_replica B
grep -q 'store=postgres' "$WORK/A.log" || fail "replica A is not on PostgreSQL: $(head -n 1 "$WORK/A.log")"

"$RECEIPTD" testing notification --ca "$WORLD/ca" --type DID_RENEW --bundle-id com.example.app \
    --environment Sandbox --transaction-id 2 --original-transaction-id 1 --product-id pro.monthly \
    --purchased 2026-01-01T00:00:00Z --expires 2099-01-01T00:00:00Z --signed 2026-01-01T00:00:00Z \
    --transaction-members '{"appAccountToken": "00000000-0000-4000-8000-000000000000"}' --out "$WORK/template.jws"
"$PYTHON" "$WORK/forge.py" "$WORK/template.jws" "$WORLD/ca/jws-signing.key.pem" "$WORK" \
    "$ACCOUNTS" "$UNOWNED" "$PER_ORIGINAL" || fail "forging the notifications"
NOTES="$(ls "$WORK/notes" | wc -l)"
register() {
    curl -sS --max-time 10 -o /dev/null -w "%{http_code} $1\n" -X PUT "$A_URL/v1/accounts/$1/app_account_tokens/$2"
}
export -f register
export A_URL
xargs -P 4 -n 2 bash -c 'register "$0" "$1"' <"$WORK/accounts.txt" >"$WORK/registered"
bad="$(grep -vc '^200 ' "$WORK/registered" || true)"
[ "$bad" = 0 ] || fail "registering accounts' tokens: $(grep -v '^200 ' "$WORK/registered" | head -n 3)"
echo "$NOTES notifications for $ACCOUNTS accounts and $UNOWNED unowned originals forged in $((SECONDS - started)) s"

# --- the run: posting while the receiver misbehaves and the replicas die --------------------------------------------
# Two cycles of backend's receiver. While posting: ok, 500, hang (kill -9 A holding one), reset (A restarted), gone
# (connections refused), back on its port, slow (kill -9 B while the receiver answers it 200, so that an accepted
# delivery goes unrecorded), ok (B restarted). With a third of the posts left: 500, hang (kill -9 A holding one),
# reset, ok, and A stays down until the outbox drains, so that B alone takes over A's claims after their lease.
: >"$WORK/timeline"
posted() { [ "$(wc -l <"$WORK/results.jsonl")" -ge "$1" ]; }
python3 "$WORK/post.py" "$WORK/plan.jsonl" "$WORK/results.jsonl" "$POST_SECONDS" "$A_URL" "$B_URL" \
    2>"$WORK/post.err" &
POSTER_PID=$!
note "posting starts"
sleep 4
set_mode 500
sleep 4
set_mode hang
wait_until 20 "replica A holding a delivery the receiver hangs on" mid_delivery A
audit_before="$(accepted audit)"
wait_until 10 "audit's receiver getting events while backend's hangs" more_accepted_than $((audit_before + 10)) audit
kill_replica A
note "kill -9 A mid-delivery"
sleep 2
set_mode reset
sleep 3
start_replica A
note "A restarted"
kill "$backend_RECEIVER"
wait "$backend_RECEIVER" 2>/dev/null || true
note "receiver stopped: connections refused"
sleep 3
set_mode ok
start_receiver backend "$backend_PORT"
note "receiver back on its port"
before="$(accepted)"
wait_until 30 "deliveries resuming after the receiver came back" more_accepted_than $((before + 30))
set_mode slow
wait_until 20 "replica B holding a delivery the receiver is answering" mid_delivery B
kill_replica B
note "kill -9 B while the receiver answered its delivery 200"
set_mode ok
sleep 2
start_replica B
note "B restarted"
PLANNED="$(wc -l <"$WORK/plan.jsonl")"
wait_until $((POST_SECONDS + 60)) "two thirds of the notifications posted" posted $((PLANNED * 2 / 3))
set_mode 500
sleep 4
set_mode hang
wait_until 30 "replica A holding a delivery the receiver hangs on (second cycle)" mid_delivery A
kill_replica A
note "kill -9 A mid-delivery; it stays down"
sleep 2
set_mode reset
sleep 3
set_mode ok
deadline=$((SECONDS + POST_SECONDS + 120))
while kill -0 "$POSTER_PID" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || fail "the poster did not finish within $((POST_SECONDS + 120)) s"
    sleep 0.5
done
wait "$POSTER_PID" || fail "the poster failed: $(tail -n 5 "$WORK/post.err")"
POSTER_PID=""
note "every notification posted"

# Retries back off from 10 s and a killed replica's claims wait out their lease (timeout + 5 s): a minute or two.
nothing_pending() {
    "$RECEIPTD" webhooks list --status pending --json --limit 5 --config "$CONFIG" >"$WORK/pending.json" \
        && [ "$(jq length "$WORK/pending.json")" = 0 ]
}
drain_started=$SECONDS
until nothing_pending; do
    if [ $((SECONDS - drain_started)) -ge 150 ]; then
        "$RECEIPTD" webhooks list --status pending --json --limit 1000000 --config "$CONFIG" >"$WORK/pending.json"
        cat "$WORK/timeline" >&2
        fail "$(jq length "$WORK/pending.json") events still pending 150 s after the last post, e.g." \
            "$(jq -c '.[:3][] | {id, type, account, original_transaction_id, sequence, deliveries}' \
                "$WORK/pending.json")"
    fi
    sleep 1
done
note "the outbox drained in $((SECONDS - drain_started)) s, B alone"
start_replica A
note "A restarted"
"$RECEIPTD" webhooks list --json --limit 1000000 --config "$CONFIG" >"$WORK/outbox.json"

status=0
for webhook in backend audit; do
    python3 "$WORK/check.py" "$webhook" "$WORK/$webhook.jsonl" "$WORK/outbox.json" "$WORK/plan.jsonl" \
        "$WORK/results.jsonl" "$WORLD/$webhook-secret" "$A_URL" >>"$WORK/check.out" || status=1
done
[ "$status" = 0 ] || { cat "$WORK/timeline" "$WORK/check.out" >&2; fail "checks"; }
count="$(timeout 30 "$RECEIPTD" store status --config "$CONFIG" --json | jq .counts.notifications)"
distinct="$(jq -r .uuid "$WORK/plan.jsonl" | sort -u | wc -l)"
[ "$count" = "$distinct" ] || fail "$distinct distinct notifications acknowledged; the ledger counts $count"
for name in A B; do
    port="$(eval echo "\$${name}_PORT")"
    [ "$(curl -s -o /dev/null --max-time 5 -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ] \
        || fail "replica $name is not ready at the end"
done
for name in A B; do
    RECEIPTD_PID="$(eval echo "\$${name}_PID")" SERVER_LOG="$WORK/$name.json.log"
    cp "$WORK/$name.log" "$SERVER_LOG"
    stop_server || fail "replica $name did not stop cleanly: $(tail -n 5 "$WORK/$name.log")"
    eval "${name}_PID=''"
done
cat "$WORK/check.out"
retried="$(jq -r 'select((.answers | length) > 1) | .uuid' "$WORK/results.jsonl" | wc -l)"
# Read once the replicas' backends are gone: each reports its statistics as it exits.
deadlocks="$(timeout 10 "$PG_BIN/psql" "$PG_CONNINFO" -tAc "SELECT sum(deadlocks) FROM pg_stat_database" || echo "?")"
echo "ok: $NOTES notifications ($retried re-sent to the other replica), $(jq length "$WORK/outbox.json") events," \
    "$deadlocks deadlocks PostgreSQL broke, $((SECONDS - started)) s"
