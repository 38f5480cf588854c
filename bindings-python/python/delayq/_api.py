"""The classes of delayq, over the native handles of ``_delayq``: each call is written
once, as its blocking method (the GIL released); ``twin`` makes its ``*_async`` twin (an
awaitable), and the same twin is the call of the asyncio flavour (``delayq.asyncio``,
whose classes share the bases here). Types are converted, and everything else is done,
by the native module and core."""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, Optional, TypeVar, Union

from . import _delayq, _logs
from ._aio import (
    Awaiting,
    Consumer,
    Way,
    awaited_handler,
    blocking_handler,
    call,
    connector,
    constructor,
    consuming,
    loop,
    made,
    twin,
)

if TYPE_CHECKING:
    from typing_extensions import Concatenate, ParamSpec, Self, overload

    from ._aio import Call

    P = ParamSpec("P")
    S = TypeVar("S")
else:
    from typing import overload

Seconds = Union[int, float, timedelta]
Value = Union[bytes, bytearray, memoryview, str]
StrPath = Union[str, "os.PathLike[str]"]

TakeIter = _delayq.TakeIter
ReceiveIter = _delayq.ReceiveIter


def _debug(text: str) -> str:
    """``text`` quoted as core's names are shown."""
    return json.dumps(text, ensure_ascii=False)


def _docs(cls: type, **fields: str) -> None:
    """Documents the fields of a NamedTuple."""
    for name, doc in fields.items():
        getattr(cls, name).__doc__ = doc


def _count(counts: Any, key: Any) -> Any:
    """``stats["ready"]`` as ``stats.ready``; an int or a slice as for any tuple."""
    if isinstance(key, str):
        if key not in counts._fields:
            raise KeyError(key)
        return getattr(counts, key)
    return tuple.__getitem__(counts, key)


class DelayedStats(NamedTuple):
    """Counts of a delayed queue (also by name: `stats["ready"]`, `dict(stats)`)."""

    delayed: int
    ready: int
    corrupt: int

    def __getitem__(self, key: Any) -> Any:
        return _count(self, key)

    def keys(self) -> tuple[str, ...]:
        """The field names, so that `dict(stats)` maps each to its count."""
        return self._fields


_docs(
    DelayedStats,
    delayed="Entries waiting for their due time.",
    ready="Values ready in the destination list.",
    corrupt="Undecodable entries moved aside.",
)


class ReliableStats(NamedTuple):
    """Counts of a reliable queue (also by name: `stats["ready"]`, `dict(stats)`)."""

    delayed: int
    ready: int
    in_flight: int
    dead: int

    def __getitem__(self, key: Any) -> Any:
        return _count(self, key)

    def keys(self) -> tuple[str, ...]:
        """The field names, so that `dict(stats)` maps each to its count."""
        return self._fields


_docs(
    ReliableStats,
    delayed="Messages waiting for their due time.",
    ready="Messages due and not yet received.",
    in_flight="Messages received and not yet acked, nacked or timed out.",
    dead="Messages in the dead letters.",
)


class DeadLetter(NamedTuple):
    """A message in the dead letters."""

    id: str
    payload: bytes
    attempts: int
    died_at: int


_docs(
    DeadLetter,
    id="The message id.",
    payload="The payload.",
    attempts="Deliveries it had.",
    died_at="When it was buried (server Unix ms).",
)


class ReliableSettings(NamedTuple):
    """The settings of a reliable queue, as stored in Redis with it (see
    `Client.reliable_queue`). Durations are float seconds; the back-off is either
    `backoff` (a list of delays, the last one repeats) or exponential from `backoff_base`
    to `backoff_max` (the fields of the other kind are None)."""

    visibility_timeout: float
    max_attempts: int
    backoff: Optional[list[float]]
    backoff_base: Optional[float]
    backoff_max: Optional[float]
    shards: int
    dead_letter_retention: Optional[float]
    idempotency_retention: Optional[float]


