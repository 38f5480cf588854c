"""Exiting with delayq's work still under way: every run must end with exit code 0 and
exactly its output (CPython terminates a thread that takes the GIL while the interpreter
finalizes; a runtime thread of delayq doing so used to abort the process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

RUNS = 50
PARALLEL = 4

PROGRAMS = {
    # Sync and asyncio clients used (offer, take, receive), then left open.
    "left_open": (
        """
        import asyncio, sys, delayq

        url, name = sys.argv[1], sys.argv[2]
        client = delayq.Client(url)
        q = client.delayed_queue(name)
        q.offer(b"sync", 0)
        print(q.take(timeout=5))

        async def main():
            aclient = delayq.asyncio.Client(url)
            aq = aclient.delayed_queue(name)
            await aq.offer(b"async", 0)
            print(await aq.take(timeout=5))
            rq = aclient.reliable_queue(name + "-r")
            await rq.offer(b"reliable")
            d = await rq.receive(timeout=5)
            print(d.payload, await d.ack())
            print(sum(await asyncio.gather(*[aq.size() for _ in range(10)])))
            await rq.offer(b"consumed")
            handled = asyncio.Event()

            async def handler(d):
                print(d.payload)
                handled.set()

            asyncio.get_running_loop().create_task(rq.consume(handler))
            await handled.wait()

        asyncio.run(main())
        print("end")
        """,
        "b'sync'\nb'async'\nb'reliable' True\n0\nb'consumed'\nend\n",
    ),
    # A take still waiting at exit: a sync one in a daemon thread, an asyncio one in a
    # task left pending when asyncio.run returns, and one in a loop never closed.
    "left_waiting": (
        """
        import asyncio, sys, threading, delayq

        url, name = sys.argv[1], sys.argv[2]
        client = delayq.Client(url)
        q = client.delayed_queue(name)
        started = threading.Event()

        def wait():
            started.set()
            q.take()

        threading.Thread(target=wait, daemon=True).start()
        started.wait()

        async def main():
            aclient = delayq.asyncio.Client(url)
            aq = aclient.delayed_queue(name + "-a")
            await aq.offer(b"async", 0)
            print(await aq.take(timeout=5))
            asyncio.get_running_loop().create_task(aq.take())
            await asyncio.sleep(0.01)
            return aclient

        aclient = asyncio.run(main())
        loop = asyncio.new_event_loop()
        task = loop.create_task(aclient.delayed_queue(name + "-b").take())
        loop.run_until_complete(asyncio.sleep(0.01))
        print("end")
        """,
        "b'async'\nend\n",
    ),
    # A plain script: the main thread ends while a daemon thread blocks in take.
    "daemon_take": (
        """
        import sys, threading, delayq

        client = delayq.Client(sys.argv[1])
        q = client.delayed_queue(sys.argv[2])
        q.offer(b"one", 0)
        print(q.take(timeout=5))
        threading.Thread(target=q.take, daemon=True).start()
        print("end")
        """,
        "b'one'\nend\n",
    ),
    # The same with close() called: after use, and while takes still wait.
    "closed": (
        """
        import asyncio, sys, threading, delayq

        url, name = sys.argv[1], sys.argv[2]
        with delayq.Client(url) as client:
            q = client.delayed_queue(name)
            q.offer(b"sync", 0)
            print(q.take(timeout=5))

        waiting = delayq.Client(url)
        started = threading.Event()

        def wait():
            started.set()
            try:
                waiting.delayed_queue(name + "-w").take()
            except delayq.ClosedError:
                pass

        threading.Thread(target=wait, daemon=True).start()
        started.wait()

        async def main():
            async with delayq.asyncio.Client(url) as aclient:
                aq = aclient.delayed_queue(name)
                await aq.offer(b"async", 0)
                print(await aq.take(timeout=5))
                asyncio.get_running_loop().create_task(aq.take())
                await asyncio.sleep(0.01)

        asyncio.run(main())
        waiting.close()
        print("end")
        """,
        "b'sync'\nb'async'\nend\n",
    ),
}


def run_once(source: str, url: str, name: str, i: int) -> tuple[int, str, str]:
    out = subprocess.run(
        [sys.executable, "-c", source, url, f"{name}-{i}"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    return out.returncode, out.stdout, out.stderr


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_exit_with_work_under_way(program: str, url: str, name: str) -> None:
    source, expected = PROGRAMS[program]
    source = textwrap.dedent(source)
    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(lambda i: run_once(source, url, name, i), range(RUNS)))
    failed = [(i, r) for i, r in enumerate(results) if r != (0, expected, "")]
    assert not failed, (
        f"{len(failed)} of {RUNS} runs failed; the first (run, (code, stdout, stderr)): {failed[0]}"
    )


LEFT_ON_A_CLOSED_LOOP = """
import asyncio, sys, delayq

url, name = sys.argv[1], sys.argv[2]
sync = delayq.Client(url)


async def connect():
    return delayq.asyncio.Client(url)


loop = asyncio.new_event_loop()
client = loop.run_until_complete(connect())
q = client.delayed_queue(name)
task = loop.create_task(q.take(30))
loop.run_until_complete(asyncio.sleep(0.2))
loop.close()  # the task is left pending: it will never run again
sync.delayed_queue(name).offer(b"v1", 0)
print("offered", flush=True)
sys.stdin.readline()  # until the take got the value
print("end")
"""


def test_a_value_taken_for_a_task_left_on_a_closed_loop_goes_back_at_exit(
    redis_server: Any, name: str
) -> None:
    """A loop closed without cancelling its tasks never claims what they took: the value
    goes back to the queue when the process exits, not lost with the task."""
    child = subprocess.Popen(
        [sys.executable, "-c", LEFT_ON_A_CLOSED_LOOP, redis_server.url, name],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline() == "offered\n"
    # The take has the value once neither the delayed set nor the list holds it.
    timeout_set = f"redisson_delay_queue_timeout:{{{name}}}"
    deadline = time.monotonic() + 10
    while (redis_server.cli("LLEN", name), redis_server.cli("ZCARD", timeout_set)) != ("0", "0"):
        assert time.monotonic() < deadline, "the take never got the value"
        time.sleep(0.01)
    out, err = child.communicate("go\n", timeout=30)
    assert (child.returncode, out, err) == (0, "end\n", "")
    assert redis_server.cli("LRANGE", name, "0", "-1") == "v1"
