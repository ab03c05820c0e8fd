#!/usr/bin/env bash
# make bench-limiter: drives the limiter's gRPC Check with weirload and
# reports decisions/s, p50/p99 latency and the limiter's CPU per decision.
# The last two scenarios repeat the half-rate run against a limiter that
# keeps its state in memory — the same gRPC path without Redis — and then
# call its gRPC health service at that rate: no decision at all. They are
# the latency floors the Redis-backed figures should be read against.
# Method: redis-server and the limiter share CPU 0, the load client runs on
# CPU 1 (taskset), everything on loopback. Each run is bounded in time.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
CONC=${CONC:-50}
. scripts/bench-common.sh

start_redis
start_limiter limiter --redis "127.0.0.1:$rport"

machine_line
echo "closed loop, concurrency $CONC, $DURATION per run; paced runs: calls due at an even rate, at most $CONC in flight, latency from when each was due"
load() { "${pin_load[@]}" "$work/weirload" --target "127.0.0.1:$gport" --pid "$lpid" --store-pid "$rpid" --store-addr "127.0.0.1:$rport" --metrics "http://127.0.0.1:$hport/metrics" --duration "$DURATION" --warmup 2s --concurrency "$CONC" "$@"; }
load --name "hot key under its limit" --keys 1 --attrs bench=under
load --name "hot key over its limit" --keys 1 --attrs bench=over
load --name "100k distinct keys" --keys 100000 --attrs bench=under --json >"$work/peak.json"
peak=$(sed -E 's/.*"decisions_per_second":([0-9.]+).*/\1/' "$work/peak.json")
load --name "16 items per Check" --keys 100000 --attrs bench=under --batch 16
half=$(awk -v p="$peak" 'BEGIN{printf "%d", p/2}')
load --name "100k keys at half peak" --keys 100000 --attrs bench=under --rate "$half"
load --name "100k keys at quarter peak" --keys 100000 --attrs bench=under --rate "$((half / 2))"

stop_limiter
start_limiter limiter-memory
mport=$gport
"${pin_load[@]}" "$work/weirload" --target "127.0.0.1:$mport" --pid "$lpid" --duration "$DURATION" --warmup 2s --concurrency "$CONC" \
  --name "same rate, memory store" --keys 100000 --attrs bench=under --rate "$half"
"${pin_load[@]}" "$work/weirload" --target "127.0.0.1:$mport" --pid "$lpid" --duration "$DURATION" --warmup 2s --concurrency "$CONC" \
  --name "same rate, gRPC health only" --call health --rate "$half"
echo
redis_latency
