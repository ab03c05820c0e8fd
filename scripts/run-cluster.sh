#!/usr/bin/env bash
# Runs Weir's production topology on this machine, every piece a process of
# its own on loopback (issue 15, docs/deployment.md):
#   - a 3-member etcd: Debian's `etcd` when installed (apt-get install
#     etcd-server), else `weirdev etcd` (embedded etcd members);
#   - a 3-broker Kafka-protocol cluster (`weirdev kafka`, kfake) with a
#     6-partition usage topic;
#   - two coordinators (leader and standby);
#   - DC a: two limiters on a Redis Cluster (3 primaries + 3 replicas, made
#     with redis-cli --cluster create); DC b: two limiters on one Redis.
# Logs, pids and the admin token are kept in $LOGS (default
# .cache/run-cluster), emptied when the next run starts. Ctrl-C (or
# SIGTERM) stops everything. scripts/chaos.sh drives faults into a running
# topology; it reads $LOGS/pids.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.cache/bin}
RULES=${RULES:-deploy/multidc/rules.yaml}
WORK=${LOGS:-$PWD/.cache/run-cluster}
INTERVAL=${INTERVAL:-500ms}
DOMAIN=$(sed -n 's/^domain:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}.*/\1/p' "$RULES" | head -n1)
DOMAIN=${DOMAIN:-default}
for tool in redis-server redis-cli curl; do
  command -v $tool >/dev/null || { echo "run-cluster: $tool is needed (apt-get install -y redis-server redis-tools curl)" >&2; exit 1; }
done
rm -rf "$WORK"
mkdir -p "$WORK"
: >"$WORK/pids"
pids=()
cleanup() {
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  # processes chaos.sh restarted are in the pid file, not in $pids
  while read -r _ p; do kill "$p" 2>/dev/null || true; done <"$WORK/pids"
  wait 2>/dev/null || true
  echo "run-cluster: stopped; logs kept in $WORK" >&2
}
trap cleanup EXIT INT TERM

mkdir -p "$BIN"
go build -o "$BIN/" ./cmd/limiter ./cmd/coordinator ./cmd/weirctl ./cmd/weirdev ./cmd/weirload
TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
printf '%s rw operator\n' "$TOKEN" >"$WORK/tokens"
printf '%s\n' "$TOKEN" >"$WORK/token"
cat >"$WORK/env" <<ENV
export WEIR_SERVER=http://127.0.0.1:8070 WEIR_TOKEN=$TOKEN WEIR_DOMAIN=$DOMAIN PATH=\$PATH:$PWD/$BIN
ENV
chmod 600 "$WORK/tokens" "$WORK/token" "$WORK/env"

# spawn NAME CMD...: start a process, log to $WORK/NAME.log, record its pid
# and command line (chaos.sh restarts it from $WORK/NAME.cmd).
spawn() {
  local name=$1; shift
  printf '%q ' "$@" >"$WORK/$name.cmd"
  "$@" >>"$WORK/$name.log" 2>&1 &
  pids+=($!)
  echo "$name $!" >>"$WORK/pids"
}
wait_http() { # url name
  for _ in $(seq 1 150); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "run-cluster: $2 did not come up ($1); logs in $WORK" >&2
  exit 1
}

# etcd: three members.
initial=m0=http://127.0.0.1:23800,m1=http://127.0.0.1:23801,m2=http://127.0.0.1:23802
ETCD=http://127.0.0.1:23790,http://127.0.0.1:23791,http://127.0.0.1:23792
for i in 0 1 2; do
  if command -v etcd >/dev/null 2>&1; then
    spawn etcd-$i etcd --name m$i --data-dir "$WORK/etcd-$i" \
      --listen-client-urls http://127.0.0.1:2379$i --advertise-client-urls http://127.0.0.1:2379$i \
      --listen-peer-urls http://127.0.0.1:2380$i --initial-advertise-peer-urls http://127.0.0.1:2380$i \
      --initial-cluster $initial --initial-cluster-token weir-run-cluster --initial-cluster-state new \
      --heartbeat-interval 50 --election-timeout 500
  else
    spawn etcd-$i "$BIN/weirdev" etcd --name m$i --dir "$WORK/etcd-$i" \
      --client 127.0.0.1:2379$i --peer 127.0.0.1:2380$i --initial-cluster $initial
  fi
