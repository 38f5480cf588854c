"""Ctrl-C interrupts a blocking take promptly, and the interrupted take loses nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import delayq
from conftest import RedisServer


def _a_client_is_blocked_in_blpop(redis_server: RedisServer) -> bool:
    return "cmd=blpop" in redis_server.cli("CLIENT", "LIST")


def test_ctrl_c_interrupts_a_take_without_timeout(
    url: str, name: str, redis_server: RedisServer
) -> None:
    script = (
        "import delayq, signal, sys\n"
        # Python's own Ctrl-C handler, whatever this process inherited: a child started
        # from a background job of a non-interactive shell inherits SIGINT ignored, and
        # then Python installs no handler and no KeyboardInterrupt ever comes.
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        f"q = delayq.Client({url!r}).delayed_queue({name!r})\n"
        "print('waiting', flush=True)\n"
        "try:\n"
        "    q.take()\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
        "    sys.exit(0)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    # A child that never answers is killed, so that a read below ends instead of hanging.
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
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
        watchdog.cancel()
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


# Each round starts with nothing ready and nothing waiting. The main thread then waits in
# take/receive; a helper thread sees it blocked in the server, sends SIGINT, and then makes
# a value ready, so that the value arrives while the signal is pending (or just after the
# wait was interrupted). Whichever way the round ends (the value returned, or
# KeyboardInterrupt), the value must be returned or back in the queue.
_INTERRUPTED_ROUNDS = r"""
import json, os, signal, sys, threading, time
import delayq, redis

# Python's own Ctrl-C handler, whatever this process inherited (see the test above).
signal.signal(signal.SIGINT, signal.default_int_handler)

url, name, kind, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
r = redis.Redis.from_url(url)
client = delayq.Client(url)
if kind == "take":
    q = client.delayed_queue(name)
    command = "blpop"
    def wait():
        return q.take(2)
    def ready(i):
        r.rpush(name, str(i))
    def leftover():
        return q.poll()
else:
    q = client.reliable_queue(name, visibility_timeout=600)
    command = "xreadgroup"
    def wait():
        d = q.receive(2)
        return None if d is None else (d.ack(), d.payload)[1]
    def ready(i):
        q.offer(str(i), 0)
    def leftover():
        return wait() if q.stats().ready else None

def blocked():
    # Idle connections keep the name of their last command: "b" marks a blocked one.
    return sum(c["cmd"] == command and "b" in c["flags"] for c in r.client_list())

def settle(check):
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.001)

def interrupt_then_make_ready(i):
    settle(lambda: blocked() > 0)
    os.kill(os.getpid(), signal.SIGINT)
    ready(i)

got, interrupted = [], 0
for i in range(rounds):
    # An interrupted wait may still be blocked in the server (until its timeout), and
    # take what comes next; then it gives that back.
    settle(lambda: blocked() == 0)
    while (value := leftover()) is not None:
        got.append(value)
    helper = threading.Thread(target=interrupt_then_make_ready, args=(i,))
    helper.start()
    try:
        value = wait()
        got.append(value)
    except KeyboardInterrupt:
        interrupted += 1
    helper.join()
got += iter(leftover, None)
print(json.dumps({"got": [v.decode() for v in got if v is not None], "interrupted": interrupted}))
"""


@pytest.mark.parametrize("kind", ["take", "receive"])
def test_ctrl_c_as_a_value_arrives_loses_nothing(
    url: str, name: str, redis_server: RedisServer, kind: str
) -> None:
    rounds = 30
    out = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_ROUNDS, url, name, kind, str(rounds)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    got = [int(v) for v in result["got"]]
    print(f"{kind}: {len(got)} returned, {result['interrupted']} interrupted")

    assert len(set(got)) == len(got), f"delivered twice: {sorted(got)}"

    def left() -> str:
        """What is back in the queue: the values, or (reliable) the counts."""
        if kind == "take":
            return redis_server.cli("LRANGE", name, "0", "-1")
        with delayq.Client(url) as client:
            return repr(client.reliable_queue(name).stats())

    def nothing_lost() -> bool:
        if kind == "take":
            return sorted(got + [int(v) for v in left().split()]) == list(range(rounds))
        with delayq.Client(url) as client:
            s = client.reliable_queue(name).stats()
            return s.in_flight == 0 and len(got) + s.ready == rounds

    # Values given back by an interrupted call may still be on their way back.
    deadline = time.monotonic() + 10
    while not nothing_lost() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert nothing_lost(), f"returned {sorted(got)}, left {left()}"


def test_a_signal_while_a_reply_is_awaited_does_not_fail_the_call(name: str) -> None:
    """Python installs its handlers without SA_RESTART: a signal that came while a blocking
    call read its reply interrupted the read, and the call failed as a connection error
    although the command ran. The call now gets its reply; the handler runs after it."""
    server = RedisServer()  # paused below: no other test's server
    fired: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: fired.append(1))
    try:
        with delayq.Client(server.url) as client:
            q = client.delayed_queue(name, scheduler=False)
            q.size()  # this thread's own connection is open
            for call in (q.size, lambda: q.offer(b"x", 100), q.size):
                server.cli("CLIENT", "PAUSE", "500", "ALL")
                timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1))
                timer.start()
                call()  # waits out the pause; the signal comes in the middle
                timer.join()
            assert len(fired) == 3
            assert server.cli("ZCARD", f"redisson_delay_queue_timeout:{{{name}}}") == "1"
    finally:
        signal.signal(signal.SIGUSR1, previous)
        server.stop()
