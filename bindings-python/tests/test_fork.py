"""A process forked after a blocking call shares that call's socket with its parent (a
blocking call writes and reads over a connection of its thread's own): the child must open
its own, or each side would read replies meant for the other."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

# Each program's way to wait for its child: the exit status, or the program ends with
# `hung` once `seconds` passed (the child is killed).
WAIT_FOR = """
def wait_for(pid, seconds, hung):
    deadline = time.time() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.time() > deadline:
            os.kill(pid, 9)
            sys.exit(hung)
        time.sleep(0.01)
"""


def run(program: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Runs `program` in a new interpreter with `args` (fork() with threads running warns)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    command = [sys.executable, "-c", program, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


PROGRAM = WAIT_FOR + textwrap.dedent(
    """
    import os, sys, time, warnings, delayq

    warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
    url, name = sys.argv[1], sys.argv[2]
    client = delayq.Client(url)
    # With its transfer task, a request of that task may be in flight at the fork: the
    # child must not wait for it (no thread of the child would ever end it).
    q = client.delayed_queue(name, scheduler=sys.argv[3] == "scheduler")
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
        wrong = offers(36_000)
        # A blocking take and receive of the parent's client return in the child too.
        taken = q.take(timeout=0.2)
        received = client.reliable_queue(name + "-rq").receive(timeout=0.2)
        if taken is not None or received is not None:
            wrong += 1
        os._exit(min(wrong, 100))
    wrong = offers(3_600)
    status = wait_for(pid, 30, "the child hung")
    print("parent wrong", wrong, "child wrong", os.waitstatus_to_exitcode(status))
    print("stored", q.size())
    """
)


@pytest.mark.parametrize("scheduler", ["scheduler", "no-scheduler"])
def test_a_forked_child_opens_connections_of_its_own(url: str, name: str, scheduler: str) -> None:
    done = run(PROGRAM, url, name, scheduler, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "parent wrong 0 child wrong 0\nstored 601\n", done.stderr


NEW_CLIENT_IN_CHILD = WAIT_FOR + textwrap.dedent(
    """
    import logging, os, sys, time, warnings, delayq, redis

    warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
    url, name = sys.argv[1], sys.argv[2]
    client = delayq.Client(url)
    q = client.delayed_queue(name, scheduler=sys.argv[3] == "scheduler")
    q.offer(b"before", 0)
    try:  # a connection error of the parent's, which no child counts
        delayq.Client("redis://127.0.0.1:1")
    except delayq.ConnectionError:
        pass
    assert delayq.metrics()["connection_errors"] > 0

    def transfer_failure_logged(mine):
        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logging.getLogger("delayq").addHandler(handler)
        redis.Redis.from_url(url).set(name + "-wrong", "a string")
        wrong = mine.delayed_queue(name + "-wrong")  # its transfer task fails
        deadline = time.time() + 10
        while time.time() < deadline:
            if any("transfer failed" in r.getMessage() for r in records):
                return True
            time.sleep(0.01)
        wrong.close()
        return False

    for round in range(5):
        pid = os.fork()
        if pid == 0:
            # The child's own client: a runtime, connections and a transfer task of its own.
            with delayq.Client(url) as mine:
                child_q = mine.delayed_queue(name + "-child")
                mine_id = mine.reliable_queue(name + "-rq").offer(b"job", 0)
                child_q.offer(b"child", 0.05)
                got = child_q.take(timeout=10)
                # ... and the parent's client, beside it.
                q.offer(b"from-child", 0)
                # Core's logs reach the child's `logging` (a thread of the child's own).
                logged = round > 0 or transfer_failure_logged(mine)
            counted = delayq.metrics()["connection_errors"] == 0
            os._exit(0 if got == b"child" and mine_id and logged and counted else 1)
        # The parent goes on with its own client meanwhile.
        for _ in range(100):
            q.offer(b"parent", 0)
        status = wait_for(pid, 30, "the child hung")
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"the child failed: {status}")
    q.offer(b"after", 0)
    print("done")
    """
)


@pytest.mark.parametrize("scheduler", ["scheduler", "no-scheduler"])
def test_a_new_client_in_a_forked_child_works_and_the_parent_goes_on(
    url: str, name: str, scheduler: str
) -> None:
    """A child forked from a process with a client makes a client of its own (a
    pre-forking server's worker): it runs on a runtime of the child's, and nothing of the
    parent's runtime is touched (its I/O driver's epoll instance is shared with the child:
    a socket registered there by the child broke the parent's driver, which aborted)."""
    done = run(NEW_CLIENT_IN_CHILD, url, name, scheduler, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("done\n"), done.stdout + done.stderr


EXIT_IN_CHILD = WAIT_FOR + textwrap.dedent(
    """
    import os, sys, threading, time, warnings, delayq

    warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
    url, name = sys.argv[1], sys.argv[2]
    client = delayq.Client(url)
    q = client.delayed_queue(name)
    # A thread of the parent waits in a blocking take while the process forks.
    waiting = threading.Thread(target=q.take, kwargs={"timeout": 10}, daemon=True)
    waiting.start()
    time.sleep(0.2)
    pid = os.fork()
    if pid == 0:
        # The child exits as any program does (its exit hook runs): that thread is not
        # here, and nothing may wait for it.
        delayq.Client(url).delayed_queue(name + "-child").offer(b"x", 0)
        sys.exit(0)
    status = wait_for(pid, 20, "the child hung at exit")
    q.offer(b"wake", 0)
    waiting.join(10)
    print("child exit", os.waitstatus_to_exitcode(status))
    """
)


def test_a_forked_child_exits_while_a_parent_thread_waits(url: str, name: str) -> None:
    """The exit hook waits for the blocking calls of this process's threads only."""
    done = run(EXIT_IN_CHILD, url, name, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "child exit 0\n", done.stdout + done.stderr


BUSY_PARENT = WAIT_FOR + textwrap.dedent(
    """
    import os, sys, threading, time, warnings, delayq

    warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
    url, name = sys.argv[1], sys.argv[2]
    client = delayq.Client(url)
    q = client.delayed_queue(name, scheduler=False)
    stop = False

    def offering():
        while not stop:
            q.offer(b"parent", 3600)

    threads = [threading.Thread(target=offering, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    for _ in range(5):
        # The parent's threads have offers in flight on this handle as it forks.
        pid = os.fork()
        if pid == 0:
            for _ in range(20):
                q.offer(b"child", 3600)
            os._exit(0)
        status = wait_for(pid, 20, "the child hung offering")
    stop = True
    for t in threads:
        t.join(10)
    print("done")
    """
)


def test_a_child_offers_on_a_handle_its_parent_was_offering_on(url: str, name: str) -> None:
    """Offers in flight on a handle when the process forks are the parent's: the child's
    offers on that handle do not wait for them."""
    done = run(BUSY_PARENT, url, name, timeout=150)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n", done.stdout + done.stderr
