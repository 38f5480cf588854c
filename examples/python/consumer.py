"""Takes orders from a delayed queue as they come due and prints how late each was.

REDIS_URL=redis://127.0.0.1:6379 python examples/python/consumer.py orders 10 5
(queue, orders to take, idle seconds before giving up)
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
    idle = float(sys.argv[3]) if len(sys.argv) > 3 else 10.0
    with delayq.Client(url) as client:
        queue = client.delayed_queue(queue_name)
        for _ in range(count):
            value = queue.take(timeout=idle)
            if value is None:
                break
            now = client.server_time_ms()
            order = json.loads(value)
            late = now - int(order.get("due", now))
            print(
                f"[python consumer] order {order.get('id')} from {order.get('lang')}, "
                f"{late} ms late",
                flush=True,
            )


if __name__ == "__main__":
    main()
