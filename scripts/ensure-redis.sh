#!/usr/bin/env bash
# Installs Debian's redis-server when it is missing. Tests start their own servers on free
# loopback ports; this never starts or touches a server on 6379.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1; then
  exit 0
fi
echo "redis-server not found: installing Debian's redis-server" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
# The package may start a system service on 6379; it is not ours, and we leave it alone.
command -v redis-server >/dev/null
