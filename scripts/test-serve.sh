#!/usr/bin/env bash
# `delayq serve` (serve/, docs/serve.md): the HTTP API and the webhooks against
# redis-servers and test HTTP servers the tests start on free loopback ports, and the
# dashboard end to end in headless Chromium. Installs what it needs, once:
#   - redis-server (scripts/ensure-redis.sh) and Debian's chromium (apt-get), when missing;
#   - playwright-core from npm into serve/tests/browser/node_modules (gitignored), from the
#     committed lock; no browser download (the test uses /usr/bin/chromium, or $CHROMIUM).
# Nothing listens on a fixed port, so this suite can run beside the others.
#
#   scripts/test-serve.sh             every serve test
#   scripts/test-serve.sh webhook     only the tests whose name contains "webhook"
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  echo "chromium not found: installing Debian's chromium" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq chromium >/dev/null
fi
if [ ! -d serve/tests/browser/node_modules/playwright-core ]; then
  (cd serve/tests/browser && npm ci --no-audit --no-fund)
fi
CHROMIUM="$CHROMIUM" DELAYQ_REQUIRE_BROWSER=1 cargo test -p delayq-serve -- "$@"
echo "dashboard screenshot: ${CARGO_TARGET_DIR:-target}/serve-dashboard.png"
