#!/usr/bin/env python3
"""The Python interop agent: see README.md beside this file."""

from __future__ import annotations

import sys
import time

import delayq


def main() -> int:
    mode, url, kind, queue = sys.argv[1:5]
    with delayq.Client(url) as client:
        q = client.delayed_queue(queue) if kind == "delayed" else client.reliable_queue(queue)
        if mode == "produce":
            with open(sys.argv[5]) as inp, open(sys.argv[6], "w") as out:
                for line in inp:
                    hex_payload, delay = line.rstrip("\n").split("\t")
                    payload = bytes.fromhex(hex_payload)
                    if kind == "delayed":
                        due = q.offer(payload, int(delay) / 1000)
                    else:
                        q.offer(payload, int(delay) / 1000)
                        due = -1
                    out.write(f"{hex_payload}\t{due}\n")
        else:
            idle = int(sys.argv[5]) / 1000
            with open(sys.argv[6], "w") as out:
                last = time.monotonic()
                while time.monotonic() - last < idle:
                    if kind == "delayed":
                        value = q.take(0.2)
                        got = None if value is None else (value, -1)
                    else:
                        d = q.receive(0.2)
                        got = None
                        if d is not None:
                            d.ack()
                            got = (d.payload, d.due_at)
                    if got is not None:
                        now = client.server_time_ms()
                        out.write(f"{got[0].hex()}\t{now}\t{got[1]}\n")
                        out.flush()
                        last = time.monotonic()
    return 0


if __name__ == "__main__":
    sys.exit(main())
