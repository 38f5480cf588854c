"""The asyncio client: every call awaitable, cancellation leaves nothing half-done."""

from __future__ import annotations

import asyncio

import delayq
import delayq.asyncio


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_async_calls(url: str, name: str) -> None:
    async def main() -> None:
        async with await delayq.asyncio.Client.connect(url) as client:
            q = client.delayed_queue(name)
            await q.offer_all([(b"b", 3600), (b"c", 3600)])
            assert await q.size() == 2
            assert await q.contains(b"b")
            assert await q.remove(b"b")
            assert await q.read_all() == [b"c"]
            await q.clear()
            due = await q.offer(b"a", 0.1)
            assert due > 0
            assert await q.take(5) == b"a"
            assert await q.poll() is None
            assert (await q.stats()).delayed == 0
            assert await client.server_time_ms() > 0

    run(main())


def test_a_cancelled_take_loses_nothing(url: str, name: str) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.delayed_queue(name)
            for _ in range(10):
                task = asyncio.ensure_future(q.take())
                await asyncio.sleep(0.02)
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
            await q.offer(b"kept", 0)
            assert await q.take(5) == b"kept"
            assert await q.poll() is None

    run(main())


def test_async_iteration(url: str, name: str) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.delayed_queue(name)
            await q.offer_all([(b"1", 0), (b"2", 0.1)])
            got = [v async for v in q.iter(timeout=1)]
            assert sorted(got) == [b"1", b"2"]

    run(main())


def test_many_concurrent_offers_on_one_loop(url: str, name: str) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.delayed_queue(name)
            await asyncio.gather(*(q.offer(str(i), 0) for i in range(500)))
            got = [v async for v in q.iter(timeout=2)]
            assert sorted(got) == sorted(str(i).encode() for i in range(500))

    run(main())


def test_plain_import_makes_delayq_asyncio_available() -> None:
    # A fresh interpreter: this suite's own `import delayq.asyncio` would hide the bug.
    import subprocess
    import sys

    code = (
        "import delayq, asyncio, sys\n"
        "assert delayq.asyncio.Client is not None\n"
        "assert delayq.asyncio is sys.modules['delayq.asyncio']\n"
        "assert asyncio is sys.modules['asyncio'] and hasattr(asyncio, 'run')\n"
        "from delayq import *\n"
        "assert asyncio is sys.modules['asyncio']\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