_docs(
    ReliableSettings,
    visibility_timeout="The lease of a delivery, in seconds.",
    max_attempts="Deliveries before the dead letters.",
    backoff="The back-off schedule in seconds, or None when it is exponential.",
    backoff_base="The first delay of an exponential back-off, in seconds (None for a schedule).",
    backoff_max="The longest delay of an exponential back-off, in seconds (None for a schedule).",
    shards="Sub-queues.",
    dead_letter_retention=(
        "How long dead letters are kept, in seconds; None: until requeued or purged."
    ),
    idempotency_retention=(
        "How long acked ids are remembered for de-duplication, in seconds; None: not at all."
    ),
)


class OfferOutcome(NamedTuple):
    """What `offer_with_outcome` did: the message `id`, and whether this call `created` the
    message (False: a message with that id was already waiting, ready, in flight, or
    acked within the idempotency retention)."""

    id: str
    created: bool
    due_at: Optional[int]


_docs(
    OfferOutcome,
    id="The message id.",
    created="Whether this call created the message.",
    due_at="When the message is due (server Unix ms); None when it was de-duplicated.",
)


Q = TypeVar("Q")


class _Handle(Generic[Q]):
    """A class over a native handle ``_q``, whose calls take ``self._aio`` first: None
    here (they block); the running loop's completer in their twins (``_aio.Way``). Names
    the functions made from definitions (twins, variants) after their attributes."""

    __slots__ = ("_q",)

    _q: Q
    _aio: Optional[_delayq.Completer] = None
    _full = False

    def __init__(self, q: Q) -> None:
        self._q = q

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, attr in vars(cls).items():
            f = getattr(attr, "__func__", attr)
            if getattr(f, "__made__", False):
                f.__name__, f.__qualname__ = name, f"{cls.__qualname__}.{name}"


class _Closing:
    """``with handle:`` closes the handle at the end of the block (at once)."""

    __slots__ = ()

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        _exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException],
        _tb: Optional[TracebackType],
    ) -> Literal[False]:
        self.close()
        return False


class _Queue(_Handle[Q]):
    """What the queue classes of both flavours share."""

    __slots__ = ()

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._q.name  # type: ignore[attr-defined,no-any-return]

    def __repr__(self) -> str:
        kind = type(self)
        return f"<{kind.__module__}.{kind.__qualname__} {_debug(self.name)}>"


class _Message(_Handle[_delayq.Delivery]):
    """What a `Delivery` of either flavour holds."""

    __slots__ = ("_id", "_payload", "_attempt", "_due_at", "_shard")

    def __init__(
        self, id: str, payload: bytes, attempt: int, due_at: int, shard: int, q: _delayq.Delivery
    ) -> None:
        self._id, self._payload, self._attempt = id, payload, attempt
        self._due_at, self._shard, self._q = due_at, shard, q

    @property
    def id(self) -> str:
        """The message id."""
        return self._id

    @property
    def payload(self) -> bytes:
        """The payload."""
        return self._payload

    @property
    def attempt(self) -> int:
        """Which delivery this is: 1 for the first."""
        return self._attempt

    @property
    def due_at(self) -> int:
        """When the message came due (server Unix ms)."""
        return self._due_at

    @property
    def shard(self) -> int:
        """The shard the message lives in (0 for a queue of one shard)."""
        return self._shard

    @property
    def deadline(self) -> int:
        """When this delivery's lease ends (server Unix ms): past it, the message may be
        delivered to another consumer. Moved by `extend`."""
        return self._q.deadline

    def __repr__(self) -> str:
        return f"<delayq.Delivery id={_debug(self._id)} attempt={self._attempt}>"

    @call
    def extend(self, duration: Seconds) -> bool:
        """Moves the end of the lease to `duration` seconds from now (shorter than what is
        left shortens it). False when the lease was already lost (the message went back
        to the queue, or this delivery was acked or nacked)."""
        return self._q.extend(self._aio, duration)  # type: ignore[no-any-return]

    extend_async = twin(extend)

    @call
    def ack(self) -> bool:
        """Acknowledges: the message is done. False when this delivery had already ended.
        An ack that fails with `ConnectionError` (outcome unknown) may have happened; if it
        did not, the message comes back after its lease (at-least-once; docs/faults.md,
        "What a caller may assume when a call fails")."""
        return self._q.ack(self._aio)  # type: ignore[no-any-return]

    ack_async = twin(ack)

    @call
    def nack(self, delay: Optional[Seconds] = None) -> bool:
        """Gives the message back for a retry after `delay` seconds (default: the queue's
        back-off), or to the dead letters after its last attempt."""
        return self._q.nack(self._aio, delay)  # type: ignore[no-any-return]

    nack_async = twin(nack)


