# Sourced by the bench-*.sh scripts: builds the limiter and weirload, and
# starts redis-server and limiters pinned to CPU 0 (the load client goes on
# CPU 1), everything on loopback, stopped on exit. LIMITER_BIN, when set,
# is the limiter binary to measure instead of this tree's (to compare
# builds with the same client).
set -euo pipefail
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

scripts/ensure-redis.sh
command -v redis-server >/dev/null || { echo "benchmarks need redis-server" >&2; exit 1; }
if [ -n "${LIMITER_BIN:-}" ]; then
  cp "$LIMITER_BIN" "$work/limiter"
else
  go build -o "$work/limiter" ./cmd/limiter
fi
go build -o "$work/weirload" ./cmd/weirload

pin_service=() pin_load=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_service=(taskset -c 0) pin_load=(taskset -c 1)
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }

# start_redis: sets rport and rpid. REDIS_ARGS adds flags (e.g. "--hz
# 100"); Redis's latency monitor records every event of 5 ms or more
# (redis_latency prints them).
start_redis() {
  rport=$(free_port)
  # shellcheck disable=SC2086 # REDIS_ARGS is a list of flags
  "${pin_service[@]}" redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no \
    --latency-monitor-threshold 5 ${REDIS_ARGS:-} >"$work/redis.log" 2>&1 &
  rpid=$!
  pids+=($rpid)
  for _ in $(seq 50); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
}

# start_limiter NAME [limiter flags...]: sets gport, hport and lpid. RULES
# is the --rules file or directory (default scripts/bench-limiter/rules.yaml).
start_limiter() {
  local name=$1
  shift
  gport=$(free_port) hport=$(free_port)
  "${pin_service[@]}" "$work/limiter" --dc bench --rules "${RULES:-scripts/bench-limiter/rules.yaml}" \
    --grpc-addr "127.0.0.1:$gport" --http-addr "127.0.0.1:$hport" --log-level warn "$@" >"$work/$name.log" 2>&1 &
  lpid=$!
  pids+=($lpid)
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$hport/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
}

# stop_limiter: stops the limiter lpid.
stop_limiter() {
  kill "$lpid" 2>/dev/null || true
  wait "$lpid" 2>/dev/null || true
}

# redis_latency prints Redis's own stalls of 5 ms or more, by kind, with
# the longest (LATENCY LATEST): an expire-cycle event is Redis deleting
# expired keys, which at the default hz of 10 may take up to 25 ms at once
# (docs/operations.md).
redis_latency() {
  echo "redis-server stalls of 5 ms or more (LATENCY LATEST; kind, latest ms, longest ms):"
  { redis-cli -p "$rport" latency latest || true; } | paste - - - - | awk -F'\t' 'NF == 4 && $1 != "" { printf "  %-14s %4d %4d\n", $1, $3, $4; n++ } END { if (!n) print "  none" }'
}

machine_line() {
  echo "machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)); redis-server and limiter on CPU 0, load on CPU 1"
  echo "redis-server: $(redis-server --version | awk '{sub(/^v=/, "", $3); print $3}')${REDIS_ARGS:+, flags $REDIS_ARGS}, hz $(redis-cli -p "$rport" config get hz | tail -1)"
  echo "guest idle: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo unknown), halt poll $(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null || echo n/a) ns"
}
