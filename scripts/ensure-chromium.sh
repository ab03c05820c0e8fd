#!/usr/bin/env bash
# Makes sure Debian's chromium is installed for the console's browser test
# (internal/control/console): finds it, or installs the package when
# running as root with apt-get. Never fails the build by itself outside CI:
# without chromium the browser test skips loudly.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || [ -n "${WEIR_CHROMIUM:-}" ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: installing chromium (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  command -v chromium >/dev/null && exit 0
fi
if [ "${CI:-}" = true ]; then
  echo "ensure-chromium: chromium is missing and could not be installed" >&2
  exit 1
fi
echo "ensure-chromium: !!! chromium not found; the console's browser test will be SKIPPED (apt-get install -y chromium)" >&2
