"""Offers per second through delayq beside redis-py running the same script.

Both run the delayed queue's offer script with EVALSHA, pipelined the same way: delayq's
offer_all sends one script call per batch of BATCH entries, and redis-py sends one
EVALSHA per batch with the same arguments. Run against a throwaway server:

    python bindings-python/bench/bench_offer.py redis://127.0.0.1:PORT [N]
"""

from __future__ import annotations

import os
import sys
import time

import redis

import delayq

BATCH = 100


def main() -> None:
    url = (
        sys.argv[1] if len(sys.argv) > 1 else os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
    )
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    payload = b"x" * 44
    with delayq.Client(url) as client:
        q = client.delayed_queue(f"bench-py-{os.getpid()}", scheduler=False)
        start = time.perf_counter()
        for _ in range(n // BATCH):
            q.offer_all([(payload, 3600)] * BATCH)
        ours = n / (time.perf_counter() - start)
        single_start = time.perf_counter()
        for _ in range(n // 10):
            q.offer(payload, 3600)
        ours_single = (n // 10) / (time.perf_counter() - single_start)
        q.clear()

    r = redis.Redis.from_url(url)
    name = f"bench-pyredis-{os.getpid()}"
    keys = [
        f"redisson_delay_queue_timeout:{{{name}}}",
        f"redisson_delay_queue:{{{name}}}",
        f"redisson_delay_queue_channel:{{{name}}}",
        name,
    ]
    script = r.register_script(delayq.offer_script_source())
    start = time.perf_counter()
    for _ in range(n // BATCH):
        args: list[object] = []
        for _ in range(BATCH):
            args += [3_600_000, os.urandom(8), payload]
        script(keys=keys, args=args)
    theirs = n / (time.perf_counter() - start)
    single_start = time.perf_counter()
    for _ in range(n // 10):
        script(keys=keys, args=[3_600_000, os.urandom(8), payload])
    theirs_single = (n // 10) / (time.perf_counter() - single_start)
    r.delete(*keys)

    print(
        f"batches of {BATCH}: delayq {ours:,.0f} offers/s, redis-py {theirs:,.0f} offers/s, "
        f"ratio {ours / theirs:.2f}"
    )
    print(
        f"one at a time:  delayq {ours_single:,.0f} offers/s, redis-py {theirs_single:,.0f} "
        f"offers/s, ratio {ours_single / theirs_single:.2f}"
    )


if __name__ == "__main__":
    main()
