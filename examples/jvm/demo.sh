#!/usr/bin/env bash
# Used by scripts/demo.sh: `demo.sh classpath WORKDIR` builds the jar if missing, compiles
# the demo's Java classes into WORKDIR/classes and prints the classpath to run them with.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pom="$here/../../bindings-jvm/pom.xml"
jar="$here/../../bindings-jvm/target/delayq-0.1.0.jar"
work="$2"
# Maven's output (terminal codes even with -q) is shown only when it fails.
quiet() { "$@" >"$work/mvn.log" 2>&1 || { cat "$work/mvn.log" >&2; return 1; }; }
[ -f "$jar" ] || quiet mvn -B -q -f "$pom" package -DskipTests
quiet mvn -B -q -f "$pom" dependency:build-classpath -DincludeScope=runtime -Dmdep.outputFile="$work/cp.txt"
cp="$jar:$(cat "$work/cp.txt")"
javac -d "$work/classes" -cp "$cp" "$here/OrderProducer.java" "$here/OrderConsumer.java" >&2
echo "$work/classes:$cp"
