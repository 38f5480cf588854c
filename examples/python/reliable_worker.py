"""A reliable consumer with asyncio: offers one job, then consumes with four handlers at a
time, acking what was handled and retrying what failed (the first attempt fails here on
purpose). The queue's settings are those of the Node and Java workers, so that they can
take turns on one queue (settings are stored with the queue: a handle naming others is
refused).

REDIS_URL=redis://127.0.0.1:6379 python examples/python/reliable_worker.py worker-jobs
"""

from __future__ import annotations

import asyncio
import os
import sys

import delayq.asyncio


async def main() -> None:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
    name = sys.argv[1] if len(sys.argv) > 1 else "worker-jobs"
    async with await delayq.asyncio.Client.connect(url) as client:
        # The first retry comes 200 ms after a failure, the next ones 3 and 10 minutes.
        jobs = client.reliable_queue(
            name, visibility_timeout=30, max_attempts=5, backoff=[0.2, 180, 600]
        )
        await jobs.offer(b"charge card 42", 0.5, id="invoice-42")
        one_done = asyncio.Event()

        async def handle(d: delayq.asyncio.Delivery) -> None:
            print(f"[python worker] {d.id} attempt {d.attempt}: {d.payload!r}", flush=True)
            if d.attempt == 1:
                raise RuntimeError("card network down; retry")  # nacked: back in 200 ms
            one_done.set()  # one job is enough for the example

        consumer = asyncio.create_task(jobs.consume(handle, concurrency=4))
        await one_done.wait()
        # The graceful close: running handlers finish and are acked, then consume returns.
        await jobs.aclose(deadline=10)
        await consumer
        stats = await client.reliable_queue(name).stats()
        print(f"[python worker] done: {stats}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
