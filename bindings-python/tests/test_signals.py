"""Ctrl-C interrupts a blocking take promptly, and the interrupted take loses nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import delayq
from conftest import RedisServer


def _a_client_is_blocked_in_blpop(redis_server: RedisServer) -> bool:
    return "cmd=blpop" in redis_server.cli("CLIENT", "LIST")


def test_ctrl_c_interrupts_a_take_without_timeout(
    url: str, name: str, redis_server: RedisServer
) -> None:
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
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "waiting"
        # Wait until the take is blocked in the server (BLPOP), a condition we can see.
        deadline = time.monotonic() + 10
        while not _a_client_is_blocked_in_blpop(redis_server):
            assert time.monotonic() < deadline, "take never reached BLPOP"
            time.sleep(0.01)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        line = proc.stdout.readline().strip()
        elapsed = time.monotonic() - sent
        assert proc.wait(5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert line == "interrupted"
    # The wait wakes every 50 ms to check for signals (~100 ms expected); the bound
    # allows for a loaded machine.
    assert elapsed < 1.0, f"KeyboardInterrupt after {elapsed:.3f} s"
    print(f"KeyboardInterrupt arrived {elapsed * 1000:.0f} ms after SIGINT")
    # Nothing half-done: a value offered now is still there for the next consumer.
    with delayq.Client(url) as client:
        q = client.delayed_queue(name)
        q.offer(b"after ctrl-c", 0)
        assert q.take(5) == b"after ctrl-c"
