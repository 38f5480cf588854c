#!/usr/bin/env bash
# Installs Debian's redis-server, redis-tools and redis-sentinel when one is missing (core's
# Sentinel tests need redis-sentinel before the fault suite runs). Tests start their own
# servers on free loopback ports; this never starts or touches a server on 6379 or 26379.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1 \
  && command -v redis-sentinel >/dev/null 2>&1; then
  exit 0
fi
echo "redis-server, redis-benchmark or redis-sentinel not found: installing Debian's packages" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq redis-server redis-tools redis-sentinel >/dev/null
# The packages may start system services on 6379 and 26379; they are not ours, and we
# leave them alone.
command -v redis-server >/dev/null
command -v redis-sentinel >/dev/null
