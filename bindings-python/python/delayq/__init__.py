"""delayq: a delayed queue on Redis, written once in Rust, shared across languages.

``Client(url)`` connects (blocking calls release the GIL); ``delayq.asyncio.Client`` is
the asyncio flavour. ``client.delayed_queue(name)`` is wire-compatible with Redisson's
``RDelayedQueue``; ``client.reliable_queue(name)`` adds ids, acknowledgement, retries and
dead letters. Delays are seconds (``int``, ``float`` or ``timedelta``); values are
``bytes`` (``str`` is encoded as UTF-8); values come out as ``bytes``. The core's logs
(a transfer task that keeps failing, a value given back) go to ``logging`` under the
logger ``delayq``; ``set_log_level`` changes what is forwarded.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

# `delayq.asyncio` is there after a plain `import delayq` (it imports only `_api` and
# `_delayq` from this package, so there is no cycle). It is left out of `__all__`:
# `from delayq import *` must not shadow the standard library's `asyncio` in the
# importing module.
from . import asyncio as asyncio
from ._api import (
    Client,
    DeadLetter,
    DelayedQueue,
    DelayedStats,
    Delivery,
    OfferOutcome,
    ReceiveIter,
    ReliableQueue,
    ReliableSettings,
    ReliableStats,
    TakeIter,
)
from ._delayq import offer_script_source, pack_entry, unpack_entry
from ._errors import (
    ClosedError,
    ConnectionError,
    DelayqError,
    InvalidArgument,
    InvalidArgumentError,
    ServerError,
    TimeoutError,
    WrongTypeError,
)
from ._logs import set_log_level
from ._metrics import Metrics, QueueMetrics, metrics

try:
    __version__: str = _version("delayq")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Client",
    "ClosedError",
    "ConnectionError",
    "DeadLetter",
    "DelayedQueue",
    "DelayedStats",
    "DelayqError",
    "Delivery",
    "InvalidArgument",
    "InvalidArgumentError",
    "Metrics",
    "OfferOutcome",
    "QueueMetrics",
    "ReceiveIter",
    "ReliableQueue",
    "ReliableSettings",
    "ReliableStats",
    "ServerError",
    "TakeIter",
    "TimeoutError",
    "WrongTypeError",
    "offer_script_source",
    "metrics",
    "pack_entry",
    "set_log_level",
    "unpack_entry",
]
