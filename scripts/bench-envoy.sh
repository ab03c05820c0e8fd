#!/usr/bin/env bash
# make bench-envoy: Envoy's rate limit API (envoy.service.ratelimit.v3) and
# weir.v1 Check side by side, at closed-loop peak with a lean client
# (weirload), 100k distinct keys, one and 16 descriptors (items) per call,
# with the gRPC health call — the floor of any call — in the same run.
# Each line gives decisions/s, p50/p99/p99.9, the limiter's CPU per
# decision (and per call), redis-server's CPU and commands (INFO
# commandstats) per decision, and the share of decisions that went to a
# failure mode. A summary then states each API's CPU per decision over the
# floor. Method: redis-server and the limiter share CPU 0, the load client
# runs on CPU 1 (taskset), everything on loopback; default settings.
# DURATION per phase (default 10s), CONC workers (default 50), LIMITER_BIN
# to measure another build of the limiter.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
CONC=${CONC:-50}
. scripts/bench-common.sh

start_redis
start_limiter limiter --redis "127.0.0.1:$rport"

machine_line
echo "closed loop, concurrency $CONC, $DURATION per phase, 100k keys, default limiter settings"
load() {
  local name=$1
  shift
  "${pin_load[@]}" "$work/weirload" --target "127.0.0.1:$gport" --pid "$lpid" --store-pid "$rpid" \
    --store-addr "127.0.0.1:$rport" --metrics "http://127.0.0.1:$hport/metrics" \
    --duration "$DURATION" --warmup 2s --concurrency "$CONC" --name "$name" --json "$@" >"$work/$name.json"
}
load health --call health
load envoy-1 --api envoy --keys 100000 --attrs bench=under
load envoy-16 --api envoy --keys 100000 --attrs bench=under --batch 16
load weir-1 --keys 100000 --attrs bench=under
load weir-16 --keys 100000 --attrs bench=under --batch 16

field() { sed -E "s/.*\"$2\":([-0-9.e+]+).*/\1/" "$work/$1.json"; }
floor=$(field health limiter_cpu_us_per_call)
echo
printf "summary (limiter CPU per decision over the floor, a gRPC health call of %.1fµs, shared by a call's decisions)\n" "$floor"
for run in envoy-1 envoy-16 weir-1 weir-16; do
  cpu=$(field "$run" limiter_cpu_us_per_decision)
  awk -v r="$run" -v c="$cpu" -v f="$floor" -v b="${run##*-}" -v rc="$(field "$run" store_cpu_us_per_decision)" \
    -v cmds="$(field "$run" store_commands_per_decision)" -v fs="$(field "$run" failure_share)" \
    -v p50="$(field "$run" p50_us)" -v p99="$(field "$run" p99_us)" -v p999="$(field "$run" p999_us)" \
    -v dps="$(field "$run" decisions_per_second)" \
    'BEGIN { printf "%-9s %8.0f decisions/s  CPU %5.1fµs/decision (floor/%d + %5.1fµs)  redis %4.1fµs, %4.2f commands/decision  failure modes %.4f%%  p50/p99/p99.9 %.0f/%.0f/%.0fµs\n", r, dps, c, b, c - f / b, rc, cmds, 100 * fs, p50, p99, p999 }'
done
echo
echo "limiter warnings (failure modes, breaker; at most one line per 10s of each kind):"
grep -h '"level":"WARN"' "$work/limiter.log" | tail -20 || echo "none"
