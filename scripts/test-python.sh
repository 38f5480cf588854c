#!/usr/bin/env bash
# The Python binding: builds and installs it into a virtualenv with pip (maturin is the
# PEP 517 backend, fetched from PyPI), checks the .pyi stub against the native module
# (mypy stubtest), type-checks the examples with mypy --strict, lints with ruff, and runs
# the pytest suite against redis-servers it starts itself.
#
# The tests use a dev-profile build (much faster than the release build with LTO that a
# plain `pip install ./bindings-python` makes); set MATURIN_PEP517_ARGS= to test a release
# build instead.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
bash scripts/ensure-redis.sh
VENV="$ROOT/bindings-python/.venv"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip >/dev/null
export MATURIN_PEP517_ARGS="${MATURIN_PEP517_ARGS---profile dev}"
"$VENV/bin/pip" install -q --force-reinstall --no-deps "./bindings-python"
"$VENV/bin/pip" install -q "pytest>=7" "mypy>=1.8" "redis>=5" ruff
cargo build -q -p delayq-cli
target="${CARGO_TARGET_DIR:-$ROOT/target}"
export DELAYQ_CLI="$target/debug/delayq"
"$VENV/bin/ruff" check bindings-python/python bindings-python/tests bindings-python/bench examples/python \
  tests/interop/agents/agent.py
"$VENV/bin/python" -m mypy.stubtest delayq._delayq
"$VENV/bin/mypy" --strict examples/python
cd bindings-python
"$VENV/bin/pytest" -q
