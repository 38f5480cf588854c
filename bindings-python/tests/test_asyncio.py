"""The asyncio client: every call awaitable, cancellation leaves nothing half-done."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

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


def test_asyncio_close_with_a_deadline_is_the_graceful_close(url: str, name: str) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.reliable_queue(name, visibility_timeout=60)
            await q.offer_all([(str(i), 0) for i in range(3)])
            started, release = asyncio.Event(), asyncio.Event()
            handled: list[str] = []

            async def handler(d: delayq.asyncio.Delivery) -> None:
                started.set()
                await release.wait()
                handled.append(d.id)

            consumer = asyncio.ensure_future(q.consume(handler, concurrency=1))
            await asyncio.wait_for(started.wait(), 10)
            closer = asyncio.ensure_future(q.close(deadline=20))
            done, _ = await asyncio.wait([closer], timeout=0.3)
            assert not done, "close(deadline=...) waits for the running handler"
            release.set()
            assert await asyncio.wait_for(closer, 30) is None  # type: ignore[func-returns-value]
            await asyncio.wait_for(consumer, 10)
            with pytest.raises(delayq.ClosedError):
                await q.offer(b"late", 0)

            # The handled messages were acked; the others went back untouched.
            assert len(handled) >= 1
            other = client.reliable_queue(name)
            assert (await other.stats()).in_flight == 0
            left: list[str] = []
            while len(left) < 3 - len(handled) and (d := await other.receive(10)) is not None:
                assert d.attempt == 1
                left.append(d.id)
                assert await d.ack()
            assert len(left) == 3 - len(handled)
            assert not set(handled) & set(left)
            assert await other.receive(0.2) is None

    run(main())


def test_asyncio_close_takes_an_optional_deadline(url: str, name: str) -> None:
    # Without a deadline the handle closes at once, when called: outside a running loop too.
    client = delayq.asyncio.Client(url)
    first = client.reliable_queue(name)
    assert isinstance(first.close(), Awaitable)

    async def closed(q: delayq.asyncio.ReliableQueue) -> bool:
        try:
            await q.stats()
        except delayq.ClosedError:
            return True
        return False

    async def main() -> None:
        assert await closed(first)
        assert await first.close() is None  # type: ignore[func-returns-value]
        assert await first.close(deadline=1) is None  # type: ignore[func-returns-value]
        closes: list[Callable[[delayq.asyncio.ReliableQueue], Awaitable[None]]] = [
            lambda q: q.close(),
            lambda q: q.close(deadline=None),
            lambda q: q.close(deadline=5),
            lambda q: q.close(deadline=timedelta(seconds=0.5)),
            lambda q: q.aclose(deadline=5),
        ]
        for close in closes:
            q = client.reliable_queue(name)
            await q.offer(b"x", 3600)
            assert await close(q) is None  # type: ignore[func-returns-value]
            assert await closed(q)

        # Without await, close() still closes at once; close(deadline=...) waits for it.
        q = client.reliable_queue(name)
        q.close()
        assert await closed(q)
        q = client.reliable_queue(name)
        graceful = q.close(deadline=5)
        assert not await closed(q)
        await graceful
        assert await closed(q)

        # A bad deadline is refused, and the handle stays open.
        q = client.reliable_queue(name)
        with pytest.raises(delayq.InvalidArgument):
            await q.close(deadline=-1)
        with pytest.raises(delayq.InvalidArgument):
            await q.close(deadline="5")  # type: ignore[arg-type]
        assert not await closed(q)
        assert (await q.stats()).delayed == len(closes)
        q.close()

    run(main())
    client.close()
