#!/usr/bin/env bash
# Cross-language interop tests (SPEC section 8), run as a sequence of steps; each step is
# one function below, listed in STEPS. Every step starts its own redis-server processes
# on free loopback ports. Works from any cwd; installs what it needs (Redis from Debian,
# Maven artifacts from Maven Central). Exits non-zero when any step fails.
set -euo pipefail
# Steps run inside `if`, where bash ignores `set -e`: each command that can fail in a step
# says `|| return 1`, and a step's status is that of its last command.
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

step() { printf '\n==> interop: %s\n' "$*"; }

# The delayq CLI, built once for every step that needs it: the default workspace
# target/ unless CARGO_TARGET_DIR says otherwise.
DELAYQ_CLI=""
build_cli() {
  if [ -n "$DELAYQ_CLI" ]; then return 0; fi
  step "build the delayq CLI"
  cargo build -p delayq-cli || return 1
  local target="${CARGO_TARGET_DIR:-target}"
  case "$target" in /*) ;; *) target="$ROOT/$target" ;; esac
  DELAYQ_CLI="$target/debug/delayq"
  [ -x "$DELAYQ_CLI" ] || { echo "delayq CLI not found at $DELAYQ_CLI" >&2; return 1; }
}

# Redisson's RDelayedQueue (Maven Central) against the delayq CLI, both directions:
# tests/interop/redisson/ (JUnit 5; Surefire prints the summary).
step_redisson() {
  build_cli || return 1
  step "Redisson compatibility (tests/interop/redisson)"
  command -v mvn >/dev/null || { echo "mvn (Maven 3.8+) is required" >&2; return 1; }
  mvn -B -ntp -f "$ROOT/tests/interop/redisson/pom.xml" test -Ddelayq.cli="$DELAYQ_CLI"
}

# The agents of tests/interop/agents/, one per language, built or installed as needed.
AGENTS=()
build_agents() {
  if [ "${#AGENTS[@]}" -gt 0 ]; then return 0; fi
  step "build the interop agents"
  local target="${CARGO_TARGET_DIR:-target}"
  case "$target" in /*) ;; *) target="$ROOT/$target" ;; esac
  cargo build -q -p delayq-interop-agent || return 1
  AGENTS+=(--agent "rust=$target/debug/delayq-interop-agent")
  local py="$ROOT/bindings-python/.venv/bin/python"
  if ! { [ -x "$py" ] && "$py" -c 'import delayq' 2>/dev/null; }; then
    [ -x "$py" ] || python3 -m venv "$ROOT/bindings-python/.venv" || return 1
    "$ROOT/bindings-python/.venv/bin/pip" install -q "$ROOT/bindings-python" || return 1
  fi
  AGENTS+=(--agent "python=$py $ROOT/tests/interop/agents/agent.py")
  if ! node -e "require('$ROOT/bindings-node/native.js')" 2>/dev/null; then
    (cd "$ROOT/bindings-node" && npm install --no-audit --no-fund && npm run build:debug) || return 1
  fi
  AGENTS+=(--agent "node=node $ROOT/tests/interop/agents/agent.js")
  bash "$ROOT/tests/interop/agents/jvm/agent.sh" --build || return 1
  AGENTS+=(--agent "jvm=bash $ROOT/tests/interop/agents/jvm/agent.sh")
}

# Every language produces into one queue while every language consumes from it; then the
# special payloads from every producer to every consumer (tests/interop/matrix.py).
step_matrix_delayed() {
  build_agents || return 1
  step "matrix: delayed queue, ${#AGENTS[@]} agent args"
  python3 "$ROOT/tests/interop/matrix.py" --kind delayed --count 2000 "${AGENTS[@]}"
}

step_matrix_reliable() {
  build_agents || return 1
  step "matrix: reliable queue"
  python3 "$ROOT/tests/interop/matrix.py" --kind reliable --count 2000 "${AGENTS[@]}"
}

# Issue 7: 10,000 reliable messages through 8 consumer processes in two languages.
step_reliable_two_languages() {
  build_agents || return 1
  step "reliable: 10,000 messages, 4 Python + 4 Node consumers"
  python3 "$ROOT/tests/interop/matrix.py" --kind reliable --count 5000 --consumers 4 --skip-bytes \
    --agent "python=$ROOT/bindings-python/.venv/bin/python $ROOT/tests/interop/agents/agent.py" \
    --agent "node=node $ROOT/tests/interop/agents/agent.js"
}

STEPS=(step_redisson step_matrix_delayed step_matrix_reliable step_reliable_two_languages)

bash "$ROOT/scripts/ensure-redis.sh"
failed=()
for s in "${STEPS[@]}"; do
  if ! "$s"; then
    failed+=("$s")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  printf '\ninterop: FAILED steps: %s\n' "${failed[*]}" >&2
  exit 1
fi
printf '\ninterop: all steps passed\n'
