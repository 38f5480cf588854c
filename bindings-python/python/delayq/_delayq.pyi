# The native module: handles on core's client and queues. Each call takes `aio` first:
# None to block for the outcome (returned), or the running loop's `Completer` to get a
# `Pending` (awaited by `delayq._aio.Awaiting`). The classes users see are in `_api`.
# The items `delayq` re-exports keep their docstrings here, so that editors show them.
# ruff: noqa: PYI021

from os import PathLike
from typing import Any, Optional, Union, final

from typing_extensions import TypeAlias

from delayq import _api

_Path: TypeAlias = Optional[Union[str, PathLike[str]]]
_Aio: TypeAlias = Optional[Completer]
_Bytes: TypeAlias = Union[bytes, bytearray, memoryview, str]

__all__ = [
    "CONCURRENCY",
    "DEAD_LETTERS_LIMIT",
    "DURABILITY_TIMEOUT",
    "RECONCILE_INTERVAL",
    "SCHEDULER",
    "Client",
    "Completer",
    "DelayedQueue",
    "Delivery",
    "Pending",
    "ReceiveIter",
    "ReliableQueue",
    "Reply",
    "TakeIter",
    "metrics_json",
    "offer_script_source",
    "pack_entry",
    "set_max_level",
    "unpack_entry",
]

SCHEDULER: bool
RECONCILE_INTERVAL: float
DURABILITY_TIMEOUT: float
DEAD_LETTERS_LIMIT: int
CONCURRENCY: int

def pack_entry(id: _Bytes, value: _Bytes) -> bytes:
    """Packs an entry the way Redisson does (Lua's `struct.pack('Bc0Lc0', ...)`: the id's
    length in one byte, the id, the value's length as 8 bytes little-endian, the value). The
    id and the value are bytes (or `str`, UTF-8), as values are everywhere; an id over 255
    bytes raises `InvalidArgument`."""

def unpack_entry(packed: _Bytes) -> tuple[bytes, bytes]:
    """Splits a packed entry (bytes, or a `str` as UTF-8) into `(id, value)`; one that is
    not a whole packed entry raises `InvalidArgument`."""

def offer_script_source() -> str:
    """The Lua source of the offer script (for benchmarks against other clients)."""

def metrics_json() -> str:
    """This process's counters (core's `metrics::snapshot`) as JSON; `delayq.metrics()`
    parses it."""

def set_max_level(level: int) -> None:
    """Has core forward the records a logger at `level` (a `logging` level) lets through
    (trace too below `logging.DEBUG`)."""

@final
class Completer:
    def __new__(cls, event_loop: Any) -> Completer: ...
    def fileno(self) -> int: ...
    def drain(self) -> list[Any]: ...

@final
class Reply:
    def send(self, failure: Optional[str]) -> None: ...

@final
class Pending:
    @property
    def waiter(self) -> Any: ...
    def ready(self) -> bool: ...
    def claim(self) -> Any: ...
    def give_up(self) -> None: ...

@final
class TakeIter:
    """The iterator of `DelayedQueue.iter`: a `take` per item (the value, as `bytes`),
    until one times out."""

    def __iter__(self) -> TakeIter: ...
    def __next__(self) -> bytes: ...

@final
class ReceiveIter:
    """The iterator of `ReliableQueue.iter`: a `receive` per item (a `Delivery`), until one
    times out."""

    def __iter__(self) -> ReceiveIter: ...
    def __next__(self) -> _api.Delivery: ...

@final
class Delivery:
    @property
    def deadline(self) -> int: ...
    def extend(self, aio: _Aio, duration: Any) -> Any: ...
    def ack(self, aio: _Aio) -> Any: ...
    def nack(self, aio: _Aio, t: Any) -> Any: ...

@final
class DelayedQueue:
    @property
    def name(self) -> str: ...
    def close(self) -> None: ...
    def iter(self, t: Any) -> TakeIter: ...
    def offer(self, aio: _Aio, v: Any, d: Any) -> Any: ...
    def offer_all(self, aio: _Aio, entries: Any) -> Any: ...
    def size(self, aio: _Aio) -> Any: ...
    def contains(self, aio: _Aio, v: Any) -> Any: ...
    def remove(self, aio: _Aio, v: Any) -> Any: ...
    def read_all(self, aio: _Aio) -> Any: ...
    def clear(self, aio: _Aio) -> Any: ...
    def take(self, aio: _Aio, t: Any) -> Any: ...
    def poll(self, aio: _Aio) -> Any: ...
    def stats(self, aio: _Aio) -> Any: ...

@final
class ReliableQueue:
    @property
    def name(self) -> str: ...
    @property
    def lost_leases(self) -> int: ...
    def iter(self, t: Any) -> ReceiveIter: ...
    def offer(
        self,
        aio: _Aio,
        full: bool,
        payload: Any,
        d: Any,
        id: Optional[str],
        key: Optional[str],
    ) -> Any: ...
    def offer_all(self, aio: _Aio, full: bool, messages: Any) -> Any: ...
    def cancel(self, aio: _Aio, id: str) -> Any: ...
    def reschedule(self, aio: _Aio, id: str, d: Any) -> Any: ...
    def receive(self, aio: _Aio, t: Any) -> Any: ...
    def receive_many(self, aio: _Aio, n: Any, t: Any) -> Any: ...
    def ack_many(self, aio: _Aio, deliveries: Any) -> Any: ...
    def settings(self, aio: _Aio) -> Any: ...
    def stats(self, aio: _Aio) -> Any: ...
    def dead_letters(self, aio: _Aio, limit: Any) -> Any: ...
    def requeue_dead(self, aio: _Aio, ids: Any) -> Any: ...
    def purge_dead(self, aio: _Aio) -> Any: ...
    def consume(self, aio: _Aio, handler: Any, concurrency: Any) -> Any: ...
    def close(self, aio: _Aio, deadline: Any) -> Any: ...

@final
class Client:
    @staticmethod
    def connect(
        aio: _Aio,
        url: Any,
        cluster: bool,
        tls: tuple[_Path, _Path, _Path],
        durability_replicas: Any,
        durability_aof: bool,
        durability_timeout: Any,
    ) -> Any: ...
    def delayed_queue(
        self, name: str, scheduler: bool, reconcile_interval: Any
    ) -> DelayedQueue: ...
    def reliable_queue(
        self,
        name: str,
        visibility_timeout: Any,
        max_attempts: Any,
        backoff: Any,
        backoff_base: Any,
        backoff_max: Any,
        shards: Any,
        dead_letter_retention: Any,
        idempotency_retention: Any,
        update_settings: bool,
        scheduler: bool,
        reconcile_interval: Any,
    ) -> ReliableQueue: ...
    def server_time_ms(self, aio: _Aio) -> Any: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