class Delivery(_Message):
    """A received message. `ack()` when done, `nack(delay=None)` to retry; otherwise it is
    delivered again when its lease ends (`deadline`, moved by `extend(seconds)`)."""

    __slots__ = ()


class _Delayed(_Queue[_delayq.DelayedQueue]):
    __slots__ = ()

    @call
    def offer(self, value: Value, delay: Seconds) -> int:
        """Offers `value` to be delivered after `delay` seconds; returns the due time in Unix
        ms, computed from the Redis server's clock. An offer that fails with
        `ConnectionError` (outcome unknown) may have been stored: a delayed queue has no ids,
        so offering the value again may store it twice (docs/faults.md, "What a caller may
        assume when a call fails")."""
        return self._q.offer(self._aio, value, delay)  # type: ignore[no-any-return]

    offer_async = twin(offer)

    @call
    def offer_all(self, entries: Iterable[Sequence[Union[Value, Seconds]]]) -> list[int]:
        """Offers many `(value, delay)` pairs (tuples, or lists), one round trip per
        thousand; returns their due times. Every pair is checked before anything is sent."""
        return self._q.offer_all(self._aio, entries)  # type: ignore[no-any-return]

    offer_all_async = twin(offer_all)

    @call
    def size(self) -> int:
        """The number of entries still waiting for their due time."""
        return self._q.size(self._aio)  # type: ignore[no-any-return]

    size_async = twin(size)

    @call
    def contains(self, value: Value) -> bool:
        """Whether a waiting entry holds `value`."""
        return self._q.contains(self._aio, value)  # type: ignore[no-any-return]

    contains_async = twin(contains)

    @call
    def remove(self, value: Value) -> bool:
        """Removes the first waiting entry holding `value`; returns whether there was one."""
        return self._q.remove(self._aio, value)  # type: ignore[no-any-return]

    remove_async = twin(remove)

    @call
    def read_all(self) -> list[bytes]:
        """The values still waiting, in offer order."""
        return self._q.read_all(self._aio)  # type: ignore[no-any-return]

    read_all_async = twin(read_all)

    @call
    def clear(self) -> None:
        """Deletes every waiting entry (values already due stay in the destination)."""
        return self._q.clear(self._aio)  # type: ignore[no-any-return]

    clear_async = twin(clear)

    @call
    def take(self, timeout: Optional[Seconds] = None) -> Optional[bytes]:
        """Takes the oldest due value, waiting up to `timeout` seconds (None: forever);
        returns None when the time passes. Ctrl-C, or cancelling the awaitable,
        interrupts the wait; nothing is lost."""
        return self._q.take(self._aio, timeout)  # type: ignore[no-any-return]

    take_async = twin(take)

    @call
    def poll(self) -> Optional[bytes]:
        """Takes a due value if there is one, without waiting."""
        return self._q.poll(self._aio)  # type: ignore[no-any-return]

    poll_async = twin(poll)

    @call
    def stats(self) -> DelayedStats:
        """Counts: delayed, ready, corrupt."""
        return self._q.stats(self._aio)  # type: ignore[no-any-return]

    stats_async = twin(stats)


