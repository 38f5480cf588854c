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
# `bench.sh shards`: also a throwaway Redis Cluster of three masters (no replicas) formed
# with `redis-cli --cluster create`, for one queue on one node beside the same queue
# sharded over the cluster (docs/cluster.md).
extra=()
if [ "${1:-}" = "shards" ]; then
  cdir=$(mktemp -d)
  cpids=()
  seeds=()
  addrs=()
  for _ in 1 2 3; do
    # A free port whose cluster bus port (+10000) is free too.
    cport=$(python3 -c '
import socket
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]
    if p > 55000: s.close(); continue
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", p + 10000)); b.close(); s.close(); print(p); break
    except OSError:
        s.close(); b.close()
')
    mkdir -p "$cdir/$cport"
    redis-server --port "$cport" --bind 127.0.0.1 --save "" --appendonly no --dir "$cdir/$cport" \
      --cluster-enabled yes --cluster-config-file nodes.conf >"$cdir/$cport/log" 2>&1 &
    cpids+=($!)
    until redis-cli -p "$cport" ping >/dev/null 2>&1; do sleep 0.05; done
    seeds+=("redis://127.0.0.1:$cport")
    addrs+=("127.0.0.1:$cport")
  done
  trap 'kill ${pid:-} "${cpids[@]}" 2>/dev/null; rm -rf "${dir:-}" "$cdir"' EXIT
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$cdir/create.log"
  for a in "${addrs[@]}"; do
    until redis-cli -p "${a##*:}" cluster info | grep -q cluster_state:ok; do sleep 0.05; done
  done
  extra=(--cluster-seeds "$(IFS=,; echo "${seeds[*]}")")
fi
# Wall-clock figures (SLOWLOG, latencies) count the time Redis waits for a CPU: the load
# average says how much other work the machine had.
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
target/release/delayq bench "$@" "${extra[@]}"
