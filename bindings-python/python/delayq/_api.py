"""The classes of delayq, over the native handles of ``_delayq``: each call is written
once, blocking (the GIL released) and as its ``*_async`` twin (an awaitable). Types are
converted, and everything else is done, by the native module and core."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Literal, NamedTuple, Optional, Union

from . import _delayq, _logs
from ._aio import Awaiting, loop

Seconds = Union[int, float, timedelta]
Value = Union[bytes, bytearray, memoryview, str]
StrPath = Union[str, "os.PathLike[str]"]

TakeIter = _delayq.TakeIter


def _debug(text: str) -> str:
    """``text`` quoted as core's names are shown."""
    return json.dumps(text, ensure_ascii=False)


def _docs(cls: type, **fields: str) -> None:
    """Documents the fields of a NamedTuple."""
    for name, doc in fields.items():
        getattr(cls, name).__doc__ = doc


class DelayedStats(NamedTuple):
    """Counts of a delayed queue."""

    delayed: int
    ready: int
    corrupt: int


_docs(
    DelayedStats,
    delayed="Entries waiting for their due time.",
    ready="Values ready in the destination list.",
    corrupt="Undecodable entries moved aside.",
)


class ReliableStats(NamedTuple):
    """Counts of a reliable queue."""

    delayed: int
    ready: int
    in_flight: int
    dead: int


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


class Delivery:
    """A received message. `ack()` when done, `nack(delay=None)` to retry; otherwise it is
    delivered again when its lease ends (`deadline`, moved by `extend(seconds)`)."""

    __slots__ = ("_id", "_payload", "_attempt", "_due_at", "_shard", "_d")

    def __init__(
        self, id: str, payload: bytes, attempt: int, due_at: int, shard: int, d: _delayq.Delivery
    ) -> None:
        self._id, self._payload, self._attempt = id, payload, attempt
        self._due_at, self._shard, self._d = due_at, shard, d

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
        return self._d.deadline

    def extend(self, duration: Seconds) -> bool:
        """Moves the end of the lease to `duration` seconds from now (shorter than what is
        left shortens it). False when the lease was already lost (the message went back
        to the queue, or this delivery was acked or nacked)."""
        return self._d.extend(None, duration)  # type: ignore[no-any-return]

    def extend_async(self, duration: Seconds) -> Awaitable[bool]:
        """Awaitable `extend`."""
        return Awaiting(self._d.extend(loop(), duration))

    def ack(self) -> bool:
        """Acknowledges: the message is done. False when this delivery had already ended."""
        return self._d.ack(None)  # type: ignore[no-any-return]

    def ack_async(self) -> Awaitable[bool]:
        """Awaitable `ack`."""
        return Awaiting(self._d.ack(loop()))

    def nack(self, delay: Optional[Seconds] = None) -> bool:
        """Gives the message back for a retry after `delay` seconds (default: the queue's
        back-off), or to the dead letters after its last attempt."""
        return self._d.nack(None, delay)  # type: ignore[no-any-return]

    def nack_async(self, delay: Optional[Seconds] = None) -> Awaitable[bool]:
        """Awaitable `nack`."""
        return Awaiting(self._d.nack(loop(), delay))

    def __repr__(self) -> str:
        return f"<delayq.Delivery id={_debug(self._id)} attempt={self._attempt}>"


