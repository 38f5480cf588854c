"""``delayq.metrics()``: this process's counters, as core keeps them."""

from __future__ import annotations

import json
from typing import Literal, TypedDict

from . import _delayq


class Histogram(TypedDict):
    """Cumulative buckets ``[upper bound in seconds, observations at or below it]``,
    ascending (the ``+Inf`` bucket is ``count``), and the sum of the observations."""

    buckets: list[tuple[float, int]]
    count: int
    sum_seconds: float


class QueueMetrics(TypedDict):
    """What this process did with one queue since it started."""

    kind: Literal["delayed", "reliable"]
    name: str
    offered: int
    """Messages offered (created; de-duplicated offers are not counted)."""
    delivered: int
    """Messages received (reliable) or taken (delayed)."""
    acked: int
    """Deliveries acked while their lease was held."""
    nacked: int
    """Deliveries nacked for a retry."""
    dead: int
    """Messages buried: nacked, or their lease ended (found by this process's transfer
    pass), on the last attempt."""
    transfer_errors: int
    """Transfer passes of this process that failed."""
    lateness: Histogram
    """From due time to receipt (reliable queues; server clock)."""
    transfer_duration: Histogram
    """Duration of each transfer pass of this process."""


class Metrics(TypedDict):
    """Every counter of this process."""

    queues: list[QueueMetrics]
    """One entry per queue that had an event, sorted by kind and name."""
    connection_errors: int
    timeouts: int


def metrics() -> Metrics:
    """This process's counters (the same ones ``delayq serve`` exports on ``/metrics``):
    per queue offered, delivered, acked, nacked, dead, transfer errors, a lateness and a
    transfer-pass histogram; connection errors and timeouts. They count this process's
    events since it started, not the queue's contents in Redis (that is ``stats()``)."""
    snapshot: Metrics = json.loads(_delayq.metrics_json())
    return snapshot
