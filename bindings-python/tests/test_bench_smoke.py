"""The offer benchmark still runs (a few hundred offers; its figures are not checked)."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_offer_benchmark_runs(url: str) -> None:
    bench = REPO / "bindings-python" / "bench" / "bench_offer.py"
    out = subprocess.run(
        [sys.executable, str(bench), url, "500"], capture_output=True, text=True, check=True
    )
    assert "ratio" in out.stdout