class DelayedQueue(_Delayed, _Closing):
    """A handle on a Redisson-compatible delayed queue. Values in are `bytes`, `bytearray`,
    `memoryview` or `str` (UTF-8); values out are `bytes`. Delays are seconds (`int`,
    `float`, `timedelta`)."""

    __slots__ = ()

    def close(self) -> None:
        """Closes this handle (its share of the transfer task stops). Idempotent."""
        self._q.close()

    def iter(self, timeout: Optional[Seconds] = None) -> TakeIter:
        """Iterates over values as they come due: `for value in q.iter(timeout=5)` ends when
        no value came within `timeout` seconds (None: never ends)."""
        return self._q.iter(timeout)


@overload
def _outcome(offer: Callable[Concatenate[S, P], str], doc: str) -> Call[P, OfferOutcome]: ...
@overload
def _outcome(
    offer: Callable[Concatenate[S, P], list[str]], doc: str
) -> Call[P, list[OfferOutcome]]: ...
def _outcome(offer: Callable[..., Any], doc: str) -> Any:
    """The `*_with_outcome` variant of `offer` (documented `doc`): the same call, asking
    core for each message's `OfferOutcome` rather than its id."""

    def with_outcome(self: Any, *args: Any, **kwargs: Any) -> Any:
        return offer(Way(self._q, self._aio, True), *args, **kwargs)

    with_outcome.__doc__ = doc
    signature = inspect.signature(offer)
    made(with_outcome, signature, signature.return_annotation.replace("str", "OfferOutcome"))
    return call(with_outcome)


def _handles(deliveries: Iterable[_Message]) -> Any:
    """The native handles of ``deliveries`` (anything else, a non-iterable too, is passed
    on, and refused)."""
    if not isinstance(deliveries, Iterable):
        return deliveries
    return [getattr(d, "_q", d) for d in deliveries]


class _Reliable(_Queue[_delayq.ReliableQueue]):
    __slots__ = ()

    @property
    def lost_leases(self) -> int:
        """Acks through this handle (`ack`, `ack_many`, `consume`) that found their delivery
        already ended, its lease lost: each means that message may be processed twice."""
        return self._q.lost_leases

    @call
    def offer(
        self,
        payload: Value,
        delay: Optional[Seconds] = None,
        id: Optional[str] = None,
        *,
        shard_key: Optional[str] = None,
    ) -> str:
        """Offers `payload` due after `delay` seconds (None: 0, due now); returns its id.
        With `id`, a message
        with that id still waiting, ready or in flight (or acked within the queue's
        idempotency retention) is not offered again: the call returns the id and changes
        nothing (the existing message keeps its payload and due time). Without `id`, a
        unique one is generated.

        An offer that fails with `ConnectionError` (outcome unknown) may have been stored:
        offer it again with the same `id` (and `shard_key`), which does not create it twice
        (as above: while the first is waiting, ready, in flight or within the idempotency
        retention). See docs/faults.md, "What a caller may assume when a call fails".

        With `shard_key`, the message goes to the shard of the key instead of the shard of
        its id (a queue of several shards): messages with one key stay in one shard."""
        q, aio, full = self._q, self._aio, self._full
        return q.offer(aio, full, payload, delay, id, shard_key)  # type: ignore[no-any-return]

    offer_async = twin(offer)
    offer_with_outcome = _outcome(
        offer,
        """Like `offer`; returns an `OfferOutcome`: the id, and whether this call created
        the message (False when it was de-duplicated).""",
    )
    offer_with_outcome_async = twin(offer_with_outcome)

    @call
    def offer_all(self, messages: Iterable[Sequence[Any]]) -> list[str]:
        """Offers many `(payload, delay)`, `(payload, delay, id)` or
        `(payload, delay, id, shard_key)` tuples (or lists; a delay of None is 0, as in
        `offer`); returns their ids."""
        return self._q.offer_all(self._aio, self._full, messages)  # type: ignore[no-any-return]

    offer_all_async = twin(offer_all)
    offer_all_with_outcome = _outcome(
        offer_all, """Like `offer_all`; returns an `OfferOutcome` for each message, in order."""
    )
    offer_all_with_outcome_async = twin(offer_all_with_outcome)

    @call
    def cancel(self, id: str) -> bool:
        """Removes a message no consumer has received yet (waiting or ready; one nacked and
        waiting for its retry too); returns whether there was one. A message in flight
        (received, not yet acked or nacked) or dead is not touched (False). On a sharded
        queue it looks in the id's shard, then (for an id offered with a shard key) in the
        others."""
        return self._q.cancel(self._aio, id)  # type: ignore[no-any-return]

    cancel_async = twin(cancel)

    @call
    def reschedule(self, id: str, delay: Seconds) -> bool:
        """Moves a message no consumer has received yet (waiting or ready; one nacked and
        waiting for its retry too) to a new due time, `delay` seconds from now (its
        attempts unchanged); returns whether there was one. A message in flight (received,
        not yet acked or nacked) or dead is not touched (False)."""
        return self._q.reschedule(self._aio, id, delay)  # type: ignore[no-any-return]

    reschedule_async = twin(reschedule)

    @call
    def settings(self) -> ReliableSettings:
        """The queue's settings as stored in Redis now (stored from this handle's options if
        the queue had none); a `ReliableSettings`."""
        return self._q.settings(self._aio)  # type: ignore[no-any-return]

    settings_async = twin(settings)

    @call
    def stats(self) -> ReliableStats:
        """Counts: delayed, ready, in_flight, dead."""
        return self._q.stats(self._aio)  # type: ignore[no-any-return]

    stats_async = twin(stats)

    @call
    def dead_letters(self, limit: int = _delayq.DEAD_LETTERS_LIMIT) -> list[DeadLetter]:
        """Up to `limit` dead letters."""
        return self._q.dead_letters(self._aio, limit)  # type: ignore[no-any-return]

    dead_letters_async = twin(dead_letters)

    @call
    def requeue_dead(self, ids: Optional[Sequence[str]] = None) -> int:
        """Makes dead letters ready again (attempts reset): those with the given ids, or all.
        Returns how many."""
        return self._q.requeue_dead(self._aio, ids)  # type: ignore[no-any-return]

    requeue_dead_async = twin(requeue_dead)

    @call
    def purge_dead(self) -> int:
        """Deletes every dead letter; returns how many there were."""
        return self._q.purge_dead(self._aio)  # type: ignore[no-any-return]

    purge_dead_async = twin(purge_dead)


