"""Redis memory per waiting reliable message, with generated ids and with caller ids.

For each kind of id and each spread of due times (1 s, 1 h, 1 day, 30 days, starting 10
minutes ahead), offers N messages of 44-byte payloads to a fresh reliable queue and sums
``MEMORY USAGE ... SAMPLES 0`` over every key of the queue, divided by N. The goal of
../shared/SPEC.md section 3 is at most 100 B, printed beside each figure.

Run against a throwaway server (N messages per measurement, 100,000 by default):

    python bindings-python/bench/bench_memory_ids.py redis://127.0.0.1:PORT [N]
"""

from __future__ import annotations

import sys
import uuid

import redis

import delayq

SPREADS = [("1 s", 1), ("1 h", 3600), ("1 day", 86_400), ("30 days", 30 * 86_400)]
START = 600.0  # seconds ahead: nothing comes due while measuring
GOAL = 100
PAYLOAD = b"x" * 44


def bytes_per_message(r: redis.Redis, name: str, n: int) -> float:
    total = 0
    for key in r.scan_iter(match="{dq:" + name + "}*", count=1000):
        total += r.memory_usage(key, samples=0) or 0
    return total / n


def main() -> None:
    url = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    r = redis.Redis.from_url(url)
    print(f"{n} waiting messages of {len(PAYLOAD)} B each; goal: at most {GOAL} B per message")
    with delayq.Client(url) as client:
        for ids in ["generated", "caller, 16 B", "caller, 24 B"]:
            for label, spread in SPREADS:
                name = f"mem-{uuid.uuid4().hex[:8]}"
                q = client.reliable_queue(name, scheduler=False)
                for start in range(0, n, 1000):
                    batch: list[tuple[bytes, float] | tuple[bytes, float, str]] = []
                    for i in range(start, min(start + 1000, n)):
                        delay = START + spread * i / n
                        if ids == "generated":
                            batch.append((PAYLOAD, delay))
                        else:
                            width = 16 if ids.endswith("16 B") else 24
                            batch.append((PAYLOAD, delay, f"{i:0{width}d}"))
                    q.offer_all(batch)
                per = bytes_per_message(r, name, n)
                print(f"ids {ids:<13} spread {label:<8} {per:7.1f} B per message (goal {GOAL})")
                for key in r.scan_iter(match="{dq:" + name + "}*", count=1000):
                    r.delete(key)
                q.close()


if __name__ == "__main__":
    main()
