#!/usr/bin/env bash
# The demo: producers and consumers in several languages share one delayed queue.
# Uses REDIS_URL when set; otherwise starts a throwaway redis-server on a free port.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh

say() { printf '%s\n' "$*" >&2; }
work=$(mktemp -d)
cleanup() {
  [ -n "${redis_pid:-}" ] && kill "$redis_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

if [ -z "${REDIS_URL:-}" ]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$work/redis.log" 2>&1 &
  redis_pid=$!
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
  export REDIS_URL="redis://127.0.0.1:$port"
  say "started a throwaway redis-server on 127.0.0.1:$port"
fi

say "building the Rust CLI and examples..."
cargo build -q -p delayq-cli -p delayq-examples
bin=target/debug
queue="demo-orders-$$"

# Consumers first, competing for the same queue; each stops after 4 idle seconds.
"$bin/consumer" "$queue" 100000 4 >"$work/consumer-rust-1.out" &
c1=$!
"$bin/consumer" "$queue" 100000 4 >"$work/consumer-rust-2.out" &
c2=$!

sent=0
# Producer 1: the Rust example (delays 0 to 1.8 s).
"$bin/producer" "$queue" 20 >/dev/null
sent=$((sent + 20))
# Producer 2: the CLI, the way a shell script would.
for i in $(seq 0 14); do
  delay=$(( (i % 8) * 250 ))
  { read -r secs; read -r micros; } < <(redis-cli -u "$REDIS_URL" TIME)
  due=$(( secs * 1000 + micros / 1000 + delay ))
  "$bin/delayq" offer "$queue" "$delay" "{\"id\":\"cli-$i\",\"lang\":\"shell\",\"due\":$due}" >/dev/null
  sent=$((sent + 1))
done
say "offered $sent orders; consumers print each as it comes due"

wait "$c1" "$c2"
cat "$work"/consumer-*.out
cat "$work"/consumer-*.out | awk -v sent="$sent" '
  / order / { id=$4; n[id]++; recv++; late=$(NF-2)+0; if (late > worst) worst=late }
  END {
    dup=0; for (k in n) if (n[k] > 1) dup += n[k]-1
    uniq=0; for (k in n) uniq++
    printf "summary: sent %d, received %d, duplicates %d, lost %d, worst lateness %d ms\n", sent, recv, dup, sent-uniq, worst
  }'
