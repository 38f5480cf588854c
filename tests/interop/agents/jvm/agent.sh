#!/usr/bin/env bash
# The JVM interop agent: `agent.sh --build` compiles Agent.java against the delayq jar (built
# if missing); `agent.sh ARGS...` runs it (see ../README.md).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../../.."
pom="$root/bindings-jvm/pom.xml"
jar="$root/bindings-jvm/target/delayq-0.1.0.jar"
classes="$root/target/interop-jvm-agent"
if [ "${1:-}" = "--build" ]; then
  [ -f "$jar" ] || mvn -B -q -f "$pom" package -DskipTests
  mkdir -p "$classes"
  mvn -B -q -f "$pom" dependency:build-classpath -Dmdep.includeScope=runtime -Dmdep.outputFile="$classes/cp.txt"
  javac -d "$classes" -cp "$jar:$(cat "$classes/cp.txt")" "$here/Agent.java"
  exit 0
fi
exec java -cp "$classes:$jar:$(cat "$classes/cp.txt")" Agent "$@"
