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
# .cache/run-cluster), emptied when the next run starts (which first stops
# whatever a previous run in $LOGS left running). Ctrl-C (or SIGTERM) stops
# everything. PORT_OFFSET (default 0) shifts every port, so that two
# topologies can run on one machine. scripts/chaos.sh drives faults into a
# running topology; it reads $LOGS/topology and $LOGS/pids.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.cache/bin}
RULES=${RULES:-deploy/multidc/rules.yaml}
WORK=${LOGS:-$PWD/.cache/run-cluster}
INTERVAL=${INTERVAL:-500ms}
DOMAIN=$(sed -n 's/^domain:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}.*/\1/p' "$RULES" | head -n1)
DOMAIN=${DOMAIN:-default}
# A fresh machine: install what is missing when we may (root, apt-get).
missing=()
for pkg in redis-server:redis-server redis-cli:redis-tools curl:curl; do
  command -v "${pkg%%:*}" >/dev/null || missing+=("${pkg#*:}")
done
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "run-cluster: installing ${missing[*]} (apt-get)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
for tool in redis-server redis-cli curl; do
  command -v $tool >/dev/null || { echo "run-cluster: $tool is needed (apt-get install -y redis-server redis-tools curl)" >&2; exit 1; }
done
O=${PORT_OFFSET:-0}
# A previous run whose cleanup did not happen (its shell was SIGKILLed)
# leaves processes behind: stop those still running from $WORK.
if [ -f "$WORK/pids" ]; then
  while read -r _ p; do
    case $(readlink "/proc/$p/cwd" 2>/dev/null; tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) in
      *"$WORK"* | "$PWD"*"$BIN"/* | "$PWD"*redis-server*) kill "$p" 2>/dev/null || true ;;
    esac
  done <"$WORK/pids"
fi
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
export WEIR_SERVER=http://127.0.0.1:$((8070 + O)) WEIR_TOKEN=$TOKEN WEIR_DOMAIN=$DOMAIN PATH=\$PATH:$PWD/$BIN
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
# The ports, for chaos.sh (it sources $WORK/topology).
ETCD_PORTS="$((23790 + O)) $((23791 + O)) $((23792 + O))"
KAFKA_PORTS="$((19092 + O)) $((19093 + O)) $((19094 + O))"
CLUSTER_PORTS="$((7001 + O)) $((7002 + O)) $((7003 + O)) $((7004 + O)) $((7005 + O)) $((7006 + O))"
REDIS_B_PORT=$((6392 + O))
COORD_PORTS="$((8070 + O)) $((8071 + O))"
HTTP_PORTS="$((8081 + O)) $((8082 + O)) $((8083 + O)) $((8084 + O))"
GRPC_PORTS="$((9191 + O)) $((9192 + O)) $((9193 + O)) $((9194 + O))"
LIMITERS="limiter-a1 limiter-a2 limiter-b1 limiter-b2"
declare -p ETCD_PORTS KAFKA_PORTS CLUSTER_PORTS REDIS_B_PORT COORD_PORTS HTTP_PORTS GRPC_PORTS LIMITERS >"$WORK/topology"
join() { local IFS=,; echo "$*"; }

# etcd: three members.
initial=m0=http://127.0.0.1:$((23800 + O)),m1=http://127.0.0.1:$((23801 + O)),m2=http://127.0.0.1:$((23802 + O))
ETCD=$(join $(for i in 0 1 2; do echo http://127.0.0.1:$((23790 + O + i)); done))
for i in 0 1 2; do
  client=127.0.0.1:$((23790 + O + i)) peer=127.0.0.1:$((23800 + O + i))
  if command -v etcd >/dev/null 2>&1; then
    spawn etcd-$i etcd --name m$i --data-dir "$WORK/etcd-$i" \
      --listen-client-urls http://$client --advertise-client-urls http://$client \
      --listen-peer-urls http://$peer --initial-advertise-peer-urls http://$peer \
      --initial-cluster $initial --initial-cluster-token weir-run-cluster --initial-cluster-state new \
      --heartbeat-interval 50 --election-timeout 500
  else
    spawn etcd-$i "$BIN/weirdev" etcd --name m$i --dir "$WORK/etcd-$i" \
      --client $client --peer $peer --initial-cluster $initial
  fi
done
for i in 0 1 2; do wait_http http://127.0.0.1:$((23790 + O + i))/health "etcd member m$i"; done

# Kafka: three brokers, the usage topic in 6 partitions.
KAFKA=$(join $(for p in $KAFKA_PORTS; do echo 127.0.0.1:$p; done))
spawn kafka "$BIN/weirdev" kafka --addr 127.0.0.1:$((19092 + O)) --brokers 3 --partitions 6 --topics weir.usage
for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/$((19094 + O))) 2>/dev/null && break; sleep 0.1; done

# Redis: a cluster for DC a, one server for DC b.
for port in $CLUSTER_PORTS; do
  mkdir -p "$WORK/redis-$port"
  spawn redis-$port redis-server --port $port --bind 127.0.0.1 --dir "$WORK/redis-$port" --save '' --appendonly no --hz 100 \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 1000 \
    --cluster-require-full-coverage no --cluster-replica-validity-factor 0
done
spawn redis-$REDIS_B_PORT redis-server --port $REDIS_B_PORT --bind 127.0.0.1 --save '' --appendonly no --hz 100
for port in $CLUSTER_PORTS $REDIS_B_PORT; do
  for _ in $(seq 1 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create $(for p in $CLUSTER_PORTS; do echo 127.0.0.1:$p; done) \
  --cluster-replicas 1 --cluster-yes >"$WORK/redis-cluster-create.log" 2>&1
for _ in $(seq 1 100); do
  redis-cli -p $((7001 + O)) cluster info 2>/dev/null | grep -q cluster_state:ok && break
  sleep 0.1
done

for n in 1 2; do
  spawn coordinator-$n "$BIN/coordinator" --etcd $ETCD --kafka $KAFKA --dcs a,b --rules "$RULES" \
    --interval $INTERVAL --admin-addr 127.0.0.1:$((8069 + O + n)) --default-domain "$DOMAIN" --name coordinator-$n \
    --admin-token-file "$WORK/tokens" --log-format text
done
wait_http http://127.0.0.1:$((8070 + O))/healthz coordinator-1
wait_http http://127.0.0.1:$((8071 + O))/healthz coordinator-2

i=0
for dc in a b; do
  if [ $dc = a ]; then redis=$(join 127.0.0.1:$((7001 + O)) 127.0.0.1:$((7002 + O)) 127.0.0.1:$((7003 + O))); else redis=127.0.0.1:$REDIS_B_PORT; fi
  for n in 1 2; do
    spawn limiter-$dc$n "$BIN/limiter" --dc $dc --dcs a,b --instance $dc-$n --redis $redis \
      --http-addr 127.0.0.1:$((8081 + O + i)) --grpc-addr 127.0.0.1:$((9191 + O + i)) \
      --etcd $ETCD --kafka $KAFKA --report-interval $INTERVAL --log-format text
    i=$((i + 1))
  done
done
for port in $HTTP_PORTS; do wait_http http://127.0.0.1:$port/readyz "limiter on :$port"; done

cat <<MSG
Weir's production topology is running on loopback (rules of domain $DOMAIN), logs in $WORK
  etcd          $ETCD
  Kafka         $KAFKA (weir.usage: 6 partitions)
  coordinators  http://127.0.0.1:$((8070 + O))  http://127.0.0.1:$((8071 + O))
  DC a (Redis Cluster 127.0.0.1:$((7001 + O))-$((7006 + O)))  HTTP :$((8081 + O)) :$((8082 + O))  gRPC 127.0.0.1:$((9191 + O)) 127.0.0.1:$((9192 + O))
  DC b (Redis 127.0.0.1:$REDIS_B_PORT)               HTTP :$((8083 + O)) :$((8084 + O))  gRPC 127.0.0.1:$((9193 + O)) 127.0.0.1:$((9194 + O))
Try:
  curl -s localhost:$((8081 + O))/v1/check -d '{"attributes":{"tenant":"acme"}}'
  . $WORK/env && weirctl shares get tenant-daily
  scripts/chaos.sh                       # kills and restarts each kind of process while traffic runs
Ctrl-C stops everything.
MSG
touch "$WORK/ready"
wait
