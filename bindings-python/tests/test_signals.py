"""Ctrl-C interrupts a blocking take promptly."""

from __future__ import annotations

import signal
import subprocess
import sys
import time


def test_ctrl_c_interrupts_a_take_without_timeout(url: str, name: str) -> None:
    script = (
        "import delayq, sys\n"
        f"q = delayq.Client({url!r}).delayed_queue({name!r})\n"
        "print('waiting', flush=True)\n"
        "try:\n"
        "    q.take()\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
        "    sys.exit(0)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "waiting"
    time.sleep(0.2)  # let take() reach the server; there is no event to await from outside
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    line = proc.stdout.readline().strip()
    elapsed = time.monotonic() - sent
    proc.wait(5)
    assert line == "interrupted"
    # The wait wakes every 50 ms to check for signals; allow for a loaded machine.
    assert elapsed < 1.0, f"KeyboardInterrupt after {elapsed:.3f} s"
    print(f"KeyboardInterrupt arrived {elapsed * 1000:.0f} ms after SIGINT")
