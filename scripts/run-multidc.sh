#!/usr/bin/env bash
# Runs the whole multi-DC system on this machine: `coordinator --dev` (with
# an embedded etcd on 127.0.0.1:2379 and an in-process Kafka-protocol broker
# on 127.0.0.1:9092), a standby coordinator, and three DCs a, b, c — a
# limiter each, with its own redis-server when one is installed, else the
# in-memory store. The rules of $RULES seed etcd; the limiters follow the
# rules in etcd (change them with weirctl or the admin API). Everything
# stops on Ctrl-C; nothing listens beyond loopback.
#
# Logs, the admin token and an environment file for weirctl are kept in
# $LOGS (default .cache/run-multidc), emptied when the next run starts and
# left in place when this one ends, however it ends.
#
# PORT_OFFSET (default 0) is added to every port named here, so that a
# second copy (internal/e2e/readme's test) can run beside a first.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.cache/bin}
RULES=${RULES:-deploy/multidc/rules.yaml}
WORK=${LOGS:-$PWD/.cache/run-multidc}
# The rules file's domain becomes the admin API's default domain, so that
# weirctl finds the rules without --domain.
DOMAIN=$(sed -n 's/^domain:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}.*/\1/p' "$RULES" | head -n1)
DOMAIN=${DOMAIN:-default}
OFF=${PORT_OFFSET:-0}
ADMIN1=$((8070 + OFF)) ADMIN2=$((8071 + OFF)) ETCD=$((2379 + OFF)) KAFKA=$((9092 + OFF))
# The coordinators' admin URLs: a standby forwards operators' tokens to these only.
PEERS=http://127.0.0.1:$ADMIN1,http://127.0.0.1:$ADMIN2
rm -rf "$WORK"
mkdir -p "$WORK"
pids=()
cleanup() {
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "run-multidc: stopped; logs kept in $WORK" >&2
}
trap cleanup EXIT INT TERM

mkdir -p "$BIN"
go build -o "$BIN/" ./cmd/limiter ./cmd/coordinator ./cmd/weirctl
TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
printf '%s rw operator\n' "$TOKEN" >"$WORK/tokens"
printf '%s\n' "$TOKEN" >"$WORK/token"
cat >"$WORK/env" <<ENV
export WEIR_SERVER=http://127.0.0.1:$ADMIN1 WEIR_TOKEN=$TOKEN WEIR_DOMAIN=$DOMAIN PATH=\$PATH:$PWD/$BIN
ENV
chmod 600 "$WORK/tokens" "$WORK/token" "$WORK/env"

wait_http() { # url name
  for _ in $(seq 1 100); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "run-multidc: $2 did not come up ($1); logs in $WORK" >&2
  exit 1
}

"$BIN/coordinator" --dev --dev-dir "$WORK/dev" --dev-etcd-addr 127.0.0.1:$ETCD --dev-kafka-addr 127.0.0.1:$KAFKA \
  --rules "$RULES" --admin-addr 127.0.0.1:$ADMIN1 \
  --default-domain "$DOMAIN" --name coordinator-1 --admin-token-file "$WORK/tokens" --peer-urls "$PEERS" --log-format text >"$WORK/coordinator-1.log" 2>&1 &
pids+=($!)
wait_http http://127.0.0.1:$ADMIN1/healthz coordinator-1
"$BIN/coordinator" --etcd http://127.0.0.1:$ETCD --kafka 127.0.0.1:$KAFKA --dcs a,b,c --rules "$RULES" \
  --admin-addr 127.0.0.1:$ADMIN2 --default-domain "$DOMAIN" --name coordinator-2 --admin-token-file "$WORK/tokens" --peer-urls "$PEERS" --log-format text >"$WORK/coordinator-2.log" 2>&1 &
pids+=($!)

port=0
for dc in a b c; do
  port=$((port + 1))
  store=()
  if command -v redis-server >/dev/null 2>&1; then
    redis-server --port $((6390 + OFF + port)) --bind 127.0.0.1 --save '' --appendonly no --hz 100 \
      --daemonize no >"$WORK/redis-$dc.log" 2>&1 &
    pids+=($!)
    store=(--redis 127.0.0.1:$((6390 + OFF + port)))
  else
    echo "run-multidc: redis-server not installed: DC $dc keeps its state in memory" >&2
  fi
  "$BIN/limiter" --dc $dc --dcs a,b,c "${store[@]}" \
    --http-addr 127.0.0.1:$((8080 + OFF + port)) --grpc-addr 127.0.0.1:$((9190 + OFF + port)) \
    --etcd http://127.0.0.1:$ETCD --kafka 127.0.0.1:$KAFKA --log-format text >"$WORK/limiter-$dc.log" 2>&1 &
  pids+=($!)
done
for port in 1 2 3; do wait_http http://127.0.0.1:$((8080 + OFF + port))/readyz "limiter on :$((8080 + OFF + port))"; done

cat <<MSG
Weir is running: three DCs and two coordinators (rules of domain $DOMAIN), logs in $WORK
  DC a  HTTP http://127.0.0.1:$((8081 + OFF))  gRPC 127.0.0.1:$((9191 + OFF))
  DC b  HTTP http://127.0.0.1:$((8082 + OFF))  gRPC 127.0.0.1:$((9192 + OFF))
  DC c  HTTP http://127.0.0.1:$((8083 + OFF))  gRPC 127.0.0.1:$((9193 + OFF))
  coordinators  http://127.0.0.1:$ADMIN1 (--dev: etcd 127.0.0.1:$ETCD, Kafka 127.0.0.1:$KAFKA)  http://127.0.0.1:$ADMIN2
  console       http://127.0.0.1:$ADMIN1/ui/  (sign in with the token $TOKEN; the standby's is at :$ADMIN2/ui/)
Try:
  curl -s localhost:$((8081 + OFF))/v1/check -d '{"attributes":{"tenant":"acme"}}'
  curl -s -H "Authorization: Bearer \$(cat $WORK/token)" localhost:$ADMIN1/v1/shares
  . $WORK/env                            # WEIR_SERVER, WEIR_TOKEN, WEIR_DOMAIN and weirctl on PATH
  weirctl get                            # the rules, in etcd
  weirctl shares get tenant-daily
  weirctl shares pin tenant-daily a 60%
Ctrl-C stops everything.
MSG
wait -n "${pids[@]}" || true
echo "run-multidc: a process exited; stopping" >&2
