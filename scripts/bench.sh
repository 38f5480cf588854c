#!/usr/bin/env bash
# Runs `delayq bench` (release build) against a throwaway redis-server on a free port,
# or against REDIS_URL when set. Extra arguments go to `delayq bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
cargo build -q --release -p delayq-cli
if [ -z "${REDIS_URL:-}" ]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  dir=$(mktemp -d)
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" >"$dir/log" 2>&1 &
  pid=$!
  trap 'kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
  export REDIS_URL="redis://127.0.0.1:$port"
fi
# Wall-clock figures (SLOWLOG, latencies) count the time Redis waits for a CPU: the load
# average says how much other work the machine had.
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
target/release/delayq bench "$@"
