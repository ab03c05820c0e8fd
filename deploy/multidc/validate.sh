#!/usr/bin/env bash
# Validates deploy/multidc/docker-compose.yml without a container engine:
# `docker-compose config -q` (Debian's docker-compose package, installed
# with apt-get when missing and running as root), plus `docker compose
# config -q` when the v2 plugin is there too, plus a check that every image
# is pinned to a tag. Run from anywhere; CI runs it as root.
set -euo pipefail
cd "$(dirname "$0")/../.."
compose_file=deploy/multidc/docker-compose.yml

if ! command -v docker-compose >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "== installing docker-compose (Debian package)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # --no-install-recommends: the validation needs no container engine.
    apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
  else
    echo "validate.sh: docker-compose is not installed and this is not root." >&2
    echo "  Install it (sudo apt-get install --no-install-recommends docker-compose)" >&2
    echo "  or run this script as root, which installs it." >&2
    exit 1
  fi
fi

echo "== $(docker-compose version | head -n 1)"
docker-compose -f "$compose_file" config -q
echo "docker-compose config: ok"

if command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
  echo "== $(docker compose version | head -n 1)"
  docker compose -f "$compose_file" config -q
  echo "docker compose config: ok"
fi

# Every image carries an explicit tag other than latest (weir:dev is the
# image the file builds).
unpinned=$(docker-compose -f "$compose_file" config |
  awk '$1 == "image:" { print $2 }' | sort -u |
  grep -Ev ':[A-Za-z0-9_][A-Za-z0-9_.-]*$|@sha256:' || true)
latest=$(docker-compose -f "$compose_file" config |
  awk '$1 == "image:" { print $2 }' | grep -E ':latest$' || true)
if [ -n "$unpinned$latest" ]; then
  echo "validate.sh: images without a pinned tag:" $unpinned $latest >&2
  exit 1
fi
echo "images pinned: ok"
