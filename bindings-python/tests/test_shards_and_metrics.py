"""Shard keys, Delivery.shard, exact due times and delayq.metrics() from Python."""

from __future__ import annotations

import asyncio
import zlib

import pytest

import delayq
import delayq.asyncio


def receive_all(q: delayq.ReliableQueue, n: int) -> list[delayq.Delivery]:
    got: list[delayq.Delivery] = []
    while len(got) < n:
        batch = q.receive_many(n - len(got), 5)
        assert batch, f"only {len(got)} of {n} delivered"
        got.extend(batch)
    return got


def test_a_shard_key_keeps_its_messages_in_one_shard(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name, shards=4)
        keyed = [q.offer(f"k{i}", 0, shard_key="customer-7") for i in range(20)]
        loose = q.offer_all([(f"l{i}", 0) for i in range(40)])
        both = q.offer_all([(b"x", 0, "with-id", "customer-7"), (b"y", 0, None, "customer-7")])
        got = receive_all(q, 62)
        shard = {d.id: d.shard for d in got}
        assert len(shard) == 62, "each message once"
        # Seed 002's rule: CRC-32 of the key mod the shard count.
        expected = zlib.crc32(b"customer-7") % 4
        assert {shard[i] for i in keyed + both} == {expected}
        assert len({shard[i] for i in loose}) > 1, "ids spread over the shards"
        assert all(0 <= s < 4 for s in shard.values())
        assert q.ack_many(got) == [True] * 62
        assert q.stats().in_flight == 0


def test_a_bad_shard_key_is_refused_before_redis(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name, shards=2)
        with pytest.raises(delayq.InvalidArgumentError, match="shard key"):
            q.offer(b"x", 0, shard_key="")
        with pytest.raises(delayq.InvalidArgumentError, match="shard key"):
            q.offer_all([(b"ok", 0, None, "k"), (b"bad", 0, None, "x" * 300)])
        s = q.stats()
        assert (s.delayed, s.ready) == (0, 0), "nothing written"


def test_offer_outcome_has_the_due_time_the_server_computed(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name)
        first = q.offer_with_outcome(b"a", 60, id="a")
        assert first.created and first.due_at is not None
        again = q.offer_with_outcome(b"b", 0, id="a")
        assert (again.created, again.due_at) == (False, None)
        d = q.receive(0.2)
        assert d is None
        assert q.reschedule("a", 0)
        d = q.receive(5)
        assert d is not None and d.shard == 0 and d.due_at < first.due_at
        assert d.ack()


def test_metrics_count_what_this_process_did(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name, max_attempts=1, backoff=[0])
        q.offer_all([(b"m", 0)] * 3)
        got = receive_all(q, 3)
        assert got[0].ack() and got[1].nack()
        mine = [m for m in delayq.metrics()["queues"] if m["name"] == name]
        assert len(mine) == 1
        m = mine[0]
        assert m["kind"] == "reliable"
        assert (m["offered"], m["delivered"], m["acked"], m["dead"]) == (3, 3, 1, 1)
        assert m["lateness"]["count"] == 3
        assert m["lateness"]["buckets"][0][0] == 0.001
        assert m["lateness"]["buckets"][-1][1] <= 3
        snapshot = delayq.metrics()
        assert isinstance(snapshot["connection_errors"], int)
        assert isinstance(snapshot["timeouts"], int)


def test_asyncio_shard_key_and_outcome(url: str, name: str) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.reliable_queue(name, shards=2)
            o = await q.offer_with_outcome(b"a", 0, shard_key="k")
            assert o.created and o.due_at is not None
            await q.offer(b"b", 0, shard_key="k")
            got = [await q.receive(5) for _ in range(2)]
            assert all(d is not None for d in got)
            shards = {d.shard for d in got if d is not None}
            assert shards == {zlib.crc32(b"k") % 2}
            for d in got:
                assert d is not None and await d.ack()

    asyncio.run(main())