class ReliableQueue(_Reliable, _Closing):
    """A handle on a reliable queue: at-least-once delivery with acknowledgement."""

    __slots__ = ()

    def receive(self, timeout: Optional[Seconds] = None) -> Optional[Delivery]:
        """Receives the next ready message, waiting up to `timeout` seconds (None: forever)
        on the server; returns a `Delivery`, or None when the time passes. Ctrl-C, or
        cancelling the awaitable, gives the message back untouched."""
        return self._q.receive(self._aio, timeout)  # type: ignore[no-any-return]

    receive_async = twin(receive)

    def receive_many(self, n: int, timeout: Optional[Seconds] = None) -> list[Delivery]:
        """Receives up to `n` ready messages (1 to 1000) in one round trip, waiting up to
        `timeout` seconds (None: forever) for the first; returns a list of `Delivery`,
        empty when the time passes. Ctrl-C, or cancelling the awaitable, gives the
        messages back untouched."""
        return self._q.receive_many(self._aio, n, timeout)  # type: ignore[no-any-return]

    receive_many_async = twin(receive_many)

    def iter(self, timeout: Optional[Seconds] = None) -> ReceiveIter:
        """Iterates over messages as they come: `for d in q.iter(timeout=5)` receives them
        one at a time (each a `Delivery`, to ack or nack as from `receive`) and ends when
        none came within `timeout` seconds (None: never ends)."""
        return self._q.iter(timeout)

    def ack_many(self, deliveries: Iterable[Delivery]) -> list[bool]:
        """Acks many deliveries in one round trip; returns, for each, whether its lease was
        still held (as `Delivery.ack`; after a `ConnectionError`, as there, the acks may
        have happened)."""
        return self._q.ack_many(self._aio, _handles(deliveries))  # type: ignore[no-any-return]

    ack_many_async = twin(ack_many)

    def consume(
        self, handler: Callable[[Delivery], object], concurrency: int = _delayq.CONCURRENCY
    ) -> None:
        """Calls `handler(delivery)` on received messages, `concurrency` at a time, each in a
        worker thread: acks when it returns, nacks (with the queue's back-off) when it
        raises. Receives ahead (up to `concurrency` messages), extends the lease of a
        running handler by itself (a handler may run longer than the visibility timeout),
        batches acks. Runs until the queue or its client is closed (or Ctrl-C); after
        `close(deadline=...)`, once the running handlers finished and were settled.

        The handler is a plain function taking the delivery: one that is not callable or
        whose signature cannot take one argument raises `InvalidArgument` at once, before
        anything reaches Redis; so does an `async def` one (or an object whose `__call__`
        is), as nothing would await it (`delayq.asyncio`'s `consume` does). A call that
        returns an awaitable anyway fails (nack)."""
        self._q.consume(None, blocking_handler(handler), concurrency)

    def consume_async(
        self,
        handler: Callable[[Delivery], Awaitable[Any]],
        concurrency: int = _delayq.CONCURRENCY,
    ) -> Awaitable[None]:
        """Awaitable `consume` for `async def handler(delivery)`, run on the caller's event
        loop. Cancelling it stops the workers; `close_async(deadline)` lets the running
        handlers finish first. A handler that is not an `async def` function (or an object
        whose `__call__` is one), or whose signature cannot take one argument, raises
        `InvalidArgument` at once; a call that returns no awaitable anyway fails (nack)."""
        awaited_handler(handler)
        consumer = Consumer(handler)
        return consuming(Awaiting(self._q.consume(loop(), consumer, concurrency)), consumer)

    def close(self, deadline: Optional[Seconds] = None) -> None:
        """Closes this handle. Without `deadline`, at once: later calls (and a pending
        receive) raise `ClosedError`, a running `consume` returns once its handlers
        ended or 1 s passed (those still running then are given back), deliveries already
        received can still be acked or nacked. With `deadline` (seconds), gracefully and
        blocking until done: consumers stop receiving, handlers already running get up to
        `deadline` to finish and are acked or nacked, messages received but not handed to
        a handler go back untouched, then the handle closes (a cancelled `close_async`
        closes at once). Idempotent."""
        return self._q.close(self._aio, deadline)  # type: ignore[no-any-return]

    close_async = twin(close)


