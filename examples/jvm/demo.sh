#!/usr/bin/env bash
# Used by scripts/demo.sh: `demo.sh classpath WORKDIR` builds the jar if missing, compiles
# the demo's Java classes into WORKDIR/classes and prints the classpath to run them with.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pom="$here/../../bindings-jvm/pom.xml"
jar="$here/../../bindings-jvm/target/delayq-0.1.0.jar"
work="$2"
[ -f "$jar" ] || mvn -B -q -f "$pom" package -DskipTests >&2
mvn -B -q -f "$pom" dependency:build-classpath -Dmdep.includeScope=runtime -Dmdep.outputFile="$work/cp.txt" >&2
cp="$jar:$(cat "$work/cp.txt")"
javac -d "$work/classes" -cp "$cp" "$here/OrderProducer.java" "$here/OrderConsumer.java" >&2
echo "$work/classes:$cp"
