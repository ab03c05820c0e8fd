#!/usr/bin/env bash
# Drives faults into the topology scripts/run-cluster.sh runs (start that
# first) and measures what each did to the limit.
#
# It applies a global rule of its own (domain chaos, rule chaos-global: one
# counter for every request on /chaos, a TokenBucket of $LIMIT per second
# with a burst of $BURST, failure_mode local) through the admin API
# (weirctl apply), drives traffic above that limit into every limiter
# (weirload, $RATE calls per second each, loopback only, bounded in time),
# samples every limiter's decision counters about once a second, and kills
# (SIGKILL) and restarts one kind of process at a time: the etcd leader
# member, the Kafka brokers, the leading coordinator, a limiter, the Redis
# Cluster primary serving the rule's key. For each fault it prints the
# takeover or recovery time, the worst admitted per second across all
# limiters against the limit, the worst overshoot above the bound of
# docs/architecture.md ("Error bound": a token bucket admits at most
# burst + limit x t in any interval of t seconds), and the decisions taken
# by a failure mode. One pass, about two and a half minutes.
#
# How a sample bounds the count: the four limiters are read one after the
# other between t0 and t1; decisions counted between two samples i and i+1
# were all taken within [t0_i, t1_{i+1}], so the bound of that interval is
# burst + limit x (t1_{i+1} - t0_i). A limiter that cannot be read (it was
# killed) counts nothing until it answers again, and its counters restart
# from zero: what it admitted between its last sample and its death is not
# counted (under one interval of its traffic).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.cache/bin}
WORK=${LOGS:-$PWD/.cache/run-cluster}
LIMIT=${LIMIT:-100}
BURST=${BURST:-10}
RATE=${RATE:-60}
[ -f "$WORK/ready" ] && [ -f "$WORK/topology" ] || { echo "chaos: start scripts/run-cluster.sh first" >&2; exit 1; }
# shellcheck disable=SC1091
. "$WORK/topology"
# shellcheck disable=SC1091
. "$WORK/env"
read -r -a etcd_ports <<<"$ETCD_PORTS"
read -r -a coord_ports <<<"$COORD_PORTS"
read -r -a http_ports <<<"$HTTP_PORTS"
read -r -a grpc_ports <<<"$GRPC_PORTS"
read -r -a limiters <<<"$LIMITERS"
read -r -a kafka_ports <<<"$KAFKA_PORTS"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f s", b-a}'; }
pid_of() { awk -v n="$1" '$1==n{p=$2} END{print p}' "$WORK/pids"; }
kill9() { kill -9 "$(pid_of "$1")" 2>/dev/null || true; }
restart() { # name: start again from its recorded command line; exec, so
  # that the pid recorded is the process's own (run-cluster stops it).
  eval "exec $(cat "$WORK/$1.cmd")" >>"$WORK/$1.log" 2>&1 &
  echo "$1 $!" >>"$WORK/pids"
}
until_ok() { # timeout-seconds command...: seconds until the command succeeds
  local t0 end
  t0=$(now); end=$(awk -v a="$t0" -v l="$1" 'BEGIN{printf "%.3f", a+l}'); shift
  while awk -v e="$end" -v n="$(now)" 'BEGIN{exit !(n < e)}'; do
    "$@" >/dev/null 2>&1 && { since "$t0"; return; }
    sleep 0.05
  done
  echo "not within $(awk -v a="$t0" -v b="$end" 'BEGIN{printf "%.0f", b-a}') s"
}
leads() { curl -fsS -m 3 "http://127.0.0.1:$1/metrics" 2>/dev/null | grep -q '^weir_coordinator_leader 1'; }
etcd_put() { curl -fsS -m 1 -X POST "http://127.0.0.1:$1/v3/kv/put" -d '{"key":"Y2hhb3M=","value":"MQ=="}'; }
phase() { echo "$(now)|$1" >>"$WORK/chaos-phases"; }
measured() { echo "$1|$2" >>"$WORK/chaos-times"; }