class DelayedQueue:
    """A handle on a Redisson-compatible delayed queue. Values in are `bytes`, `bytearray`,
    `memoryview` or `str` (UTF-8); values out are `bytes`. Delays are seconds (`int`,
    `float`, `timedelta`)."""

    __slots__ = ("_q",)

    def __init__(self, q: _delayq.DelayedQueue) -> None:
        self._q = q

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._q.name

    def offer(self, value: Value, delay: Seconds) -> int:
        """Offers `value` to be delivered after `delay` seconds; returns the due time in Unix
        ms, computed from the Redis server's clock."""
        return self._q.offer(None, value, delay)  # type: ignore[no-any-return]

    def offer_async(self, value: Value, delay: Seconds) -> Awaitable[int]:
        """Awaitable `offer`."""
        return Awaiting(self._q.offer(loop(), value, delay))

    def offer_all(self, entries: Iterable[tuple[Value, Seconds]]) -> list[int]:
        """Offers many `(value, delay)` pairs, one round trip per thousand; returns their due
        times. Every pair is checked before anything is sent."""
        return self._q.offer_all(None, entries)  # type: ignore[no-any-return]

    def offer_all_async(self, entries: Iterable[tuple[Value, Seconds]]) -> Awaitable[list[int]]:
        """Awaitable `offer_all`."""
        return Awaiting(self._q.offer_all(loop(), entries))

    def size(self) -> int:
        """The number of entries still waiting for their due time."""
        return self._q.size(None)  # type: ignore[no-any-return]

    def size_async(self) -> Awaitable[int]:
        """Awaitable `size`."""
        return Awaiting(self._q.size(loop()))

    def contains(self, value: Value) -> bool:
        """Whether a waiting entry holds `value`."""
        return self._q.contains(None, value)  # type: ignore[no-any-return]

    def contains_async(self, value: Value) -> Awaitable[bool]:
        """Awaitable `contains`."""
        return Awaiting(self._q.contains(loop(), value))

    def remove(self, value: Value) -> bool:
        """Removes the first waiting entry holding `value`; returns whether there was one."""
        return self._q.remove(None, value)  # type: ignore[no-any-return]

    def remove_async(self, value: Value) -> Awaitable[bool]:
        """Awaitable `remove`."""
        return Awaiting(self._q.remove(loop(), value))

    def read_all(self) -> list[bytes]:
        """The values still waiting, in offer order."""
        return self._q.read_all(None)  # type: ignore[no-any-return]

    def read_all_async(self) -> Awaitable[list[bytes]]:
        """Awaitable `read_all`."""
        return Awaiting(self._q.read_all(loop()))

    def clear(self) -> None:
        """Deletes every waiting entry (values already due stay in the destination)."""
        self._q.clear(None)

    def clear_async(self) -> Awaitable[None]:
        """Awaitable `clear`."""
        return Awaiting(self._q.clear(loop()))

    def take(self, timeout: Optional[Seconds] = None) -> Optional[bytes]:
        """Takes the oldest due value, waiting up to `timeout` seconds (None: forever);
        returns None when the time passes. Ctrl-C, or cancelling the awaitable,
        interrupts the wait; nothing is lost."""
        return self._q.take(None, timeout)  # type: ignore[no-any-return]

    def take_async(self, timeout: Optional[Seconds] = None) -> Awaitable[Optional[bytes]]:
        """Awaitable `take`."""
        return Awaiting(self._q.take(loop(), timeout))

    def poll(self) -> Optional[bytes]:
        """Takes a due value if there is one, without waiting."""
        return self._q.poll(None)  # type: ignore[no-any-return]

    def poll_async(self) -> Awaitable[Optional[bytes]]:
        """Awaitable `poll`."""
        return Awaiting(self._q.poll(loop()))

    def stats(self) -> DelayedStats:
        """Counts: delayed, ready, corrupt."""
        return self._q.stats(None)  # type: ignore[no-any-return]

    def stats_async(self) -> Awaitable[DelayedStats]:
        """Awaitable `stats`."""
        return Awaiting(self._q.stats(loop()))

    def iter(self, timeout: Optional[Seconds] = None) -> TakeIter:
        """Iterates over values as they come due: `for value in q.iter(timeout=5)` ends when
        no value came within `timeout` seconds (None: never ends)."""
        return self._q.iter(timeout)

    def close(self) -> None:
        """Closes this handle (its share of the transfer task stops). Idempotent."""
        self._q.close()

    def __repr__(self) -> str:
        return f"<delayq.DelayedQueue {_debug(self._q.name)}>"


def _handles(deliveries: Iterable[Delivery]) -> list[Any]:
    """The native handles of ``deliveries`` (anything else is passed on, and refused)."""
    return [getattr(d, "_d", d) for d in deliveries]


