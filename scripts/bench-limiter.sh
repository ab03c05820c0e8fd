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
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

scripts/ensure-redis.sh
command -v redis-server >/dev/null || { echo "bench-limiter needs redis-server" >&2; exit 1; }
go build -o "$work/limiter" ./cmd/limiter
go build -o "$work/weirload" ./cmd/weirload

pin_service=() pin_load=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_service=(taskset -c 0) pin_load=(taskset -c 1)
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }
rport=$(free_port) gport=$(free_port) hport=$(free_port)

"${pin_service[@]}" redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no >"$work/redis.log" 2>&1 &
rpid=$!
pids+=($rpid)
for _ in $(seq 50); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
"${pin_service[@]}" "$work/limiter" --dc bench --redis "127.0.0.1:$rport" --rules scripts/bench-limiter/rules.yaml \
  --grpc-addr "127.0.0.1:$gport" --http-addr "127.0.0.1:$hport" --log-level warn >"$work/limiter.log" 2>&1 &
lpid=$!
pids+=($lpid)
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$hport/readyz" >/dev/null 2>&1 && break; sleep 0.1; done

echo "machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)); redis-server and limiter on CPU 0, load on CPU 1"
echo "closed loop, concurrency $CONC, $DURATION per run; paced runs: calls due at an even rate, at most $CONC in flight, latency from when each was due"
echo "guest idle: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo unknown), halt poll $(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null || echo n/a) ns"
load() { "${pin_load[@]}" "$work/weirload" --target "127.0.0.1:$gport" --pid "$lpid" --store-pid "$rpid" --duration "$DURATION" --warmup 2s --concurrency "$CONC" "$@"; }
load --name "hot key under its limit" --keys 1 --attrs bench=under
load --name "hot key over its limit" --keys 1 --attrs bench=over
load --name "100k distinct keys" --keys 100000 --attrs bench=under --json >"$work/peak.json"
peak=$(sed -E 's/.*"decisions_per_second":([0-9.]+).*/\1/' "$work/peak.json")
load --name "16 items per Check" --keys 100000 --attrs bench=under --batch 16
half=$(awk -v p="$peak" 'BEGIN{printf "%d", p/2}')
load --name "100k keys at half peak" --keys 100000 --attrs bench=under --rate "$half"
load --name "100k keys at quarter peak" --keys 100000 --attrs bench=under --rate "$((half / 2))"

kill "$lpid" 2>/dev/null || true
wait "$lpid" 2>/dev/null || true
mport=$(free_port) mhport=$(free_port)
"${pin_service[@]}" "$work/limiter" --dc bench --rules scripts/bench-limiter/rules.yaml \
  --grpc-addr "127.0.0.1:$mport" --http-addr "127.0.0.1:$mhport" --log-level warn >"$work/limiter-memory.log" 2>&1 &
lpid=$!
pids+=($lpid)
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$mhport/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
"${pin_load[@]}" "$work/weirload" --target "127.0.0.1:$mport" --pid "$lpid" --duration "$DURATION" --warmup 2s --concurrency "$CONC" \
  --name "same rate, memory store" --keys 100000 --attrs bench=under --rate "$half"
"${pin_load[@]}" "$work/weirload" --target "127.0.0.1:$mport" --pid "$lpid" --duration "$DURATION" --warmup 2s --concurrency "$CONC" \
  --name "same rate, gRPC health only" --call health --rate "$half"