Url = Union[str, Sequence[str]]
DQ = TypeVar("DQ")
RQ = TypeVar("RQ")


class _Client(_Handle[_delayq.Client], Generic[DQ, RQ]):
    """What the client classes of both flavours share; `_queues` makes their queues."""

    __slots__ = ()

    _queues: tuple[Callable[[_delayq.DelayedQueue], DQ], Callable[[_delayq.ReliableQueue], RQ]]

    def __init__(
        self,
        url: Url,
        *,
        cluster: bool = False,
        tls_ca_file: Optional[StrPath] = None,
        tls_cert_file: Optional[StrPath] = None,
        tls_key_file: Optional[StrPath] = None,
        durability_replicas: Optional[int] = None,
        durability_aof: bool = False,
        durability_timeout: Seconds = _delayq.DURABILITY_TIMEOUT,
    ) -> None:
        """Connects (blocking) to `url` (`redis://[user:pass@]host:port/db`, `rediss://`,
        `redis+unix:///path`, `redis+sentinel://[user:pass@]host:port[,host:port...]/MASTER[/db]`),
        or to a cluster through a list of seed URLs. `tls_ca_file`, `tls_cert_file` and
        `tls_key_file` (PEM) serve `rediss://`: a private CA, a client certificate and its key
        (mutual TLS). With `durability_replicas` (or `durability_aof`), offers and acks wait
        for that many replicas (and the append-only file) for up to `durability_timeout`
        seconds."""
        _logs.follow()
        tls = (tls_ca_file, tls_cert_file, tls_key_file)
        self._q = _delayq.Client.connect(
            self._aio, url, cluster, tls, durability_replicas, durability_aof, durability_timeout
        )

    def delayed_queue(
        self,
        name: str,
        *,
        scheduler: bool = _delayq.SCHEDULER,
        reconcile_interval: Seconds = _delayq.RECONCILE_INTERVAL,
    ) -> DQ:
        """A handle on the Redisson-compatible delayed queue `name`. Unless `scheduler` is
        false, this process moves its due entries (waking at least every
        `reconcile_interval` seconds)."""
        return self._queues[0](self._q.delayed_queue(name, scheduler, reconcile_interval))

    def reliable_queue(
        self,
        name: str,
        *,
        visibility_timeout: Optional[Seconds] = None,
        max_attempts: Optional[int] = None,
        backoff: Union[Seconds, Sequence[Seconds], None] = None,
        backoff_base: Optional[Seconds] = None,
        backoff_max: Optional[Seconds] = None,
        shards: Optional[int] = None,
        dead_letter_retention: Optional[Seconds] = None,
        idempotency_retention: Optional[Seconds] = None,
        update_settings: bool = False,
        scheduler: bool = _delayq.SCHEDULER,
        reconcile_interval: Seconds = _delayq.RECONCILE_INTERVAL,
    ) -> RQ:
        """A handle on the reliable queue `name`: at-least-once delivery with ack.

        The queue's settings are stored in Redis with the queue and shared by every handle
        in every process: a setting left out (None) uses the stored one; a named one must
        match it (else the handle's first call raises `InvalidArgument` naming the
        difference) unless `update_settings` is true, which overwrites the stored ones. The
        first handle to make a call on a new queue stores what it names and the defaults for
        the rest.

        The settings: `visibility_timeout` (the lease of a delivery, default 30 s),
        `max_attempts` deliveries before the dead letters (default 5), the back-off of a
        `nack()` without delay: `backoff`, a list of delays (the last one repeats; one
        delay alone is a constant back-off), or
        exponential with jitter from `backoff_base` to `backoff_max` (defaults 1 s and
        600 s), `shards` (a power of two, default 1), `dead_letter_retention` and
        `idempotency_retention` (0: dead letters kept until requeued or purged, acked ids
        not kept, the defaults). Every duration is `int`, `float` or `timedelta` seconds."""
        if isinstance(backoff, (int, float, timedelta)) and not isinstance(backoff, bool):
            backoff = [backoff]  # a constant back-off
        q = self._q.reliable_queue(
            name,
            visibility_timeout,
            max_attempts,
            backoff,
            backoff_base,
            backoff_max,
            shards,
            dead_letter_retention,
            idempotency_retention,
            update_settings,
            scheduler,
            reconcile_interval,
        )
        return self._queues[1](q)

    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
        return self._q.closed

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.Client closed={self._q.closed}>"

    @call
    def server_time_ms(self) -> int:
        """The Redis server's clock in Unix milliseconds (the clock due times use)."""
        return self._q.server_time_ms(self._aio)  # type: ignore[no-any-return]

    server_time_ms_async = twin(server_time_ms)


class Client(_Client[DelayedQueue, ReliableQueue], _Closing):
    """A connection to Redis: one URL, or a list of seed URLs of a Redis Cluster. `with
    Client(url) as client:` closes it at the end of the block."""

    __slots__ = ()

    _queues = (DelayedQueue, ReliableQueue)
    connect = constructor(_Client.__init__)
    connect_async = connector(_Client.__init__)

    def close(self) -> None:
        """Closes the client and every queue handle from it. Idempotent."""
        self._q.close()


_public: tuple[type, ...] = (DelayedStats, ReliableStats, DeadLetter, ReliableSettings)
for _cls in (*_public, OfferOutcome, Delivery, DelayedQueue, ReliableQueue, Client):
    _cls.__module__ = "delayq"
