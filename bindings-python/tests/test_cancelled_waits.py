"""asyncio takes and receives cancelled at any instant lose nothing.

Each wait is cancelled after a different tiny delay, often while the server is handing a
value over, or after the value reached the binding but before the task got it: every
value ends up either returned to the caller or back in the queue (and, for the reliable
queue, nothing stays in flight until its visibility timeout).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Optional, Union

import pytest

import delayq.asyncio

TOTAL = 200
ROUNDS = 1000
SETTLE_S = 10.0


def _wait_s(i: int) -> float:
    """0 to 1.5 ms, spread over the rounds."""
    return ((i * 7919) % 1500) / 1e6


async def _cancel_after(i: int, start: Callable[[], Awaitable[Any]]) -> Optional[Any]:
    """Starts a call as a task and cancels it after `_wait_s(i)`: on even rounds from a
    timer while the loop runs, on odd rounds after spinning with the loop blocked (so
    that a result can arrive and wait in the loop's queue). Returns what the call
    returned, or None if it was cancelled."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(start())
    wait = _wait_s(i)
    if i % 2 == 0:
        loop.call_later(wait, task.cancel)
    else:
        await asyncio.sleep(0)  # let the call start
        until = time.perf_counter() + wait
        while time.perf_counter() < until:
            pass
        task.cancel()
    await asyncio.wait([task])
    return None if task.cancelled() else task.result()


async def _settle(check: Callable[[], Awaitable[bool]]) -> bool:
    """Give-backs run in the background: polls Redis until `check` holds (True) or time is
    up (False). A cancelled call whose command was already on its way may still take a
    value after `check` held, and give it back at once: so a test asserts that `check`
    held, not what a later look at the queue shows. A value lost (a delivery left in
    flight until its 600 s lease ends) keeps `check` false for the whole wait."""
    deadline = time.monotonic() + SETTLE_S
    while not await check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def _preload(q: Union[delayq.asyncio.DelayedQueue, delayq.asyncio.ReliableQueue]) -> None:
    """Offers TOTAL values due at once and waits until all are ready."""
    await q.offer_all((str(i), 0) for i in range(TOTAL))

    async def all_ready() -> bool:
        s = await q.stats()
        return (s.delayed, s.ready) == (0, TOTAL)

    assert await _settle(all_ready)


@pytest.mark.parametrize("how", ["take", "iter"])
def test_takes_cancelled_at_any_instant_lose_nothing(url: str, name: str, how: str) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.delayed_queue(name)
            await _preload(q)

            def start() -> Awaitable[Optional[bytes]]:
                if how == "take":
                    return q.take(1)
                return q.iter(1).__anext__()

            taken: list[bytes] = []
            for i in range(ROUNDS):
                value = await _cancel_after(i, start)
                if value is not None:
                    taken.append(value)
            assert len(set(taken)) == len(taken), "a value was delivered twice"

            async def nothing_lost() -> bool:
                return len(taken) + (await q.stats()).ready == TOTAL

            assert await _settle(nothing_lost), f"taken {len(taken)}, {await q.stats()}"
            left: list[bytes] = []
            deadline = time.monotonic() + SETTLE_S
            while len(taken) + len(left) < TOTAL and time.monotonic() < deadline:
                value = await q.take(0.5)
                if value is not None:
                    left.append(value)
            assert sorted(taken + left) == sorted(str(i).encode() for i in range(TOTAL))

    asyncio.run(main())


@pytest.mark.parametrize("how", ["receive", "iter"])
def test_receives_cancelled_at_any_instant_lose_nothing(url: str, name: str, how: str) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            # A visibility timeout longer than the test: a lost delivery stays in flight.
            q = client.reliable_queue(name, visibility_timeout=600)
            await _preload(q)

            def start() -> Awaitable[Optional[delayq.asyncio.Delivery]]:
                if how == "receive":
                    return q.receive(1)
                return q.iter(1).__anext__()

            received: list[bytes] = []
            for i in range(ROUNDS):
                d = await _cancel_after(i, start)
                if d is not None:
                    assert d.attempt == 1, "a cancelled receive counted as an attempt"
                    assert await d.ack()
                    received.append(d.payload)
            assert len(set(received)) == len(received), "a message was delivered twice"

            async def nothing_lost() -> bool:
                s = await q.stats()
                return s.in_flight == 0 and len(received) + s.ready == TOTAL

            assert await _settle(nothing_lost), f"received {len(received)}, {await q.stats()}"
            assert (await q.stats()).dead == 0

    asyncio.run(main())


def test_receive_many_cancelled_at_any_instant_loses_nothing(url: str, name: str) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.reliable_queue(name, visibility_timeout=600)
            await _preload(q)
            received: list[bytes] = []
            for i in range(ROUNDS // 2):
                batch = await _cancel_after(i, lambda: q.receive_many(3, 1))
                if batch:
                    assert all(d.attempt == 1 for d in batch), "counted as an attempt"
                    assert all(await q.ack_many(batch))
                    received.extend(d.payload for d in batch)
            assert len(set(received)) == len(received), "a message was delivered twice"

            async def nothing_lost() -> bool:
                s = await q.stats()
                return s.in_flight == 0 and len(received) + s.ready == TOTAL

            assert await _settle(nothing_lost), f"received {len(received)}, {await q.stats()}"
            assert (await q.stats()).dead == 0

    asyncio.run(main())


def test_a_cancelled_consume_cancels_its_handlers_and_gives_their_messages_back(
    url: str, name: str
) -> None:
    """Cancelling an awaited ``consume`` while a handler runs: the handler task is
    cancelled, and its message (and any received ahead) is ready again at once, not after
    the 30 s lease."""

    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.reliable_queue(name, visibility_timeout=30)
            await q.offer_all([(b"a", 0), (b"b", 0), (b"c", 0)])
            started: asyncio.Queue[bytes] = asyncio.Queue()
            cancelled: list[bytes] = []

            async def handler(d: delayq.asyncio.Delivery) -> None:
                await started.put(d.payload)
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    cancelled.append(d.payload)
                    raise

            consuming = asyncio.ensure_future(q.consume(handler, concurrency=2))
            running = {await started.get(), await started.get()}
            consuming.cancel()
            with pytest.raises(asyncio.CancelledError):
                await consuming
            for _ in range(100):  # the handler tasks are cancelled on the loop
                if len(cancelled) == 2:
                    break
                await asyncio.sleep(0.01)
            assert set(cancelled) == running
            back: list[bytes] = []
            deadline = time.monotonic() + 5
            while len(back) < 3 and time.monotonic() < deadline:
                for d in await q.receive_many(10, 0.2):
                    back.append(d.payload)
                    assert await d.ack()
            assert sorted(back) == [b"a", b"b", b"c"]

    asyncio.run(main())
