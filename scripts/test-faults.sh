#!/usr/bin/env bash
# Runs delayq's fault suite (tests/faults/, SPEC section 10; docs/faults.md): silent
# partitions, latency, a slow link and resets through Toxiproxy, Redis restarted on its
# AOF, a Sentinel failover and a Redis Cluster failover. Installs what it needs, once:
#   - redis-server, redis-tools (scripts/ensure-redis.sh) and redis-sentinel from Debian;
#   - Toxiproxy's server, `go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0`,
#     into target/faults-tools/bin (DELAYQ_FAULTS_TOOLS overrides the directory).
# Every server is started by the tests on free loopback ports; nothing touches 6379.
#
#   scripts/test-faults.sh                 install, then run every scenario
#   scripts/test-faults.sh partition       only the tests whose name contains "partition"
#   scripts/test-faults.sh --install-only  install and stop (the tests call this themselves
#                                          when a tool is missing)
# Environment: FAULTS_THREADS (scenarios run at once, default 6), RUST_LOG (delayq's logs),
# DELAYQ_FAULTS_KEEP=1 (keep the servers' directories and logs under the temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
TOOLS="${DELAYQ_FAULTS_TOOLS:-$ROOT/target/faults-tools}"
TOXIPROXY_VERSION="v2.12.0"

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
APT_UPDATED=""
apt_install() {
  if [ -z "$APT_UPDATED" ]; then
    $SUDO apt-get update -qq
    APT_UPDATED=1
  fi
  $SUDO apt-get install -y -qq "$@" >/dev/null
}

install_tools() {
  bash scripts/ensure-redis.sh
  if ! command -v redis-sentinel >/dev/null 2>&1; then
    echo "redis-sentinel not found: installing Debian's redis-sentinel" >&2
    apt_install redis-sentinel redis-tools
    # The package may start a system sentinel on 26379; it is not ours, we leave it alone.
  fi
  command -v redis-sentinel >/dev/null
  command -v redis-cli >/dev/null

  local bin="$TOOLS/bin/server" stamp="$TOOLS/bin/server.version"
  # `go install` builds report version "git"; a stamp file records which one it was.
  if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$TOXIPROXY_VERSION" ]; then
    return 0
  fi
  local go_bin
  go_bin="$(command -v go || true)"
  if [ -z "$go_bin" ] && [ -x /usr/local/go/bin/go ]; then
    go_bin=/usr/local/go/bin/go
  fi
  if [ -z "$go_bin" ]; then
    echo "Go is needed to build Toxiproxy's server (go install ...toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION); install Go 1.21 or later" >&2
    exit 1
  fi
  echo "building Toxiproxy $TOXIPROXY_VERSION into $TOOLS/bin" >&2
  mkdir -p "$TOOLS/bin"
  GOBIN="$TOOLS/bin" GOFLAGS="${GOFLAGS:--buildvcs=false}" GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" \
    "$go_bin" install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
  "$bin" -version >/dev/null
  echo "$TOXIPROXY_VERSION" >"$stamp"
}

install_tools
if [ "${1:-}" = "--install-only" ]; then
  exit 0
fi

export DELAYQ_TOXIPROXY="$TOOLS/bin/server"
REPORT="$(mktemp "${TMPDIR:-/tmp}/delayq-faults-report.XXXXXX")"
export DELAYQ_FAULTS_REPORT="$REPORT"
trap 'rm -f "$REPORT"' EXIT

filter=()
[ $# -gt 0 ] && filter=("$1")
status=0
cargo test -p delayq-faults --test suite -- --include-ignored --nocapture \
  --test-threads "${FAULTS_THREADS:-6}" "${filter[@]}" || status=$?

echo
echo "==> fault suite figures (docs/faults.md explains the fields)"
sort "$REPORT" || true
exit "$status"
