"""The reliable queue under real workloads (SPEC section 11), sync and asyncio: settings
stored with the queue, leases that extend, batch receive and ack, offers that tell
created from de-duplicated, and the graceful close."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

import delayq
import delayq.asyncio

WAIT = 5


def _until(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Polls `check` until it holds or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_settings_belong_to_the_queue_not_to_a_handle(url: str, name: str) -> None:
    with delayq.Client(url) as a, delayq.Client(url) as b, delayq.Client(url) as c:
        fresh = b.reliable_queue(name + "-fresh").settings()
        assert (fresh.visibility_timeout, fresh.max_attempts, fresh.shards) == (30.0, 5, 1)
        assert (fresh.backoff, fresh.backoff_base, fresh.backoff_max) == (None, 1.0, 600.0)
        assert (fresh.dead_letter_retention, fresh.idempotency_retention) == (None, None)

        qa = a.reliable_queue(name, visibility_timeout=40, max_attempts=2, backoff=[0.02])
        qa.offer(b"x", 0, id="job-1")
        # Another process names nothing: it uses what the first stored.
        qb = b.reliable_queue(name)
        s = qb.settings()
        assert (s.visibility_timeout, s.max_attempts, s.backoff) == (40.0, 2, [0.02])
        assert (s.backoff_base, s.backoff_max) == (None, None)
        assert "visibility_timeout=40.0" in repr(s)
        # Its nacks without a delay use the stored back-off and bury after 2 attempts.
        for attempt in (1, 2):
            d = qb.receive(WAIT)
            assert d is not None and d.attempt == attempt
            left = d.deadline - b.server_time_ms()
            assert 39_000 <= left <= 40_100, f"a lease of the stored 40 s, {left} ms left"
            assert d.nack()
        assert qb.stats().dead == 1

        # A handle that names other settings fails on its first call...
        qc = c.reliable_queue(name, visibility_timeout=30, max_attempts=2)
        with pytest.raises(delayq.InvalidArgument, match="visibility timeout is 40000 ms"):
            qc.stats()
        # ...unless it updates them, which every handle then sees.
        qd = c.reliable_queue(name, max_attempts=3, update_settings=True)
        assert qd.settings().max_attempts == 3
        assert qb.settings().max_attempts == 3
        assert qb.settings() == qd.settings()
        assert qb.settings().visibility_timeout == 40.0
        qe = c.reliable_queue(
            name,
            backoff_base=0.5,
            dead_letter_retention=3600,
            idempotency_retention=60,
            shards=1,
            update_settings=True,
        )
        s = qe.settings()
        assert (s.backoff, s.backoff_base, s.backoff_max) == (None, 0.5, 600.0)
        assert (s.dead_letter_retention, s.idempotency_retention) == (3600.0, 60.0)


def test_bad_settings_are_refused_before_redis(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        for kwargs in (
            {"max_attempts": 0},
            {"max_attempts": 256},
            {"shards": 3},
            {"shards": 0},
            {"visibility_timeout": 0},
            {"dead_letter_retention": -1},
            {"idempotency_retention": -1},
            {"backoff": [1], "backoff_base": 1},
        ):
            with pytest.raises(delayq.InvalidArgument):
                client.reliable_queue(name, **kwargs)  # type: ignore[arg-type]
        assert client.reliable_queue(name + "-none", max_attempts=None).settings().max_attempts == 5


def test_a_lease_extends_and_a_lost_one_says_so(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name, visibility_timeout=0.8, backoff=[0.02])
        q.offer(b"x", 0)
        d = q.receive(WAIT)
        assert d is not None
        before = d.deadline
        assert d.extend(3)
        assert d.deadline >= before + 2000, "the deadline moved"
        # Past the visibility timeout, inside the extended lease: nobody else gets it.
        assert q.receive(1.2) is None
        assert d.ack(), "the lease was held"
        assert q.lost_leases == 0

        # A lease shortened to nothing ends: the message comes back, and the old delivery
        # can neither extend nor ack.
        q.offer(b"y", 0)
        d = q.receive(WAIT)
        assert d is not None
        assert d.extend(0)
        again = q.receive(WAIT)
        assert again is not None and again.id == d.id and again.attempt == 2
        assert not d.extend(5)
        assert not d.ack()
        assert q.lost_leases == 1
        assert again.ack()
        with pytest.raises(delayq.InvalidArgument, match="duration must not be negative"):
            again.extend(-1)


def test_receive_many_and_ack_many(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name)
        ids = q.offer_all([(str(i), 0) for i in range(10)])
        first = q.receive_many(4, WAIT)
        assert 1 <= len(first) <= 4
        got = list(first)
        while len(got) < 10:
            more = q.receive_many(100, WAIT)
            assert more, "the rest came"
            got.extend(more)
        assert sorted(d.id for d in got) == sorted(ids)
        assert all(d.attempt == 1 and d.deadline > 0 for d in got)
        assert q.receive_many(5, 0.1) == []
        assert q.ack_many(got) == [True] * 10
        assert q.ack_many(got[:2]) == [False, False]
        assert q.lost_leases == 0, "acked here already: no lease was lost"
        assert q.ack_many([]) == []
        s = q.stats()
        assert (s.ready, s.in_flight) == (0, 0)
        for n in (0, 1001, -1):
            with pytest.raises(delayq.InvalidArgument):
                q.receive_many(n, 0.1)
        with pytest.raises(delayq.InvalidArgument):
            q.ack_many([b"not a delivery"])  # type: ignore[list-item]


def test_offer_with_outcome_and_idempotency_retention(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name)
        first = q.offer_with_outcome(b"a", 0, id="order-1")
        assert (first.id, first.created) == ("order-1", True)
        dup = q.offer_with_outcome(b"b", 0, id="order-1")
        assert (dup.id, dup.created) == ("order-1", False)
        assert repr(dup) == "OfferOutcome(id='order-1', created=False, due_at=None)"
        gen = q.offer_with_outcome(b"c")
        assert gen.created and gen.id
        outs = q.offer_all_with_outcome([(b"d", 0, "order-1"), (b"e", 0, "order-2"), (b"f", 0)])
        assert [o.created for o in outs] == [False, True, True]
        assert outs[0].id == "order-1" and outs[1].id == "order-2"
        # Without a retention, an acked id is forgotten: offering it again creates.
        got = q.receive_many(10, WAIT)
        while len(got) < 4:
            got += q.receive_many(10, WAIT)
        assert all(q.ack_many(got))
        assert q.offer_with_outcome(b"again", 3600, id="order-1").created

        kept = client.reliable_queue(name + "-kept", idempotency_retention=60)
        assert kept.offer_with_outcome(b"x", 0, id="pay-1").created
        d = kept.receive(WAIT)
        assert d is not None and d.ack()
        # A producer retrying after the consumer finished does not create a second one.
        assert not kept.offer_with_outcome(b"x", 0, id="pay-1").created
        assert kept.receive(0.2) is None


def test_consume_keeps_a_long_handler_leased_so_it_runs_once(url: str, name: str) -> None:
    with delayq.Client(url) as a, delayq.Client(url) as b:
        # Two processes consume; the handler runs 3.5 times the visibility timeout.
        qa = a.reliable_queue(name, visibility_timeout=1)
        qb = b.reliable_queue(name)
        qa.offer(b"slow", 0)
        runs: list[int] = []
        done = threading.Event()

        def handler(d: delayq.Delivery) -> None:
            runs.append(d.attempt)
            time.sleep(3.5)  # the work itself
            done.set()

        threads = [
            threading.Thread(target=q.consume, args=(handler, 2), daemon=True) for q in (qa, qb)
        ]
        for t in threads:
            t.start()
        assert done.wait(15)
        assert _until(lambda: qa.stats().in_flight == 0 and qb.stats().in_flight == 0)
        qa.close()
        qb.close()
        for t in threads:
            t.join(10)
            assert not t.is_alive()
        assert runs == [1], "the handler ran once"
        assert qa.lost_leases == 0 and qb.lost_leases == 0
        s = b.reliable_queue(name).stats()
        assert (s.ready, s.in_flight, s.delayed, s.dead) == (0, 0, 0, 0)


def _graceful_close_sync(url: str, name: str, deadline: float, finish: bool) -> None:
    """consume with one handler that blocks until released; `close(deadline)` while it
    runs. With `finish`, the handler is released during the close and is acked; else the
    deadline passes and its message goes back. Prefetched messages go back untouched."""
    with delayq.Client(url) as client:
        q = client.reliable_queue(name, visibility_timeout=60)
        q.offer_all([(str(i), 0) for i in range(5)])
        started = threading.Event()
        release = threading.Event()
        handled: list[str] = []

        def handler(d: delayq.Delivery) -> None:
            started.set()
            release.wait(30)
            handled.append(d.id)

        consumer = threading.Thread(target=q.consume, args=(handler, 1), daemon=True)
        consumer.start()
        assert started.wait(WAIT)
        closer = threading.Thread(target=q.close, kwargs={"deadline": deadline}, daemon=True)
        closer.start()
        closer.join(0.3)
        assert closer.is_alive(), "close waits for the running handler"
        if finish:
            release.set()
        closer.join(deadline + 10)
        assert not closer.is_alive()
        consumer.join(10)
        assert not consumer.is_alive(), "consume returned"
        release.set()
        with pytest.raises(delayq.ClosedError):
            q.offer(b"late", 0)

        other = client.reliable_queue(name)
        s = other.stats()
        assert s.in_flight == 0, f"nothing stays in flight: {s}"
        expected = 5 - len(handled) if finish else 5
        left = []
        while len(left) < expected and (d := other.receive(WAIT)) is not None:
            assert d.attempt == 1, "a message given back at close is not counted as an attempt"
            left.append(d.id)
            assert d.ack()
        assert len(left) == expected
        assert other.receive(0.2) is None
        if finish:
            assert len(handled) >= 1, "the running handler finished"
            assert not set(handled) & set(left), "nothing finished comes back"


def test_graceful_close_lets_the_running_handler_finish(url: str, name: str) -> None:
    _graceful_close_sync(url, name, deadline=20, finish=True)


def test_graceful_close_gives_up_a_handler_at_the_deadline(url: str, name: str) -> None:
    _graceful_close_sync(url, name, deadline=0.5, finish=False)


def test_close_without_deadline_is_immediate(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name)
        q.offer(b"x", 0)
        d = q.receive(WAIT)
        assert d is not None
        q.close()
        q.close(deadline=1)  # idempotent
        with pytest.raises(delayq.ClosedError):
            q.receive(0.1)
        # A delivery of a closed handle can still be settled.
        assert d.extend(10)
        assert d.ack()
        with pytest.raises(delayq.InvalidArgument, match="deadline must not be negative"):
            client.reliable_queue(name).close(deadline=-1)


def test_asyncio_reliable_workloads(url: str, name: str) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.reliable_queue(name, visibility_timeout=20, max_attempts=3)
            s = await q.settings()
            assert (s.visibility_timeout, s.max_attempts) == (20.0, 3)
            other = client.reliable_queue(name, visibility_timeout=21)
            with pytest.raises(delayq.InvalidArgument):
                await other.stats()

            first = await q.offer_with_outcome(b"a", 0, id="one")
            assert first.created
            assert not (await q.offer_with_outcome(b"a", 0, id="one")).created
            outs = await q.offer_all_with_outcome([(b"b", 0), (b"c", 0, "one")])
            assert [o.created for o in outs] == [True, False]

            got: list[delayq.asyncio.Delivery] = []
            while len(got) < 2:
                got += await q.receive_many(10, WAIT)
            assert all(isinstance(d, delayq.asyncio.Delivery) for d in got)
            before = got[0].deadline
            assert await got[0].extend(60)
            assert got[0].deadline > before
            assert await q.ack_many(got) == [True, True]
            assert await q.ack_many(got[:1]) == [False]
            assert q.lost_leases == 0, "acked here already: no lease was lost"
            assert await q.receive_many(3, 0.1) == []

    asyncio.run(main())


@pytest.mark.parametrize("finish", [True, False])
def test_asyncio_graceful_close(url: str, name: str, finish: bool) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.reliable_queue(name, visibility_timeout=60)
            await q.offer_all([(str(i), 0) for i in range(5)])
            started = asyncio.Event()
            release = asyncio.Event()
            handled: list[str] = []

            async def handler(d: delayq.asyncio.Delivery) -> None:
                started.set()
                await release.wait()
                handled.append(d.id)

            consumer = asyncio.ensure_future(q.consume(handler, concurrency=1))
            await asyncio.wait_for(started.wait(), WAIT)
            closer = asyncio.ensure_future(q.aclose(deadline=20 if finish else 0.5))
            done, _ = await asyncio.wait([closer], timeout=0.3)
            assert not done, "aclose waits for the running handler"
            if finish:
                release.set()
            await asyncio.wait_for(closer, 30)
            await asyncio.wait_for(consumer, 10)
            release.set()
            with pytest.raises(delayq.ClosedError):
                await q.offer(b"late", 0)

            other = client.reliable_queue(name)
            assert (await other.stats()).in_flight == 0
            expected = 5 - len(handled) if finish else 5
            left = []
            while len(left) < expected and (d := await other.receive(WAIT)) is not None:
                assert d.attempt == 1
                left.append(d.id)
                assert await d.ack()
            assert len(left) == expected
            assert await other.receive(0.2) is None
            if finish:
                assert len(handled) >= 1
                assert not set(handled) & set(left)

    asyncio.run(main())


def test_asyncio_cancelled_graceful_close_closes_at_once(url: str, name: str) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.reliable_queue(name)
            await q.offer(b"x", 0)
            release = asyncio.Event()
            started = asyncio.Event()

            async def handler(d: delayq.asyncio.Delivery) -> None:
                started.set()
                await release.wait()

            consumer = asyncio.ensure_future(q.consume(handler))
            await asyncio.wait_for(started.wait(), WAIT)
            closer = asyncio.ensure_future(q.aclose(deadline=60))
            await asyncio.sleep(0)
            closer.cancel()
            await asyncio.wait([closer])

            async def closed() -> bool:
                try:
                    await q.stats()
                except delayq.ClosedError:
                    return True
                return False

            deadline = time.monotonic() + 10
            while not await closed():
                assert time.monotonic() < deadline, "the handle closed"
                await asyncio.sleep(0.01)
            release.set()
            await asyncio.wait_for(consumer, 10)

    asyncio.run(main())
