"""What a user of redis-py or redis.asyncio reaches for: closes that may be awaited,
handles as context managers, counts by name, a value polled as soon as it is due, a
constant back-off given as one delay."""

from __future__ import annotations

import asyncio
import importlib.metadata

import pytest

import delayq
import delayq.asyncio


def test_asyncio_closes_may_be_awaited_or_not(url: str, name: str) -> None:
    async def main() -> None:
        client = await delayq.asyncio.Client.connect(url)
        q = client.delayed_queue(name)
        await q.offer(b"x", 3600)
        await q.close()
        with pytest.raises(delayq.ClosedError):
            await q.size()
        other = client.delayed_queue(name)
        await other.aclose()
        with pytest.raises(delayq.ClosedError):
            await other.size()
        q.close()  # idempotent, and needs no await
        await client.close()
        assert client.closed
        with pytest.raises(delayq.ClosedError):
            client.delayed_queue(name)
        second = await delayq.asyncio.Client.connect(url)
        await second.aclose()
        assert second.closed

    asyncio.run(main())


def test_queue_handles_are_context_managers(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        with client.delayed_queue(name) as q:
            q.offer(b"x", 3600)
        with pytest.raises(delayq.ClosedError):
            q.size()
        with client.reliable_queue(name + "-r") as r:
            r.offer(b"y", 3600)
        with pytest.raises(delayq.ClosedError):
            r.stats()
        assert client.delayed_queue(name).size() == 1, "closing a handle keeps the queue"

    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            async with client.delayed_queue(name) as q:
                assert await q.size() == 1
            with pytest.raises(delayq.ClosedError):
                await q.size()
            async with client.reliable_queue(name + "-r") as r:
                assert (await r.stats()).delayed == 1
            with pytest.raises(delayq.ClosedError):
                await r.stats()
        assert client.closed

    asyncio.run(main())


def test_counts_are_readable_by_name(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name)
        q.offer(b"a", 3600)
        q.offer(b"b", 3600)
        stats = q.stats()
        assert stats["delayed"] == stats.delayed == stats[0] == 2
        assert dict(stats) == {"delayed": 2, "ready": 0, "in_flight": 0, "dead": 0}
        with pytest.raises(KeyError):
            stats["waiting"]
        d = client.delayed_queue(name)
        d.offer(b"c", 3600)
        assert d.stats()["delayed"] == 1
        assert dict(d.stats()) == {"delayed": 1, "ready": 0, "corrupt": 0}


def test_a_value_is_polled_and_received_as_soon_as_it_is_due(url: str, name: str) -> None:
    # No transfer task in this process: the call itself finds what is due.
    with delayq.Client(url) as client:
        q = client.delayed_queue(name, scheduler=False)
        q.offer(b"now", 0)
        assert q.poll() == b"now"
        q.offer(b"again", 0)
        assert q.take(0) == b"again"
        r = client.reliable_queue(name + "-r", scheduler=False)
        due = r.offer_with_outcome(b"soon", 0.02).due_at
        assert due is not None
        while client.server_time_ms() <= due:
            pass  # the server's clock passing the due time is the condition
        d = r.receive(0)
        assert d is not None and d.payload == b"soon"
        assert d.ack()


def test_one_delay_is_a_constant_backoff(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name, backoff=2.5)
        q.offer(b"x", 3600)
        s = q.settings()
        assert s.backoff == [2.5]
        assert s.backoff_base is None
        with pytest.raises(delayq.InvalidArgument):
            client.reliable_queue(name + "-bad", backoff=-1).offer(b"x", 1)


def test_a_blocking_client_connects_as_in_the_other_languages(url: str, name: str) -> None:
    with delayq.Client.connect(url) as client:
        assert isinstance(client, delayq.Client)
        assert client.delayed_queue(name).size() == 0
    with pytest.raises(delayq.InvalidArgument):
        delayq.Client.connect(url, cluster=1)  # type: ignore[arg-type]


def test_the_package_says_its_version() -> None:
    assert delayq.__version__ == importlib.metadata.version("delayq")
    assert delayq.__version__.count(".") >= 2, delayq.__version__
