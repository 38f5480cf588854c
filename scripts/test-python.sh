#!/usr/bin/env bash
# The Python binding: builds and installs it into a virtualenv with pip (maturin is the
# PEP 517 backend, fetched from PyPI), type-checks the examples with mypy --strict, lints
# with ruff, and runs the pytest suite against redis-servers it starts itself.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
bash scripts/ensure-redis.sh
VENV="$ROOT/bindings-python/.venv"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip >/dev/null
"$VENV/bin/pip" install -q "./bindings-python[test]" ruff
cargo build -q -p delayq-cli
target="${CARGO_TARGET_DIR:-$ROOT/target}"
export DELAYQ_CLI="$target/debug/delayq"
"$VENV/bin/ruff" check bindings-python/python bindings-python/tests bindings-python/bench examples/python tests/interop/agents/agent.py
"$VENV/bin/mypy" --strict examples/python
cd bindings-python
"$VENV/bin/pytest" -q
