#!/usr/bin/env bash
# Drives faults into the topology scripts/run-cluster.sh runs (start that
# first): while weirload sends traffic to both DCs, it kills (SIGKILL) and
# restarts each kind of process in turn — an etcd member (the leader), the
# Kafka brokers, the leading coordinator, a limiter, a Redis Cluster
# primary — and prints, per fault, how long the system took to take over
# and recover. Bounded: one pass, about two minutes; loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.cache/bin}
WORK=${LOGS:-$PWD/.cache/run-cluster}
[ -f "$WORK/ready" ] || { echo "chaos: start scripts/run-cluster.sh first" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2fs", b-a}'; }
pid_of() { awk -v n="$1" '$1==n{p=$2} END{print p}' "$WORK/pids"; }
kill9() { kill -9 "$(pid_of "$1")" 2>/dev/null || true; }
restart() { # name: start again from its recorded command line
  eval "setsid $(cat "$WORK/$1.cmd")" >>"$WORK/$1.log" 2>&1 &
  echo "$1 $!" >>"$WORK/pids"
}
until_ok() { # timeout-seconds command...: seconds until the command succeeds
  local t0; t0=$(now); local limit=$1; shift
  for _ in $(seq 1 $((limit * 20))); do "$@" >/dev/null 2>&1 && { since "$t0"; return; }; sleep 0.05; done
  echo "not within ${limit}s"
}
leads() { curl -fsS "http://$1/metrics" 2>/dev/null | grep -q '^weir_coordinator_leader 1'; }
etcd_put() { curl -fsS -m 1 -X POST "http://127.0.0.1:2379$1/v3/kv/put" -d '{"key":"Y2hhb3M=","value":"MQ=="}'; }

load_pids=()
for port in 9191 9192 9193 9194; do
  "$BIN/weirload" --target 127.0.0.1:$port --domain api --attrs path=/chaos --key-attr user_id --keys 50 \
    --rate 200 --concurrency 20 --duration 75s --json >"$WORK/load-$port.json" 2>"$WORK/load-$port.err" &
  load_pids+=($!)
done
report=()
sleep 5

# 1. The etcd leader member.
leader=""
for i in 0 1 2; do
  if curl -fsS -X POST http://127.0.0.1:2379$i/v3/maintenance/status -d '{}' 2>/dev/null | grep -q '"leader":"\([0-9]*\)".*' ; then
    st=$(curl -fsS -X POST http://127.0.0.1:2379$i/v3/maintenance/status -d '{}')
    lid=$(echo "$st" | sed -n 's/.*"leader":"\([0-9]*\)".*/\1/p'); mid=$(echo "$st" | sed -n 's/.*"member_id":"\([0-9]*\)".*/\1/p')
    [ "$lid" = "$mid" ] && leader=$i
  fi
done
other=$(( (${leader:-0} + 1) % 3 ))
kill9 etcd-${leader:-0}; t0=$(now)
report+=("etcd leader member m${leader:-0} killed: writes through m$other again after $(until_ok 20 etcd_put $other)")
restart etcd-${leader:-0}
report+=("etcd member m${leader:-0} restarted: serves again after $(until_ok 20 curl -fsS http://127.0.0.1:2379${leader:-0}/health)")
sleep 5

# 2. The Kafka brokers (all three: kfake runs them in one process).
kill9 kafka
sleep 3
restart kafka
report+=("Kafka brokers killed for 3s and restarted: reachable after $(until_ok 20 bash -c 'exec 3<>/dev/tcp/127.0.0.1/19094')")
sleep 5

# 3. The leading coordinator.
if leads 127.0.0.1:8070; then dead=coordinator-1 standby=127.0.0.1:8071; else dead=coordinator-2 standby=127.0.0.1:8070; fi
kill9 $dead
report+=("leading $dead killed: the standby ($standby) leads after $(until_ok 20 leads $standby)")
restart $dead
sleep 5

# 4. A limiter of DC a.
kill9 limiter-a1
restart limiter-a1
report+=("limiter a-1 killed and restarted: ready after $(until_ok 20 curl -fsS http://127.0.0.1:8081/readyz)")
sleep 5

# 5. A Redis Cluster primary (DC a).
kill9 redis-7001
report+=("Redis primary 127.0.0.1:7001 killed: cluster_state ok (replica promoted) after $(until_ok 20 bash -c 'redis-cli -p 7002 cluster info | grep -q cluster_state:ok')")
restart redis-7001
sleep 5

wait "${load_pids[@]}" || true
echo "chaos: what each fault did"
for line in "${report[@]}"; do echo "  $line"; done
echo "chaos: traffic (weirload, per limiter)"
for port in 9191 9192 9193 9194; do echo "  $port: $(tr -d '\n' <"$WORK/load-$port.json" | head -c 600)"; done
for f in "$WORK"/limiter-*.log; do
  echo "  $(basename "$f" .log): $(grep -c 'failure mode\|failure_mode' "$f" || true) log lines about the failure mode"
done
