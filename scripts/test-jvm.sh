#!/usr/bin/env bash
# Tests of the JVM binding: builds the native library and the Kotlin bindings (cargo +
# uniffi-bindgen, run by Maven), runs the JUnit 5 tests (Kotlin and Java) against
# redis-server processes they start themselves, packages the jar, then compiles and runs
# the plain-Java example against it. Needs Java 17+, Maven, cargo, redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v redis-server >/dev/null || bash scripts/ensure-redis.sh
command -v mvn >/dev/null || { apt-get update -qq && apt-get install -y -qq maven; }
# The tests use a dev-profile native library: it reuses what the earlier stages compiled,
# where a release build (LTO) alone took 8 minutes on 2 cores. DELAYQ_CARGO_PROFILE=release
# tests the release build.
export DELAYQ_CARGO_PROFILE="${DELAYQ_CARGO_PROFILE:-dev}"

# -q hides Maven's progress; Surefire's "Tests run: N, Failures: ..." summary is kept.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! mvn -B -f bindings-jvm/pom.xml verify 2>&1 | tee "$log" | grep -E '^\[(INFO|WARNING|ERROR)\] (Tests run:|Tests in error|Failures:|BUILD|.*FAIL)|^\[ERROR\]|Compiling|Finished'; then
  :
fi
if ! grep -q 'BUILD SUCCESS' "$log"; then
  tail -80 "$log"
  echo "JVM binding: maven build failed" >&2
  exit 1
fi
grep -E '^\[(INFO|WARNING|ERROR)\] Tests run: [0-9]+, Failures: [0-9]+, Errors: [0-9]+, Skipped: [0-9]+$' "$log" | tail -1

# JUnit 5 silently skips a test method that returns a value (a Kotlin `fun t() = use { ... }`
# whose block ends in an expression): every test function must have run.
python3 - <<'PY'
import glob, html, os, re, sys
missing = []
for f in sorted(glob.glob("bindings-jvm/src/test/kotlin/dev/delayq/*Test.kt")):
    cls = os.path.basename(f)[:-3]
    names = re.findall(r"@(?:Test|ParameterizedTest)[^\n]*\n(?:\s*@[^\n]*\n)*\s*fun `([^`]*)`", open(f).read())
    report = f"bindings-jvm/target/surefire-reports/TEST-dev.delayq.{cls}.xml"
    ran = set(re.findall(r'testcase name="([^"(\[]*)', open(report).read())) if os.path.exists(report) else set()
    missing += [f"{cls}: {n}" for n in names if n not in {html.unescape(r).strip() for r in ran}]
if missing:
    sys.exit("JVM tests that never ran (return Unit from them):\n  " + "\n  ".join(missing))
PY

bash examples/jvm/run.sh
