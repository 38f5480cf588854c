"""The reliable queue from Python, sync and asyncio."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import delayq
import delayq.asyncio


def test_offer_receive_ack(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name)
        ident = q.offer(b"job", 0.1)
        assert q.offer(b"dup", 0, id="fixed") == "fixed"
        assert q.offer(b"dup2", 0, id="fixed") == "fixed"
        got = {}
        for _ in range(2):
            d = q.receive(5)
            assert d is not None and d.attempt == 1 and d.due_at > 0
            got[d.id] = d.payload
            assert d.ack()
        assert got == {ident: b"job", "fixed": b"dup"}
        s = q.stats()
        assert (s.delayed, s.ready, s.in_flight, s.dead) == (0, 0, 0, 0)


def test_cancel_reschedule_and_dead_letters(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name, max_attempts=2, backoff=[0.05])
        far = q.offer(b"far", 3600)
        assert q.cancel(far) and not q.cancel(far)
        later = q.offer(b"later", 3600)
        assert q.reschedule(later, 0)
        d = q.receive(5)
        assert d is not None and d.id == later
        assert d.nack()
        d = q.receive(5)
        assert d is not None and d.attempt == 2
        assert d.nack(0)
        dead = q.dead_letters(10)
        assert [(x.id, x.payload, x.attempts) for x in dead] == [(later, b"later", 2)]
        assert q.requeue_dead() == 1
        d = q.receive(5)
        assert d is not None and d.attempt == 1
        d.nack(0)
        d = q.receive(5)
        assert d is not None
        d.nack(0)
        assert q.purge_dead() == 1
        with pytest.raises(delayq.InvalidArgument):
            q.offer(b"x", 1, id="")
        with pytest.raises(delayq.InvalidArgument):
            client.reliable_queue(name, max_attempts=0)


def test_visibility_timeout_redelivers(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name, visibility_timeout=0.3)
        q.offer(b"x", 0)
        first = q.receive(5)
        assert first is not None
        second = q.receive(5)
        assert second is not None and second.id == first.id and second.attempt == 2
        assert not first.ack() and second.ack()


def test_consume_acks_and_retries(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name, backoff=[0.05])
        q.offer_all([(str(i), 0) for i in range(50)])
        seen: list[tuple[bytes, int]] = []
        lock = threading.Lock()

        def handler(d: delayq.Delivery) -> None:
            with lock:
                seen.append((d.payload, d.attempt))
                done = len({p for p, _ in seen}) == 50 and len(seen) == 55
            if int(d.payload) % 10 == 0 and d.attempt == 1:
                raise RuntimeError("first attempt fails")
            if done:
                q.close()

        q.consume(handler, concurrency=4)
        assert len({p for p, _ in seen}) == 50
        assert sorted(a for p, a in seen if int(p) % 10 == 0) == [1] * 5 + [2] * 5


def test_asyncio_consume_runs_handlers_on_the_loop_and_retries_failures(
    url: str, name: str
) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.reliable_queue(name, backoff=[0.05])
            await q.offer_all([(str(i), 0) for i in range(30)])
            loop_thread = threading.get_ident()
            seen: list[tuple[bytes, int]] = []
            threads: set[int] = set()
            done = asyncio.Event()

            async def handler(d: delayq.asyncio.Delivery) -> None:
                threads.add(threading.get_ident())
                seen.append((d.payload, d.attempt))
                if len(seen) == 33:
                    done.set()
                await asyncio.sleep(0)
                if int(d.payload) % 10 == 0 and d.attempt == 1:
                    raise RuntimeError("first attempt fails")

            task = asyncio.ensure_future(q.consume(handler, concurrency=4))
            await asyncio.wait_for(done.wait(), 20)
            await q.aclose(deadline=5)
            await asyncio.wait_for(task, 10)
            assert threads == {loop_thread}
            assert sorted({p for p, _ in seen}) == sorted(str(i).encode() for i in range(30))
            retried = sorted(p for p, a in seen if a == 2)
            assert retried == [b"0", b"10", b"20"]
            stats = await client.reliable_queue(name).stats()
            assert (stats.ready, stats.in_flight, stats.dead) == (0, 0, 0)

    asyncio.run(main())


def test_asyncio_reliable_and_consume(url: str, name: str) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.reliable_queue(name)
            await q.offer_all([(str(i), 0) for i in range(20)])
            got: list[bytes] = []

            async def handler(d: delayq.asyncio.Delivery) -> None:
                got.append(d.payload)

            task = asyncio.ensure_future(q.consume(handler, concurrency=3))
            while len(got) < 20:
                await asyncio.sleep(0.02)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            assert sorted(got) == sorted(str(i).encode() for i in range(20))
            d = await q.receive(0.1)
            assert d is None
            stats = await q.stats()
            assert stats.ready == 0

    asyncio.run(main())


def test_iter_receives_until_a_receive_times_out(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name)
        q.offer_all([(b"1", 0), (b"2", 0), (b"3", 0.2)])
        got: list[bytes] = []
        for d in q.iter(timeout=1):
            assert isinstance(d, delayq.Delivery) and d.attempt == 1, d
            got.append(d.payload)
            assert d.ack()
        assert sorted(got) == [b"1", b"2", b"3"]
        s = q.stats()
        assert (s.delayed, s.ready, s.in_flight, s.dead) == (0, 0, 0, 0), s
        it = q.iter(timeout=0.1)
        assert isinstance(it, delayq.ReceiveIter) and iter(it) is it
        assert list(it) == []
        with pytest.raises(delayq.InvalidArgument):
            q.iter(-1)  # checked at the call, as DelayedQueue.iter
        with pytest.raises(delayq.InvalidArgument):
            q.iter("1")  # type: ignore[arg-type]
        q.close()
        with pytest.raises(delayq.ClosedError):
            next(q.iter(1))


@pytest.mark.parametrize("form", ["blocking", "twin", "asyncio"])
def test_a_delay_of_none_is_zero_in_every_offer(url: str, name: str, form: str) -> None:
    """`offer(p, None)` is due at once; so is a `(p, None, ...)` item of `offer_all`."""
    offers: list[tuple[str, tuple[object, ...]]] = [
        ("offer", (b"a", None)),
        ("offer_with_outcome", (b"b", None)),
        ("offer_all", ([(b"c", None), (b"d", None, "d")],)),
        ("offer_all_with_outcome", ([[b"e", None, None, "key"]],)),
    ]

    async def on_loop(q: Any, suffix: str) -> list[object]:
        return [await getattr(q, method + suffix)(*args) for method, args in offers]

    with delayq.Client(url) as client:
        before = client.server_time_ms()
        if form == "blocking":
            q = client.reliable_queue(name)
            made = [getattr(q, method)(*args) for method, args in offers]
        elif form == "twin":
            made = asyncio.run(on_loop(client.reliable_queue(name), "_async"))
        else:

            async def flavour() -> list[object]:
                async with delayq.asyncio.Client(url) as aclient:
                    return await on_loop(aclient.reliable_queue(name), "")

            made = asyncio.run(flavour())
        outcomes = [made[1], *made[3]]
        assert all(o.created and before <= o.due_at <= client.server_time_ms() for o in outcomes)
        q = client.reliable_queue(name)
        s = q.stats()
        assert s.delayed == 0 and s.ready == 5, s
        got = q.receive_many(10, 5)
        assert sorted(d.payload for d in got) == [b"a", b"b", b"c", b"d", b"e"]
        assert all(q.ack_many(got))
