"""A reliable consumer: acks what it handled, retries what failed, with asyncio.

REDIS_URL=redis://127.0.0.1:6379 python examples/python/reliable_worker.py jobs
"""

from __future__ import annotations

import asyncio
import os
import sys

import delayq.asyncio


async def main() -> None:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
    name = sys.argv[1] if len(sys.argv) > 1 else "jobs"
    async with await delayq.asyncio.Client.connect(url) as client:
        jobs = client.reliable_queue(
            name, visibility_timeout=30, max_attempts=5, backoff=[15, 180, 600, 1800, 3600]
        )
        await jobs.offer(b"charge card 42", 1, id="invoice-42")
        one_done = asyncio.Event()

        async def handle(d: delayq.asyncio.Delivery) -> None:
            print(f"[python worker] {d.id} attempt {d.attempt}: {d.payload!r}", flush=True)
            one_done.set()  # one job is enough for the example

        consumer = asyncio.create_task(jobs.consume(handle, concurrency=4))
        await one_done.wait()
        # The graceful close: running handlers finish and are acked, then consume returns.
        await jobs.aclose(deadline=10)
        await consumer


if __name__ == "__main__":
    asyncio.run(main())
