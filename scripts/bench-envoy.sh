#!/usr/bin/env bash
# make bench-envoy: Envoy's rate limit API (envoy.service.ratelimit.v3) and
# weir.v1 Check side by side, at closed-loop peak with a lean client
# (weirload), 100k distinct keys, one and 16 descriptors (items) per call,
# with the gRPC health call — the floor of any call — in the same run:
# at its closed-loop peak, and paced at the rates single-item decisions
# are paced at (envoy-1-pacedN, weir-1-pacedN at N% of weir-1's peak),
# the floor at their own rate.
# envoy-N asks a domain loaded from an envoyproxy/ratelimit configuration
# (scripts/bench-envoy/envoy.yaml, answered as the peer answers), envoyw-N
# a Weir rule file's domain, weir-N weir.v1 on that rule; the three decide
# the same limit.
# Each line gives decisions/s, p50/p99/p99.9, the limiter's CPU per
# decision (and per call), redis-server's CPU and commands (INFO
# commandstats) per decision, and the share of decisions that went to a
# failure mode. A summary then states each API's CPU per decision over the
# floor, and Envoy's CPU per decision over weir.v1's. Method: redis-server and the limiter share CPU 0, the load client
# runs on CPU 1 (taskset), everything on loopback; default settings.
# DURATION per phase (default 10s), CONC workers (default 50), PACED the
# paced rates as shares of weir-1's peak (default "0.5 0.75"), LIMITER_BIN
# to measure another build of the limiter.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
CONC=${CONC:-50}
. scripts/bench-common.sh
RULES=scripts/bench-envoy

start_redis
start_limiter limiter --redis "127.0.0.1:$rport"

machine_line
echo "closed loop, concurrency $CONC, $DURATION per phase, 100k keys, default limiter settings; then paced: calls due at an even rate, at most $CONC in flight"
load() {
  local name=$1
  shift
  "${pin_load[@]}" "$work/weirload" --target "127.0.0.1:$gport" --pid "$lpid" --store-pid "$rpid" \
    --store-addr "127.0.0.1:$rport" --metrics "http://127.0.0.1:$hport/metrics" \
    --duration "$DURATION" --warmup 2s --concurrency "$CONC" --name "$name" --json "$@" >"$work/$name.json"
}
load health --call health
load envoy-1 --api envoy --domain envoybench --keys 100000 --attrs bench=under
load envoy-16 --api envoy --domain envoybench --keys 100000 --attrs bench=under --batch 16
load envoyw-1 --api envoy --domain bench --keys 100000 --attrs bench=under
load envoyw-16 --api envoy --domain bench --keys 100000 --attrs bench=under --batch 16
load weir-1 --domain bench --keys 100000 --attrs bench=under
load weir-16 --domain bench --keys 100000 --attrs bench=under --batch 16

field() { sed -E "s/.*\"$2\":([-0-9.e+]+).*/\1/" "$work/$1.json"; }
# A gRPC call's CPU falls as the call rate rises (the transport writes
# more answers per syscall, and goroutines find work waiting), and the
# health call's peak is nearly twice a decision's: the same single-item
# calls again, and health calls, paced at one rate, give the floor at the
# decisions' own rate. PACED lists those rates as shares of weir-1's
# peak (default 0.5 and 0.75: half of it, and nearer it), each checked
# before any is run. Before each rate the keys of the phases before
# expire (windows of 1 s: their TTL ends 1 to 3 s after their last
# write), so that Redis deleting them (docs/operations.md, hz) stalls no
# paced phase.
PACED=${PACED:-0.5 0.75}
peak=$(field weir-1 decisions_per_second)
paced=()
for share in $PACED; do
  rate=$(awk -v p="$peak" -v s="$share" 'BEGIN { printf "%d", s * p }')
  pct=$(awk -v s="$share" 'BEGIN { printf "%d", 100 * s + 0.5 }')
  if [ "$rate" -lt 1 ]; then
    echo "PACED share '$share' gives no rate (weir-1's peak: $peak decisions/s): no paced phases" >&2
    exit 1
  fi
  for p in "${paced[@]}"; do
    if [ "${p%%:*}" = "$pct" ]; then
      echo "PACED shares must differ by at least 1%: two are $pct%" >&2
      exit 1
    fi
  done
  paced+=("$pct:$rate")
