#!/usr/bin/env bash
# Issue 24's floor on the wire, served by nginx: the two answers of accounts_http.sh (the spread account and its
# 67-renewal subscription), fetched from a receiptd serving the ledger, saved as files, then served by one nginx
# process (no master, sendfile off, no access log) and timed with wrk -t1 -c1. Like accounts_bytes_floor.py, with a
# server whose per-request cost is smaller. ONE_CORE=1 runs nginx and wrk on CPU 0.
#   LEDGER=DIR Benchmarks/scripts/accounts_bytes_floor_nginx.sh RECEIPTD_BINARY [SECONDS]
#   (needs nginx: apt-get install -y --no-install-recommends nginx; LEDGER from receipt-bench write-accounts)
set -euo pipefail
[ $# -ge 1 ] && [ -n "${LEDGER:-}" ] || { echo "usage: LEDGER=DIR $0 RECEIPTD_BINARY [SECONDS]" >&2; exit 2; }
command -v nginx >/dev/null || { echo "needs nginx (apt-get install -y --no-install-recommends nginx)" >&2; exit 2; }
seconds=${2:-3}
work=$(mktemp -d)
pids=()
trap 'for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pin=()
[ -n "${ONE_CORE:-}" ] && pin=(taskset -c 0)

port=$(free_port)
python3 - "$LEDGER/config.json" "$port" >"$work/serve.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config.update(host="127.0.0.1", port=int(sys.argv[2]))
print(json.dumps(config))
PY
"$1" serve --config "$work/serve.json" >/dev/null 2>"$work/server.log" &
pids+=($!)
mkdir -p "$work/www" "$work/tmp"
curl -s --retry 20 --retry-connrefused --retry-delay 0 -o /dev/null "http://127.0.0.1:$port/healthz"
curl -sf -o "$work/www/account" "http://127.0.0.1:$port/v1/accounts/spread"
curl -sf -o "$work/www/subscription" "http://127.0.0.1:$port/v1/subscriptions/1000000001"
kill -TERM "${pids[0]}"

port=$(free_port)
cat >"$work/nginx.conf" <<CONF
worker_processes 1;
daemon off;
master_process off;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 64; }
http {
  access_log off;
  sendfile off;
  output_buffers 1 512k;
  keepalive_requests 1000000;
  client_body_temp_path $work/tmp; proxy_temp_path $work/tmp; fastcgi_temp_path $work/tmp;
  uwsgi_temp_path $work/tmp; scgi_temp_path $work/tmp;
  server { listen 127.0.0.1:$port; root $work/www; default_type application/json; }
}
CONF
"${pin[@]}" nginx -c "$work/nginx.conf" -p "$work" &
pids+=($!)
curl -s --retry 20 --retry-connrefused --retry-delay 0 -o /dev/null "http://127.0.0.1:$port/subscription"
for answer in account subscription; do
    bytes=$(wc -c <"$work/www/$answer")
    rate=$("${pin[@]}" wrk -t1 -c1 -d"${seconds}s" "http://127.0.0.1:$port/$answer" | awk '/Requests\/sec/ {print $2}')
    echo "nginx, $answer ($bytes bytes): $rate/s (load $(cut -d' ' -f1 /proc/loadavg))"
done
