#!/usr/bin/env bash
# Makes sure redis-server is installed for the tests: finds it, or installs
# Debian's package when running as root with apt-get. Never fails the build
# by itself outside CI: without redis-server the Redis tests skip loudly.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 || [ -n "${REDIS_SERVER:-}" ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-redis: installing redis-server (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  # The package may start a system instance; tests start their own.
  command -v redis-server >/dev/null && exit 0
fi
if [ "${CI:-}" = true ]; then
  echo "ensure-redis: redis-server is missing and could not be installed" >&2
  exit 1
fi
echo "ensure-redis: !!! redis-server not found; Redis tests will be SKIPPED (apt-get install -y redis-server)" >&2
