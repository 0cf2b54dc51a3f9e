#!/usr/bin/env bash
# Webhook delivery (issue 25): events/s a local receiver gets from one server, from the first event to the COUNT-th
# distinct one. The events come from COUNT distinct notifications posted by ingest.sh (one RENEWAL each), so delivery
# runs while ingest does: the figure is bounded by ingest's rate too, and the two are printed side by side. Needs a
# receiptd with the webhooks of issue 25; waits at most DELIVERY_WAIT seconds (120) for the last event.
#
#   Benchmarks/scripts/delivery.sh                     SQLite, 4,000 events
#   STORES=postgres COUNT=2000 Benchmarks/scripts/delivery.sh
set -euo pipefail
export DELIVERY_WAIT=${DELIVERY_WAIT:-120} STORES=${STORES:-sqlite}
exec "$(dirname "$0")/ingest.sh"