class ReliableQueue:
    """A handle on a reliable queue: at-least-once delivery with acknowledgement."""

    __slots__ = ("_q",)

    def __init__(self, q: _delayq.ReliableQueue) -> None:
        self._q = q

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._q.name

    @property
    def lost_leases(self) -> int:
        """Acks through this handle (`ack`, `ack_many`, `consume`) that found their delivery
        already ended, its lease lost: each means that message may be processed twice."""
        return self._q.lost_leases

    def offer(
        self,
        payload: Value,
        delay: Optional[Seconds] = None,
        id: Optional[str] = None,
        *,
        shard_key: Optional[str] = None,
    ) -> str:
        """Offers `payload` due after `delay` seconds; returns its id. With `id`, a message
        with that id still waiting, ready or in flight (or acked within the queue's
        idempotency retention) is not offered again: the call returns the id and changes
        nothing.

        With `shard_key`, the message goes to the shard of the key instead of the shard of
        its id (a queue of several shards): messages with one key stay in one shard."""
        return self._q.offer(None, False, payload, delay, id, shard_key)  # type: ignore[no-any-return]

    def offer_async(
        self,
        payload: Value,
        delay: Optional[Seconds] = None,
        id: Optional[str] = None,
        *,
        shard_key: Optional[str] = None,
    ) -> Awaitable[str]:
        """Awaitable `offer`."""
        return Awaiting(self._q.offer(loop(), False, payload, delay, id, shard_key))

    def offer_with_outcome(
        self,
        payload: Value,
        delay: Optional[Seconds] = None,
        id: Optional[str] = None,
        *,
        shard_key: Optional[str] = None,
    ) -> OfferOutcome:
        """Like `offer`; returns an `OfferOutcome`: the id, and whether this call created
        the message (False when it was de-duplicated)."""
        return self._q.offer(None, True, payload, delay, id, shard_key)  # type: ignore[no-any-return]

    def offer_with_outcome_async(
        self,
        payload: Value,
        delay: Optional[Seconds] = None,
        id: Optional[str] = None,
        *,
        shard_key: Optional[str] = None,
    ) -> Awaitable[OfferOutcome]:
        """Awaitable `offer_with_outcome`."""
        return Awaiting(self._q.offer(loop(), True, payload, delay, id, shard_key))

    def offer_all(self, messages: Iterable[tuple[Any, ...]]) -> list[str]:
        """Offers many `(payload, delay)`, `(payload, delay, id)` or
        `(payload, delay, id, shard_key)` tuples; returns their ids."""
        return self._q.offer_all(None, False, messages)  # type: ignore[no-any-return]

    def offer_all_async(self, messages: Iterable[tuple[Any, ...]]) -> Awaitable[list[str]]:
        """Awaitable `offer_all`."""
        return Awaiting(self._q.offer_all(loop(), False, messages))

    def offer_all_with_outcome(self, messages: Iterable[tuple[Any, ...]]) -> list[OfferOutcome]:
        """Like `offer_all`; returns an `OfferOutcome` for each message, in order."""
        return self._q.offer_all(None, True, messages)  # type: ignore[no-any-return]

    def offer_all_with_outcome_async(
        self, messages: Iterable[tuple[Any, ...]]
    ) -> Awaitable[list[OfferOutcome]]:
        """Awaitable `offer_all_with_outcome`."""
        return Awaiting(self._q.offer_all(loop(), True, messages))

    def cancel(self, id: str) -> bool:
        """Removes a message that has not come due yet; returns whether there was one."""
        return self._q.cancel(None, id)  # type: ignore[no-any-return]

    def cancel_async(self, id: str) -> Awaitable[bool]:
        """Awaitable `cancel`."""
        return Awaiting(self._q.cancel(loop(), id))

    def reschedule(self, id: str, delay: Seconds) -> bool:
        """Moves a message that has not come due yet to `delay` seconds from now; returns
        whether there was one."""
        return self._q.reschedule(None, id, delay)  # type: ignore[no-any-return]

    def reschedule_async(self, id: str, delay: Seconds) -> Awaitable[bool]:
        """Awaitable `reschedule`."""
        return Awaiting(self._q.reschedule(loop(), id, delay))

    def receive(self, timeout: Optional[Seconds] = None) -> Optional[Delivery]:
        """Receives the next ready message, waiting up to `timeout` seconds (None: forever)
        on the server; returns a `Delivery`, or None when the time passes. Ctrl-C, or
        cancelling the awaitable, gives the message back untouched."""
        return self._q.receive(None, timeout)  # type: ignore[no-any-return]

    def receive_async(self, timeout: Optional[Seconds] = None) -> Awaitable[Optional[Delivery]]:
        """Awaitable `receive`."""
        return Awaiting(self._q.receive(loop(), timeout))

    def receive_many(self, n: int, timeout: Optional[Seconds] = None) -> list[Delivery]:
        """Receives up to `n` ready messages (1 to 1000) in one round trip, waiting up to
        `timeout` seconds (None: forever) for the first; returns a list of `Delivery`,
        empty when the time passes. Ctrl-C, or cancelling the awaitable, gives the
        messages back untouched."""
        return self._q.receive_many(None, n, timeout)  # type: ignore[no-any-return]

    def receive_many_async(
        self, n: int, timeout: Optional[Seconds] = None
    ) -> Awaitable[list[Delivery]]:
        """Awaitable `receive_many`."""
        return Awaiting(self._q.receive_many(loop(), n, timeout))

    def ack_many(self, deliveries: Iterable[Delivery]) -> list[bool]:
        """Acks many deliveries in one round trip; returns, for each, whether its lease was
        still held (as `Delivery.ack`)."""
        return self._q.ack_many(None, _handles(deliveries))  # type: ignore[no-any-return]

    def ack_many_async(self, deliveries: Iterable[Delivery]) -> Awaitable[list[bool]]:
        """Awaitable `ack_many`."""
        return Awaiting(self._q.ack_many(loop(), _handles(deliveries)))

    def settings(self) -> ReliableSettings:
        """The queue's settings as stored in Redis now (stored from this handle's options if
        the queue had none); a `ReliableSettings`."""
        return self._q.settings(None)  # type: ignore[no-any-return]

    def settings_async(self) -> Awaitable[ReliableSettings]:
        """Awaitable `settings`."""
        return Awaiting(self._q.settings(loop()))

    def stats(self) -> ReliableStats:
        """Counts: delayed, ready, in_flight, dead."""
        return self._q.stats(None)  # type: ignore[no-any-return]

    def stats_async(self) -> Awaitable[ReliableStats]:
        """Awaitable `stats`."""
        return Awaiting(self._q.stats(loop()))

    def dead_letters(self, limit: int = _delayq.DEAD_LETTERS_LIMIT) -> list[DeadLetter]:
        """Up to `limit` dead letters."""
        return self._q.dead_letters(None, limit)  # type: ignore[no-any-return]

    def dead_letters_async(
        self, limit: int = _delayq.DEAD_LETTERS_LIMIT
    ) -> Awaitable[list[DeadLetter]]:
        """Awaitable `dead_letters`."""
        return Awaiting(self._q.dead_letters(loop(), limit))

    def requeue_dead(self, ids: Optional[Sequence[str]] = None) -> int:
        """Makes dead letters ready again (attempts reset): those with the given ids, or all.
        Returns how many."""
        return self._q.requeue_dead(None, ids)  # type: ignore[no-any-return]

    def requeue_dead_async(self, ids: Optional[Sequence[str]] = None) -> Awaitable[int]:
        """Awaitable `requeue_dead`."""
        return Awaiting(self._q.requeue_dead(loop(), ids))

    def purge_dead(self) -> int:
        """Deletes every dead letter; returns how many there were."""
        return self._q.purge_dead(None)  # type: ignore[no-any-return]

    def purge_dead_async(self) -> Awaitable[int]:
        """Awaitable `purge_dead`."""
        return Awaiting(self._q.purge_dead(loop()))

    def consume(
        self, handler: Callable[[Delivery], Any], concurrency: int = _delayq.CONCURRENCY
    ) -> None:
        """Calls `handler(delivery)` on received messages, `concurrency` at a time, each in a
        worker thread: acks when it returns, nacks (with the queue's back-off) when it
        raises. Receives ahead (up to `concurrency` messages), extends the lease of a
        running handler by itself (a handler may run longer than the visibility timeout),
        batches acks. Runs until the queue or its client is closed (or Ctrl-C); after
        `close(deadline=...)`, once the running handlers finished and were settled."""
        self._q.consume(None, handler, concurrency)

    def consume_async(
        self,
        handler: Callable[[Delivery], Awaitable[Any]],
        concurrency: int = _delayq.CONCURRENCY,
    ) -> Awaitable[None]:
        """Awaitable `consume` for `async def handler(delivery)`, run on the caller's event
        loop. Cancelling it stops the workers; `close_async(deadline)` lets the running
        handlers finish first."""
        return Awaiting(self._q.consume(loop(), handler, concurrency))

    def close(self, deadline: Optional[Seconds] = None) -> None:
        """Closes this handle. Without `deadline`, at once: later calls (and a pending
        receive) raise `ClosedError`, a running `consume` returns, deliveries already
        received can still be acked or nacked. With `deadline` (seconds), gracefully and
        blocking until done: consumers stop receiving, handlers already running get up to
        `deadline` to finish and are acked or nacked, messages received but not handed to
        a handler go back untouched, then the handle closes (a cancelled `close_async`
        closes at once). Idempotent."""
        self._q.close(None, deadline)

    def close_async(self, deadline: Optional[Seconds] = None) -> Awaitable[None]:
        """Awaitable `close`."""
        return Awaiting(self._q.close(loop(), deadline))

    def __repr__(self) -> str:
        return f"<delayq.ReliableQueue {_debug(self._q.name)}>"


