"""A process forked after a blocking call shares that call's socket with its parent (a
blocking call writes and reads over a connection of its thread's own): the child must open
its own, or each side would read replies meant for the other."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import os, sys, time, warnings, delayq

    warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
    url, name = sys.argv[1], sys.argv[2]
    client = delayq.Client(url)
    q = client.delayed_queue(name, scheduler=False)
    q.offer(b"before", 1)  # the main thread's own connection is open now

    def offers(delay):
        # Each reply is the due time of this side's own offer, or it is a reply meant for
        # the other side (whose delay differs by hours).
        wrong = 0
        for _ in range(300):
            sent = time.time() * 1000
            due = q.offer(b"x", delay)
            if abs(due - sent - delay * 1000) > 60_000:
                wrong += 1
        return wrong

    pid = os.fork()
    if pid == 0:
        os._exit(min(offers(36_000), 100))
    wrong = offers(3_600)
    deadline = time.time() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.time() > deadline:
            os.kill(pid, 9)
            sys.exit("the child hung")
        time.sleep(0.01)
    print("parent wrong", wrong, "child wrong", os.waitstatus_to_exitcode(status))
    print("stored", q.size())
    """
)


def test_a_forked_child_opens_connections_of_its_own(url: str, name: str) -> None:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, url, name],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "parent wrong 0 child wrong 0\nstored 601\n", done.stderr
