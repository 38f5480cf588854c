#!/usr/bin/env bash
# Compiles Producer.java, Consumer.java and ReliableWorker.java with plain javac against the delayq jar and its
# runtime dependencies (JNA, kotlinx-coroutines with kotlin-stdlib, slf4j-api), then runs them against a
# redis-server started here on a free port. Builds the jar first if it is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pom="$here/../../bindings-jvm/pom.xml"
jar="$here/../../bindings-jvm/target/delayq-0.1.0.jar"
[ -f "$jar" ] || mvn -B -q -f "$pom" package -DskipTests
work="$(mktemp -d)"
trap 'kill "${redis_pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

# The classpath a Java user needs: the jar plus its runtime dependencies.
mvn -B -q -f "$pom" dependency:build-classpath -DincludeScope=runtime -Dmdep.outputFile="$work/cp.txt" >/dev/null
cp="$jar:$(cat "$work/cp.txt")"
javac -d "$work/classes" -cp "$cp" "$here/Producer.java" "$here/Consumer.java" "$here/ReliableWorker.java"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$work/redis.log" 2>&1 &
redis_pid=$!
until redis-cli -p "$port" ping >/dev/null 2>&1; do kill -0 "$redis_pid"; sleep 0.05; done

url="redis://127.0.0.1:$port"
java -cp "$work/classes:$cp" Consumer "$url" orders 3 >"$work/consumer.out" &
consumer=$!
java -cp "$work/classes:$cp" Producer "$url" orders 3
wait "$consumer"
cat "$work/consumer.out"
[ "$(grep -c '^took order-' "$work/consumer.out")" = 3 ]
echo "java example: 3 offered, 3 taken"

java -cp "$work/classes:$cp" ReliableWorker "$url" worker-jobs >"$work/worker.out"
cat "$work/worker.out"
grep -q '^\[java worker\] invoice-42 attempt 2: charge card 42$' "$work/worker.out"
grep -q '^\[java worker\] done: ReliableStats(delayed=0, ready=0, inFlight=0, dead=0)$' "$work/worker.out"
echo "java reliable example: failed once, retried, acked"