Url = Union[str, Sequence[str]]


class Client:
    """A connection to Redis: one URL, or a list of seed URLs of a Redis Cluster."""

    __slots__ = ("_c",)

    _c: _delayq.Client

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
        self._c = _delayq.Client.connect(
            None, url, cluster, tls, durability_replicas, durability_aof, durability_timeout
        )

    @staticmethod
    def connect_async(
        url: Url,
        *,
        cluster: bool = False,
        tls_ca_file: Optional[StrPath] = None,
        tls_cert_file: Optional[StrPath] = None,
        tls_key_file: Optional[StrPath] = None,
        durability_replicas: Optional[int] = None,
        durability_aof: bool = False,
        durability_timeout: Seconds = _delayq.DURABILITY_TIMEOUT,
    ) -> Awaitable[Client]:
        """Connects without blocking the event loop; returns an awaitable of a `Client`. The
        options are those of `Client(...)`."""
        _logs.follow()
        tls = (tls_ca_file, tls_cert_file, tls_key_file)
        return Awaiting(
            _delayq.Client.connect(
                loop(), url, cluster, tls, durability_replicas, durability_aof, durability_timeout
            )
        )

    def delayed_queue(
        self,
        name: str,
        *,
        scheduler: bool = _delayq.SCHEDULER,
        reconcile_interval: Seconds = _delayq.RECONCILE_INTERVAL,
    ) -> DelayedQueue:
        """A handle on the Redisson-compatible delayed queue `name`. Unless `scheduler` is
        false, this process moves its due entries (waking at least every
        `reconcile_interval` seconds)."""
        return DelayedQueue(self._c.delayed_queue(name, scheduler, reconcile_interval))

    def reliable_queue(
        self,
        name: str,
        *,
        visibility_timeout: Optional[Seconds] = None,
        max_attempts: Optional[int] = None,
        backoff: Optional[Sequence[Seconds]] = None,
        backoff_base: Optional[Seconds] = None,
        backoff_max: Optional[Seconds] = None,
        shards: Optional[int] = None,
        dead_letter_retention: Optional[Seconds] = None,
        idempotency_retention: Optional[Seconds] = None,
        update_settings: bool = False,
        scheduler: bool = _delayq.SCHEDULER,
        reconcile_interval: Seconds = _delayq.RECONCILE_INTERVAL,
    ) -> ReliableQueue:
        """A handle on the reliable queue `name`: at-least-once delivery with ack.

        The queue's settings are stored in Redis with the queue and shared by every handle
        in every process: a setting left out (None) uses the stored one; a named one must
        match it (else the handle's first call raises `InvalidArgument` naming the
        difference) unless `update_settings` is true, which overwrites the stored ones. The
        first handle to make a call on a new queue stores what it names and the defaults for
        the rest.

        The settings: `visibility_timeout` (the lease of a delivery, default 30 s),
        `max_attempts` deliveries before the dead letters (default 5), the back-off of a
        `nack()` without delay: `backoff`, a list of delays (the last one repeats), or
        exponential with jitter from `backoff_base` to `backoff_max` (defaults 1 s and
        600 s), `shards` (a power of two, default 1), `dead_letter_retention` and
        `idempotency_retention` (0: dead letters kept until requeued or purged, acked ids
        not kept, the defaults). Every duration is `int`, `float` or `timedelta` seconds."""
        q = self._c.reliable_queue(
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
        return ReliableQueue(q)

    def server_time_ms(self) -> int:
        """The Redis server's clock in Unix milliseconds (the clock due times use)."""
        return self._c.server_time_ms(None)  # type: ignore[no-any-return]

    def server_time_ms_async(self) -> Awaitable[int]:
        """Awaitable `server_time_ms`."""
        return Awaiting(self._c.server_time_ms(loop()))

    def close(self) -> None:
        """Closes the client and every queue handle from it. Idempotent."""
        self._c.close()

    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
        return self._c.closed

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        _exc_type: Optional[type[BaseException]],
        _exc: Optional[BaseException],
        _tb: Optional[TracebackType],
    ) -> Literal[False]:
        self._c.close()
        return False

    def __repr__(self) -> str:
        return f"<delayq.Client closed={self._c.closed}>"


def _client(c: _delayq.Client) -> Client:
    """The ``Client`` of a native client connected by ``connect_async``."""
    client = Client.__new__(Client)
    client._c = c
    return client


_public: tuple[type, ...] = (DelayedStats, ReliableStats, DeadLetter, ReliableSettings)
for _cls in (*_public, OfferOutcome, Delivery, DelayedQueue, ReliableQueue, Client):
    _cls.__module__ = "delayq"
