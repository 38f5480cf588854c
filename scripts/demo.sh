#!/usr/bin/env bash
# The demo: producers in Python, Node.js and Java offer orders with delays into one
# delayed queue; consumers in Rust, Python, Node.js and Java take them as they come due
# and print each with its language of origin and how late it was. Ends with a summary.
# Uses REDIS_URL when set; otherwise starts a throwaway redis-server on a free port.
# On a fresh machine the first run builds the bindings (a few minutes).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
bash scripts/ensure-redis.sh

say() { printf '%s\n' "$*" >&2; }
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "${redis_pid:-}" ] && kill "$redis_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

say "building what the demo needs (first run: a few minutes)..."
cargo build -q -p delayq-cli -p delayq-examples
PY="$ROOT/bindings-python/.venv/bin/python"
if ! { [ -x "$PY" ] && "$PY" -c 'import delayq' 2>/dev/null; }; then
  [ -x "$PY" ] || python3 -m venv "$ROOT/bindings-python/.venv"
  "$ROOT/bindings-python/.venv/bin/pip" install -q ./bindings-python
fi
if ! node -e "require('./bindings-node/native.js')" 2>/dev/null; then
  (cd bindings-node && npm install --no-audit --no-fund --silent && npm run --silent build:debug >/dev/null)
fi
JAVA_CP=""
if [ -f examples/jvm/demo.sh ]; then
  JAVA_CP=$(bash examples/jvm/demo.sh classpath "$work")
fi

if [ -z "${REDIS_URL:-}" ]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
  redis_pid=$!
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
  export REDIS_URL="redis://127.0.0.1:$port"
  say "started a throwaway redis-server on 127.0.0.1:$port"
fi

queue="demo-orders-$$"
per=15
say "consumers: Rust, Python, Node.js${JAVA_CP:+, Java}; producers: Python, Node.js${JAVA_CP:+, Java} ($per orders each)"
# Consumers first, all competing for the same queue; each stops after 4 idle seconds.
target/debug/consumer "$queue" 1000 4 | tee "$work/out-rust" &
pids+=($!)
"$PY" examples/python/consumer.py "$queue" 1000 4 | tee "$work/out-python" &
pids+=($!)
node examples/node/consumer.js "$queue" 1000 4 | tee "$work/out-node" &
pids+=($!)
if [ -n "$JAVA_CP" ]; then
  java -Dslf4j.internal.verbosity=ERROR -cp "$JAVA_CP" OrderConsumer "$REDIS_URL" "$queue" 1000 4 | tee "$work/out-java" &
  pids+=($!)
fi

producers=()
"$PY" examples/python/producer.py "$queue" "$per" >/dev/null &
producers+=($!)
node examples/node/producer.js "$queue" "$per" >/dev/null &
producers+=($!)
sent=$((2 * per))
if [ -n "$JAVA_CP" ]; then
  java -Dslf4j.internal.verbosity=ERROR -cp "$JAVA_CP" OrderProducer "$REDIS_URL" "$queue" "$per" >/dev/null &
  producers+=($!)
  sent=$((sent + per))
fi
wait "${producers[@]}"
wait "${pids[@]}"
pids=()

cat "$work"/out-* | awk -v sent="$sent" '
  / order / { id=$4; n[id]++; recv++; late=$(NF-2)+0; if (late > worst) worst=late }
  END {
    dup=0; for (k in n) if (n[k] > 1) dup += n[k]-1
    uniq=0; for (k in n) uniq++
    printf "summary: sent %d, received %d, duplicates %d, lost %d, worst lateness %d ms\n", sent, recv, dup, sent-uniq, worst
    exit (dup > 0 || sent != uniq)
  }'
