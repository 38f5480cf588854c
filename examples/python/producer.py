"""Offers orders with delays to a delayed queue.

REDIS_URL=redis://127.0.0.1:6379 python examples/python/producer.py orders 10
"""

from __future__ import annotations

import json
import os
import sys

import delayq


def main() -> None:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
    queue_name = sys.argv[1] if len(sys.argv) > 1 else "orders"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    with delayq.Client(url) as client:
        queue = client.delayed_queue(queue_name)
        for i in range(count):
            delay_ms = 200 * (i % 10)
            # The due estimate lets consumers print how late an order arrived.
            due = client.server_time_ms() + delay_ms
            order = {"id": f"python-{i}", "lang": "python", "due": due}
            queue.offer(json.dumps(order), delay_ms / 1000)
            print(f"offered python-{i}, due in {delay_ms} ms")


if __name__ == "__main__":
    main()
