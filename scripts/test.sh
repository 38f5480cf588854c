#!/usr/bin/env bash
# Runs every test of delayq: Rust core and CLI, then each binding, then the
# cross-language interop tests. Installs what it needs (Redis from Debian, maturin from
# PyPI, napi-rs from npm, Maven artifacts). Tests start their own redis-server processes
# on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh

step() { printf '\n==> %s (at %d s)\n' "$*" "$SECONDS"; }

step "Rust: core and CLI"
cargo test --workspace --exclude delayq-python --exclude delayq-node --exclude delayq-jvm --exclude delayq-serve 2>&1

# Each suite starts its own servers on free loopback ports, so any of them may also be run
# alone (bash scripts/test-serve.sh) or beside another.
for part in serve faults python node jvm interop; do
  if [ -f "scripts/test-$part.sh" ]; then
    step "$part"
    bash "scripts/test-$part.sh"
  fi
done
step "all passed"