# counts PORT: the rule's allowed, failure-mode and store decisions on one
# limiter, or nothing when it does not answer.
counts() {
  curl -fsS -m 1 "http://127.0.0.1:$1/metrics" 2>/dev/null | awk '
    /^weir_decisions_total\{/ && /rule="chaos-global"/ {
      if (/result="allowed"/) a += $NF
      if (/source="failure_/) f += $NF
      if (/source="store"/) s += $NF
      seen = 1
    }
    /^weir_/ { up = 1 }
    END { if (up) printf "%d %d %d\n", a, f, s }'
}

# The sampler: one line a second, "t0 t1" and, per limiter, "allowed
# failure store" or "- - -".
sampler() {
  local dir t0 t1 k line
  dir=$(mktemp -d)
  while [ ! -f "$WORK/chaos-stop" ]; do
    t0=$(now)
    k=0
    for port in "${http_ports[@]}"; do counts "$port" >"$dir/$k" & k=$((k + 1)); done
    wait
    t1=$(now)
    line="$t0 $t1"
    for ((k = 0; k < ${#http_ports[@]}; k++)); do
      if [ -s "$dir/$k" ]; then line="$line $(cat "$dir/$k")"; else line="$line - - -"; fi
    done
    echo "$line" >>"$WORK/chaos-samples"
    sleep "$(awk -v a="$t0" -v b="$(now)" 'BEGIN{d=1-(b-a); if (d<0) d=0; printf "%.3f", d}')"
  done
  rm -rf "$dir"
}

# store_back: whether every DC a limiter took store decisions and no
# failure-mode decision since the last call, after failure-mode decisions
# were seen (set prev_a and seen_failure before the first call).
store_back() {
  local ok=1 k cur f s pf ps
  for k in 0 1; do
    cur=$(counts "${http_ports[$k]}")
    [ -n "$cur" ] || return 1
    read -r _ f s <<<"$cur"
    read -r pf ps <<<"${prev_a[$k]}"
    [ "$f" -gt "$pf" ] && { seen_failure=1; ok=0; }
    [ "$s" -gt "$ps" ] || ok=0
    prev_a[$k]="$f $s"
  done
  [ "$seen_failure" = 1 ] && [ $ok = 1 ]
}

rm -f "$WORK"/chaos-*
cat >"$WORK/chaos-rules.yaml" <<RULES
domain: chaos
rules:
  - rule_id: chaos-global
    path_pattern: /chaos
    limit: $LIMIT
    window_seconds: 1
    algorithm: TokenBucket
    burst: $BURST
    scope: global
    failure_mode: local
RULES
# The file names its own domain; the topology's WEIR_DOMAIN is another.
WEIR_DOMAIN=chaos "$BIN/weirctl" apply -f "$WORK/chaos-rules.yaml" >"$WORK/chaos-apply.log"
# Every limiter decides by the rule before the traffic is measured.
for port in "${http_ports[@]}"; do
  until_ok 20 bash -c "curl -sS -m 1 http://127.0.0.1:$port/v1/check -d '{\"domain\":\"chaos\",\"attributes\":{\"path\":\"/chaos\"}}' | grep -q chaos-global" >/dev/null
done

load_pids=()
for port in "${grpc_ports[@]}"; do
  "$BIN/weirload" --target 127.0.0.1:$port --domain chaos --attrs path=/chaos --keys 1 \
    --rate "$RATE" --concurrency 20 --warmup 1s --duration 170s --json >"$WORK/chaos-load-$port.json" 2>"$WORK/chaos-load-$port.err" &
  load_pids+=($!)
done
sampler &
sampler_pid=$!
stop_all() {
  touch "$WORK/chaos-stop"
  for p in "${load_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait "$sampler_pid" 2>/dev/null || true
}
trap stop_all EXIT
sleep 3
phase "no fault (traffic only)"
sleep 10

# 1. The etcd leader member, then its restart.
leader=0
for i in 0 1 2; do
  st=$(curl -fsS -m 1 -X POST "http://127.0.0.1:${etcd_ports[$i]}/v3/maintenance/status" -d '{}' 2>/dev/null || true)
  lid=$(sed -n 's/.*"leader":"\([0-9]*\)".*/\1/p' <<<"$st"); mid=$(sed -n 's/.*"member_id":"\([0-9]*\)".*/\1/p' <<<"$st")
  [ -n "$lid" ] && [ "$lid" = "$mid" ] && leader=$i
done
other=$(((leader + 1) % 3))
phase "etcd leader member m$leader killed"
kill9 etcd-$leader
measured "etcd leader member m$leader killed" "writes through m$other again after $(until_ok 20 etcd_put "${etcd_ports[$other]}")"
sleep 5
phase "etcd member m$leader restarted"
restart etcd-$leader
measured "etcd member m$leader restarted" "serves again after $(until_ok 20 curl -fsS -m 1 "http://127.0.0.1:${etcd_ports[$leader]}/health")"
sleep 8

# 2. The Kafka brokers (kfake runs all three in one process).
phase "Kafka brokers stopped 3 s, restarted"
kill9 kafka
sleep 3
restart kafka
measured "Kafka brokers stopped 3 s, restarted" "reachable $(until_ok 20 bash -c "exec 3<>/dev/tcp/127.0.0.1/${kafka_ports[2]}") after the restart"
sleep 10

# 3. The leading coordinator.
# The leader is the one that says so (a metrics read that times out on a
# loaded machine must not make the standby look like the leader).
dead=""
for _ in $(seq 1 20); do
  if leads "${coord_ports[0]}"; then dead=coordinator-1 standby=${coord_ports[1]}; break; fi
  if leads "${coord_ports[1]}"; then dead=coordinator-2 standby=${coord_ports[0]}; break; fi
  sleep 0.5
done
[ -n "$dead" ] || { echo "chaos: no coordinator says it leads" >&2; exit 1; }
phase "leading $dead SIGKILLed"
kill9 $dead
measured "leading $dead SIGKILLed" "the standby (:$standby) leads after $(until_ok 20 leads "$standby")"
restart $dead
sleep 10

# 4. A limiter of DC a, down for 3 s.
phase "limiter a-1 killed, restarted 3 s later"
kill9 "${limiters[0]}"
sleep 3
restart "${limiters[0]}"
measured "limiter a-1 killed, restarted 3 s later" "ready $(until_ok 20 curl -fsS -m 1 "http://127.0.0.1:${http_ports[0]}/readyz") after the restart"
sleep 10

# 5. The Redis Cluster primary that serves the rule's key (DC a).
key="" primary=""
for port in $CLUSTER_PORTS; do
  [ "$(redis-cli -p "$port" role 2>/dev/null | head -n1)" = master ] || continue
  k=$(redis-cli -p "$port" --scan --pattern '*chaos-global*' 2>/dev/null | head -n1)
  [ -n "$k" ] && { key=$k primary=$port; break; }
done
if [ -n "$primary" ]; then
  slot=$(redis-cli -p "$primary" cluster keyslot "$key")
  survivor=""
  for port in $CLUSTER_PORTS; do [ "$port" != "$primary" ] && { survivor=$port; break; }; done
  # promoted: a survivor's CLUSTER NODES shows a master other than the dead
  # one, not failed, serving the slot.
  promoted() {
    redis-cli -p "$survivor" cluster nodes | awk -v slot="$slot" -v dead="127.0.0.1:$primary" '
      $3 ~ /master/ && $3 !~ /fail/ && index($2, dead "@") != 1 {
        for (i = 9; i <= NF; i++) { n = split($i, r, "-"); lo = r[1]; hi = (n > 1 ? r[2] : r[1]); if (slot >= lo && slot <= hi) ok = 1 }
      }
      END { exit !ok }'
  }
  name="Redis primary :$primary (slot $slot of the rule's key) killed"
  phase "$name"
  prev_a=("$(counts "${http_ports[0]}" | cut -d' ' -f2-)" "$(counts "${http_ports[1]}" | cut -d' ' -f2-)")
  seen_failure=0
  t0=$(now)
  kill9 redis-$primary
  promo=$(until_ok 30 promoted)
  back=$(until_ok 30 store_back)
  [[ $back == not* ]] || back=$(since "$t0")
  measured "$name" "replica promoted (CLUSTER NODES) after $promo; DC a's decisions back on the store after $back (from the kill)"
  sleep 3
  restart redis-$primary
  sleep 8
else
  echo "chaos: no key of chaos-global found on a Redis Cluster primary; skipping the Redis fault" >&2
fi
phase "end"
stop_all
trap - EXIT

echo "chaos: what each fault did (limit $LIMIT/s, burst $BURST; demand ${#grpc_ports[@]} x $RATE/s; samples about 1 s apart)"
awk -v L="$LIMIT" -v B="$BURST" '
  FNR == 1 { file++ }
  file == 1 { split($0, p, "|"); np++; pt[np] = p[1]; pn[np] = p[2]; next }
  file == 2 { split($0, m, "|"); times[m[1]] = m[2]; next }
  {
    t0 = $1; t1 = $2; n = (NF - 2) / 3
    if (have) {
      mid = (pt0 + t0) / 2; ph = 0
      for (i = 1; i <= np; i++) if (pt[i] <= mid) ph = i
      if (ph > 0 && ph < np) {
        c = 0; fm = 0
        for (k = 0; k < n; k++) {
          a = $(3 + 3 * k); f = $(4 + 3 * k)
          if (a == "-") { down[k] = 1; continue }
          if (down[k] || a < last_a[k]) { c += a; fm += f } else { c += a - last_a[k]; fm += f - last_f[k] }
          down[k] = 0
        }
        dt = t0 - pt0; outer = t1 - pt0; bound = B + L * outer
        rate = c / dt; over = c - bound
        if (!(ph in worst) || rate > worst[ph]) { worst[ph] = rate; worstc[ph] = c; worstdt[ph] = dt }
        if (!(ph in wover) || over > wover[ph]) wover[ph] = over
        fail[ph] += fm; secs[ph] += dt; adm[ph] += c
      }
    }
    for (k = 0; k < n; k++) { a = $(3 + 3 * k); if (a != "-") { last_a[k] = a; last_f[k] = $(4 + 3 * k) } else down[k] = 1 }
    pt0 = t0; have = 1
  }
  END {
    printf "| %-52s | %-60s | %-22s | %-10s | %-9s | %-8s |\n", "fault", "takeover / recovery", "worst admitted/s", "mean /s", "overshoot", "failure-mode"
    for (i = 1; i < np; i++) {
      if (!(i in worst)) continue
      o = wover[i] > 0 ? sprintf("%d", wover[i] + 0.999) : "0"
      if (wover[i] > allover) allover = wover[i]
      printf "| %-52s | %-60s | %5.1f (%d in %.2f s) | %10.1f | %9s | %8d |\n", pn[i], (pn[i] in times ? times[pn[i]] : "-"), worst[i], worstc[i], worstdt[i], adm[i] / secs[i], o, fail[i]
    }
    printf "worst overshoot through all faults: %s above the bound (burst + limit x t over each sampled interval t)\n", (allover > 0 ? sprintf("%d", allover + 0.999) : "0")
  }' "$WORK/chaos-phases" "$WORK/chaos-times" "$WORK/chaos-samples"
echo "chaos: samples in $WORK/chaos-samples, weirload totals in $WORK/chaos-load-*.json"