done
for p in "${paced[@]}"; do
  pct=${p%%:*} rate=${p##*:}
  sleep 5
  load "health-paced$pct" --call health --rate "$rate"
  load "envoy-1-paced$pct" --api envoy --domain envoybench --keys 100000 --attrs bench=under --rate "$rate"
  load "weir-1-paced$pct" --domain bench --keys 100000 --attrs bench=under --rate "$rate"
done
floor=$(field health limiter_cpu_us_per_call)
echo
printf "summary (limiter CPU per decision over the floor, a gRPC health call of %.1fµs, shared by a call's decisions)\n" "$floor"
for run in envoy-1 envoy-16 envoyw-1 envoyw-16 weir-1 weir-16; do
  cpu=$(field "$run" limiter_cpu_us_per_decision)
  awk -v r="$run" -v c="$cpu" -v f="$floor" -v b="${run##*-}" -v rc="$(field "$run" store_cpu_us_per_decision)" \
    -v cmds="$(field "$run" store_commands_per_decision)" -v fs="$(field "$run" failure_share)" \
    -v p50="$(field "$run" p50_us)" -v p99="$(field "$run" p99_us)" -v p999="$(field "$run" p999_us)" \
    -v dps="$(field "$run" decisions_per_second)" \
    'BEGIN { printf "%-9s %8.0f decisions/s  CPU %5.1fµs/decision (floor/%d + %5.1fµs)  redis %4.1fµs, %4.2f commands/decision  failure modes %.4f%%  p50/p99/p99.9 %.0f/%.0f/%.0fµs\n", r, dps, c, b, c - f / b, rc, cmds, 100 * fs, p50, p99, p999 }'
done
for p in "${paced[@]}"; do
  pct=${p%%:*}
  pfloor=$(field "health-paced$pct" limiter_cpu_us_per_call)
  echo
  printf "at one rate, %d calls/s paced (%d%% of weir-1's peak): a gRPC health call %.1fµs\n" "${p##*:}" "$pct" "$pfloor"
  # A phase that fell behind its rate (the machine slowed since the
  # closed-loop phase that set it) queued calls behind its $CONC slots: its
  # tail, counted from when each call was due, is the machine's. Calls
  # count answered or not.
  for run in "health-paced$pct" "envoy-1-paced$pct" "weir-1-paced$pct"; do
    awk -v r="$run" -v c="$(field "$run" limiter_cpu_us_per_decision)" -v f="$pfloor" -v fs="$(field "$run" failure_share)" \
      -v p99="$(field "$run" p99_us)" -v p999="$(field "$run" p999_us)" -v dps="$(field "$run" decisions_per_second)" \
      -v calls="$(field "$run" calls)" -v secs="$(field "$run" seconds)" -v rate="${p##*:}" \
      'BEGIN {
        cps = calls / secs
        behind = cps < 0.98 * rate ? sprintf("  BEHIND its rate (%.0f%%)", 100 * cps / rate) : ""
        if (r ~ /^health/) {
          if (behind != "") printf "%-15s %8.0f calls/s%s\n", r, cps, behind
          exit
        }
        printf "%-15s %8.0f decisions/s  CPU %5.1fµs/decision (floor + %5.1fµs)  failure modes %.4f%%  p99/p99.9 %.0f/%.0fµs%s\n", r, dps, c, c - f, 100 * fs, p99, p999, behind
      }'
  done
done
echo
echo "Envoy's API over weir.v1, limiter CPU per decision (the issue's target: at most 1.10)"
for b in 1 16; do
  for e in envoy envoyw; do
    awk -v r="$e-$b" -v e="$(field "$e-$b" limiter_cpu_us_per_decision)" -v w="$(field "weir-$b" limiter_cpu_us_per_decision)" \
      'BEGIN { printf "%-9s %5.1fµs / weir-%s %5.1fµs = %.2f\n", r, e, substr(r, index(r, "-") + 1), w, e / w }'
  done
done
echo
redis_latency
echo
echo "limiter warnings (failure modes, breaker; at most one line per 10s of each kind):"
grep -h '"level":"WARN"' "$work/limiter.log" | tail -20 || echo "none"