done
for i in 0 1 2; do wait_http http://127.0.0.1:2379$i/health "etcd member m$i"; done

# Kafka: three brokers, the usage topic in 6 partitions.
KAFKA=127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094
spawn kafka "$BIN/weirdev" kafka --addr 127.0.0.1:19092 --brokers 3 --partitions 6 --topics weir.usage
for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/19094) 2>/dev/null && break; sleep 0.1; done

# Redis: a cluster for DC a, one server for DC b.
for port in 7001 7002 7003 7004 7005 7006; do
  mkdir -p "$WORK/redis-$port"
  spawn redis-$port redis-server --port $port --bind 127.0.0.1 --dir "$WORK/redis-$port" --save '' --appendonly no \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 1000 \
    --cluster-require-full-coverage no --cluster-replica-validity-factor 0
done
spawn redis-6392 redis-server --port 6392 --bind 127.0.0.1 --save '' --appendonly no
for port in 7001 7002 7003 7004 7005 7006 6392; do
  for _ in $(seq 1 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create 127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003 127.0.0.1:7004 127.0.0.1:7005 127.0.0.1:7006 \
  --cluster-replicas 1 --cluster-yes >"$WORK/redis-cluster-create.log" 2>&1
for _ in $(seq 1 100); do
  redis-cli -p 7001 cluster info 2>/dev/null | grep -q cluster_state:ok && break
  sleep 0.1
done

for n in 1 2; do
  spawn coordinator-$n "$BIN/coordinator" --etcd $ETCD --kafka $KAFKA --dcs a,b --rules "$RULES" \
    --interval $INTERVAL --admin-addr 127.0.0.1:807$((n - 1)) --default-domain "$DOMAIN" --name coordinator-$n \
    --admin-token-file "$WORK/tokens" --log-format text
done
wait_http http://127.0.0.1:8070/healthz coordinator-1
wait_http http://127.0.0.1:8071/healthz coordinator-2

port=0
for dc in a b; do
  if [ $dc = a ]; then redis=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003; else redis=127.0.0.1:6392; fi
  for n in 1 2; do
    port=$((port + 1))
    spawn limiter-$dc$n "$BIN/limiter" --dc $dc --dcs a,b --instance $dc-$n --redis $redis \
      --http-addr 127.0.0.1:808$port --grpc-addr 127.0.0.1:919$port \
      --etcd $ETCD --kafka $KAFKA --report-interval $INTERVAL --log-format text
  done
done
for port in 1 2 3 4; do wait_http http://127.0.0.1:808$port/readyz "limiter on :808$port"; done

cat <<MSG
Weir's production topology is running on loopback (rules of domain $DOMAIN), logs in $WORK
  etcd          $ETCD
  Kafka         $KAFKA (weir.usage: 6 partitions)
  coordinators  http://127.0.0.1:8070  http://127.0.0.1:8071
  DC a (Redis Cluster 127.0.0.1:7001-7006)  HTTP :8081 :8082  gRPC 127.0.0.1:9191 127.0.0.1:9192
  DC b (Redis 127.0.0.1:6392)               HTTP :8083 :8084  gRPC 127.0.0.1:9193 127.0.0.1:9194
Try:
  curl -s localhost:8081/v1/check -d '{"attributes":{"tenant":"acme"}}'
  . $WORK/env && weirctl shares get tenant-daily
  scripts/chaos.sh                       # kills and restarts each kind of process while traffic runs
Ctrl-C stops everything.
MSG
touch "$WORK/ready"
wait
