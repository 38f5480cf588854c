"""Offers per second through delayq beside redis-py running the same script, in one run.

Every figure runs the delayed queue's offer script (Redisson's) with EVALSHA on the same
server, delayq first, then the usual client:

- batches: delayq's ``offer_all`` sends one script call per batch of BATCH entries;
  redis-py sends one EVALSHA per batch with the same arguments;
- one at a time: a blocking ``offer`` after another, beside redis-py's ``script(...)``;
- asyncio: IN_FLIGHT tasks each awaiting one offer after another, beside redis.asyncio
  doing the same (its connection pool lets each task have its own connection).

Each figure is measured ROUNDS times, delayq and the usual client in turn, and the best
of each is printed, so that a machine busy with other work skews neither side.

Run against a throwaway server (N offers per measurement, 100,000 by default):

    python bindings-python/bench/bench_offer.py redis://127.0.0.1:PORT [N]
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable

import redis
import redis.asyncio

import delayq
import delayq.asyncio

BATCH = 100
IN_FLIGHT = 50
ROUNDS = 3
PAYLOAD = b"x" * 44


def _keys(name: str) -> list[str]:
    return [
        f"redisson_delay_queue_timeout:{{{name}}}",
        f"redisson_delay_queue:{{{name}}}",
        f"redisson_delay_queue_channel:{{{name}}}",
        name,
    ]


def _rate(n: int, run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return n / (time.perf_counter() - start)


def sync_figures(url: str, n: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """(delayq, redis-py) offers/s in batches, then one at a time (best of ROUNDS)."""
    single = max(n // 5, 1)
    client = delayq.Client(url)
    q = client.delayed_queue(f"bench-py-{os.getpid()}", scheduler=False)
    r = redis.Redis.from_url(url)
    keys = _keys(f"bench-pyredis-{os.getpid()}")
    script = r.register_script(delayq.offer_script_source())

    def batches() -> None:
        for _ in range(n // BATCH):
            q.offer_all([(PAYLOAD, 3600)] * BATCH)

    def one_at_a_time() -> None:
        for _ in range(single):
            q.offer(PAYLOAD, 3600)

    def their_batches() -> None:
        for _ in range(n // BATCH):
            args: list[object] = []
            for _ in range(BATCH):
                args += [3_600_000, os.urandom(8), PAYLOAD]
            script(keys=keys, args=args)

    def their_one_at_a_time() -> None:
        for _ in range(single):
            script(keys=keys, args=[3_600_000, os.urandom(8), PAYLOAD])

    best = [0.0, 0.0, 0.0, 0.0]
    for _ in range(ROUNDS):
        for k, (count, run) in enumerate(
            [
                (n // BATCH * BATCH, batches),
                (n // BATCH * BATCH, their_batches),
                (single, one_at_a_time),
                (single, their_one_at_a_time),
            ]
        ):
            best[k] = max(best[k], _rate(count, run))
        q.clear()
        r.delete(*keys)
    client.close()
    r.close()
    return (best[0], best[1]), (best[2], best[3])


async def _in_flight(n: int, offer: Callable[[], Awaitable[object]]) -> float:
    """Offers/s with IN_FLIGHT tasks each making n // IN_FLIGHT offers in turn."""
    each = max(n // IN_FLIGHT, 1)

    async def worker() -> None:
        for _ in range(each):
            await offer()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return each * IN_FLIGHT / (time.perf_counter() - start)


async def asyncio_figures(url: str, n: int) -> tuple[float, float]:
    """(delayq.asyncio, redis.asyncio) offers/s with IN_FLIGHT offers in flight (best of
    ROUNDS)."""
    client = await delayq.asyncio.Client.connect(url)
    q = client.delayed_queue(f"bench-pyaio-{os.getpid()}", scheduler=False)
    r = redis.asyncio.Redis.from_url(url, max_connections=IN_FLIGHT)
    keys = _keys(f"bench-pyredisaio-{os.getpid()}")
    script = r.register_script(delayq.offer_script_source())

    def ours_once() -> Awaitable[object]:
        return q.offer(PAYLOAD, 3600)

    def theirs_once() -> Awaitable[object]:
        return script(keys=keys, args=[3_600_000, os.urandom(8), PAYLOAD])

    # Warm-up: redis.asyncio's pool opens its connections.
    await _in_flight(IN_FLIGHT * 10, ours_once)
    await _in_flight(IN_FLIGHT * 10, theirs_once)
    ours = theirs = 0.0
    for _ in range(ROUNDS):
        ours = max(ours, await _in_flight(n, ours_once))
        theirs = max(theirs, await _in_flight(n, theirs_once))
        await q.clear()
        await r.delete(*keys)
    client.close()
    await r.aclose()
    return ours, theirs


def main() -> None:
    url = (
        sys.argv[1] if len(sys.argv) > 1 else os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
    )
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    (ours, theirs), (ours_single, theirs_single) = sync_figures(url, n)
    ours_aio, theirs_aio = asyncio.run(asyncio_figures(url, n))
    print(f"best of {ROUNDS} rounds, {n:,} offers each, taking turns with the usual client")
    print(
        f"batches of {BATCH}: delayq {ours:,.0f} offers/s, redis-py {theirs:,.0f} offers/s, "
        f"ratio {ours / theirs:.2f}"
    )
    print(
        f"one at a time: delayq {ours_single:,.0f} offers/s, redis-py {theirs_single:,.0f} "
        f"offers/s, ratio {ours_single / theirs_single:.2f}"
    )
    print(
        f"asyncio, {IN_FLIGHT} in flight: delayq {ours_aio:,.0f} offers/s, redis.asyncio "
        f"{theirs_aio:,.0f} offers/s, ratio {ours_aio / theirs_aio:.2f}"
    )


if __name__ == "__main__":
    main()
