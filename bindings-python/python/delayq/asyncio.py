"""The asyncio flavour of delayq: the same API, every call awaitable.

    async with delayq.asyncio.Client("redis://127.0.0.1:6379") as client:
        q = client.delayed_queue("orders")
        await q.offer(b"hello", 2)
        value = await q.take(timeout=5)

The calls run on delayq's own tokio runtime, not on a thread per call; cancelling an
awaited ``take``, ``receive`` or ``receive_many`` loses nothing.

``ReliableQueue.close()`` closes a handle at once; ``await ReliableQueue.aclose(deadline)``
is the graceful close (the asyncio convention for a close that awaits).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Optional, Union

from . import _api, _delayq

Seconds = Union[int, float, timedelta]
Value = Union[bytes, bytearray, memoryview, str]
StrPath = Union[str, "os.PathLike[str]"]

__all__ = ["Client", "DelayedQueue", "ReliableQueue", "Delivery"]


class Delivery:
    """A received message; ``await ack()`` when done, ``await nack()`` to retry."""

    def __init__(self, inner: _api.Delivery) -> None:
        self._inner = inner

    @property
    def id(self) -> str:
        """The message id."""
        return self._inner.id

    @property
    def payload(self) -> bytes:
        """The payload."""
        return self._inner.payload

    @property
    def attempt(self) -> int:
        """Which delivery this is: 1 for the first."""
        return self._inner.attempt

    @property
    def due_at(self) -> int:
        """When the message came due (server Unix ms)."""
        return self._inner.due_at

    @property
    def shard(self) -> int:
        """The shard the message lives in (0 for a queue of one shard)."""
        return self._inner.shard

    @property
    def deadline(self) -> int:
        """When this delivery's lease ends (server Unix ms); moved by ``extend``."""
        return self._inner.deadline

    async def extend(self, duration: Seconds) -> bool:
        """Moves the end of the lease to ``duration`` seconds from now; False when the
        lease was already lost (the message went back, or was acked or nacked)."""
        return await self._inner.extend_async(duration)

    async def ack(self) -> bool:
        """Acknowledges: the message is done. False if this delivery had already ended."""
        return await self._inner.ack_async()

    async def nack(self, delay: Optional[Seconds] = None) -> bool:
        """Retries after ``delay`` seconds (default: the back-off), or buries the message."""
        return await self._inner.nack_async(delay)

    def __repr__(self) -> str:
        return repr(self._inner)


class DelayedQueue:
    """A Redisson-compatible delayed queue; see ``delayq.DelayedQueue``."""

    def __init__(self, inner: _api.DelayedQueue) -> None:
        self._inner = inner

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._inner.name

    async def offer(self, value: Value, delay: Seconds) -> int:
        """Offers ``value`` due after ``delay`` seconds; returns the due time (server ms)."""
        return await self._inner.offer_async(value, delay)

    async def offer_all(self, entries: Iterable[tuple[Value, Seconds]]) -> list[int]:
        """Offers many ``(value, delay)`` pairs; returns their due times."""
        return await self._inner.offer_all_async(list(entries))

    async def size(self) -> int:
        """The number of entries still waiting."""
        return await self._inner.size_async()

    async def contains(self, value: Value) -> bool:
        """Whether a waiting entry holds ``value``."""
        return await self._inner.contains_async(value)

    async def remove(self, value: Value) -> bool:
        """Removes the first waiting entry holding ``value``."""
        return await self._inner.remove_async(value)

    async def read_all(self) -> list[bytes]:
        """The waiting values, in offer order."""
        return await self._inner.read_all_async()

    async def clear(self) -> None:
        """Deletes every waiting entry."""
        await self._inner.clear_async()

    async def take(self, timeout: Optional[Seconds] = None) -> Optional[bytes]:
        """Takes the oldest due value, waiting up to ``timeout`` seconds (None: forever)."""
        return await self._inner.take_async(timeout)

    async def poll(self) -> Optional[bytes]:
        """Takes a due value if there is one, without waiting."""
        return await self._inner.poll_async()

    async def stats(self) -> _api.DelayedStats:
        """Counts: delayed, ready, corrupt."""
        return await self._inner.stats_async()

    async def iter(self, timeout: Optional[Seconds] = None) -> AsyncIterator[bytes]:
        """``async for value in q.iter(timeout=5)``: ends when a take times out."""
        while True:
            value = await self.take(timeout)
            if value is None:
                return
            yield value

    def close(self) -> None:
        """Closes this handle."""
        self._inner.close()

    def __repr__(self) -> str:
        return repr(self._inner)


class ReliableQueue:
    """A reliable queue (at-least-once, acknowledged); see ``delayq.ReliableQueue``."""

    def __init__(self, inner: _api.ReliableQueue) -> None:
        self._inner = inner

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._inner.name

    async def offer(
        self,
        payload: Value,
        delay: Seconds = 0,
        id: Optional[str] = None,
        *,
        shard_key: Optional[str] = None,
    ) -> str:
        """Offers ``payload`` due after ``delay`` seconds; returns its id (de-duplicated).
        With ``shard_key``, the message goes to the key's shard instead of its id's."""
        return await self._inner.offer_async(payload, delay, id, shard_key=shard_key)

    async def offer_with_outcome(
        self,
        payload: Value,
        delay: Seconds = 0,
        id: Optional[str] = None,
        *,
        shard_key: Optional[str] = None,
    ) -> _api.OfferOutcome:
        """Like ``offer``; tells whether this call created the message (``created``) or
        found one with the same id."""
        return await self._inner.offer_with_outcome_async(payload, delay, id, shard_key=shard_key)

    async def offer_all(self, messages: Iterable[tuple[Any, ...]]) -> list[str]:
        """Offers many ``(payload, delay)``, ``(payload, delay, id)`` or
        ``(payload, delay, id, shard_key)`` tuples."""
        return await self._inner.offer_all_async(list(messages))

    async def offer_all_with_outcome(
        self, messages: Iterable[tuple[Any, ...]]
    ) -> list[_api.OfferOutcome]:
        """Like ``offer_all``; an ``OfferOutcome`` for each message, in order."""
        return await self._inner.offer_all_with_outcome_async(list(messages))

    async def cancel(self, id: str) -> bool:
        """Removes a message that has not come due; returns whether there was one."""
        return await self._inner.cancel_async(id)

    async def reschedule(self, id: str, delay: Seconds) -> bool:
        """Moves a message that has not come due to ``delay`` seconds from now."""
        return await self._inner.reschedule_async(id, delay)

    async def receive(self, timeout: Optional[Seconds] = None) -> Optional[Delivery]:
        """Receives the next ready message, waiting up to ``timeout`` seconds."""
        d = await self._inner.receive_async(timeout)
        return None if d is None else Delivery(d)

    async def receive_many(self, n: int, timeout: Optional[Seconds] = None) -> list[Delivery]:
        """Receives up to ``n`` ready messages in one round trip, waiting up to ``timeout``
        seconds for the first; an empty list when the time passes."""
        return [Delivery(d) for d in await self._inner.receive_many_async(n, timeout)]

    async def ack_many(self, deliveries: Iterable[Delivery]) -> list[bool]:
        """Acks many deliveries in one round trip; for each, whether its lease was held."""
        inner = [d._inner for d in deliveries]
        return await self._inner.ack_many_async(inner)

    async def settings(self) -> _api.ReliableSettings:
        """The queue's settings as stored in Redis."""
        return await self._inner.settings_async()

    @property
    def lost_leases(self) -> int:
        """Acks through this handle that found their lease already lost."""
        return self._inner.lost_leases

    async def stats(self) -> _api.ReliableStats:
        """Counts: delayed, ready, in_flight, dead."""
        return await self._inner.stats_async()

    async def dead_letters(self, limit: int = _delayq.DEAD_LETTERS_LIMIT) -> list[_api.DeadLetter]:
        """Up to ``limit`` dead letters."""
        return await self._inner.dead_letters_async(limit)

    async def requeue_dead(self, ids: Optional[Sequence[str]] = None) -> int:
        """Makes dead letters ready again (the given ids, or all); returns how many."""
        return await self._inner.requeue_dead_async(None if ids is None else list(ids))

    async def purge_dead(self) -> int:
        """Deletes every dead letter; returns how many there were."""
        return await self._inner.purge_dead_async()

    async def consume(
        self, handler: Callable[[Delivery], Awaitable[Any]], concurrency: int = _delayq.CONCURRENCY
    ) -> None:
        """Runs ``await handler(delivery)`` on received messages, ``concurrency`` at a time:
        acks on return, nacks on an exception; extends the lease of a running handler.
        Runs until closed or cancelled; after ``aclose(deadline)``, once the running
        handlers finished and were settled."""

        async def call(d: _api.Delivery) -> Any:
            return await handler(Delivery(d))

        await self._inner.consume_async(call, concurrency)

    async def iter(self, timeout: Optional[Seconds] = None) -> AsyncIterator[Delivery]:
        """``async for delivery in q.iter(timeout=5)``: ends when a receive times out."""
        while True:
            d = await self.receive(timeout)
            if d is None:
                return
            yield d

    def close(self) -> None:
        """Closes this handle at once (deliveries already received can still be settled)."""
        self._inner.close()

    async def aclose(self, deadline: Optional[Seconds] = None) -> None:
        """Closes this handle; with ``deadline`` (seconds), gracefully: consumers stop
        receiving, running handlers get up to ``deadline`` to finish and are settled,
        messages received but not started go back, then the handle closes. Cancelling it
        closes the handle at once."""
        await self._inner.close_async(deadline)

    def __repr__(self) -> str:
        return repr(self._inner)


class Client:
    """An asyncio client. ``Client(url)`` connects at once (a short blocking connect);
    ``await Client.connect(url)`` connects without blocking the event loop."""

    def __init__(
        self,
        url: Union[str, Sequence[str]],
        *,
        cluster: bool = False,
        tls_ca_file: Optional[StrPath] = None,
        tls_cert_file: Optional[StrPath] = None,
        tls_key_file: Optional[StrPath] = None,
        durability_replicas: Optional[int] = None,
        durability_aof: bool = False,
        durability_timeout: Seconds = _delayq.DURABILITY_TIMEOUT,
        _inner: Optional[_api.Client] = None,
    ) -> None:
        """The options are those of ``delayq.Client``: TLS files for ``rediss://`` and
        the durability option."""
        if _inner is None:
            _inner = _api.Client(
                url,
                cluster=cluster,
                tls_ca_file=tls_ca_file,
                tls_cert_file=tls_cert_file,
                tls_key_file=tls_key_file,
                durability_replicas=durability_replicas,
                durability_aof=durability_aof,
                durability_timeout=durability_timeout,
            )
        self._inner = _inner

    @classmethod
    async def connect(
        cls,
        url: Union[str, Sequence[str]],
        *,
        cluster: bool = False,
        tls_ca_file: Optional[StrPath] = None,
        tls_cert_file: Optional[StrPath] = None,
        tls_key_file: Optional[StrPath] = None,
        durability_replicas: Optional[int] = None,
        durability_aof: bool = False,
        durability_timeout: Seconds = _delayq.DURABILITY_TIMEOUT,
    ) -> Client:
        """Connects without blocking the event loop (options as ``Client(...)``)."""
        inner = await _api.Client.connect_async(
            url,
            cluster=cluster,
            tls_ca_file=tls_ca_file,
            tls_cert_file=tls_cert_file,
            tls_key_file=tls_key_file,
            durability_replicas=durability_replicas,
            durability_aof=durability_aof,
            durability_timeout=durability_timeout,
        )
        return cls(url, _inner=inner)

    def delayed_queue(
        self,
        name: str,
        *,
        scheduler: bool = _delayq.SCHEDULER,
        reconcile_interval: Seconds = _delayq.RECONCILE_INTERVAL,
    ) -> DelayedQueue:
        """A handle on the Redisson-compatible delayed queue ``name``."""
        return DelayedQueue(
            self._inner.delayed_queue(
                name, scheduler=scheduler, reconcile_interval=reconcile_interval
            )
        )

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
        """A handle on the reliable queue ``name``; see ``delayq.Client.reliable_queue``
        (settings left out use the ones stored with the queue)."""
        return ReliableQueue(
            self._inner.reliable_queue(
                name,
                visibility_timeout=visibility_timeout,
                max_attempts=max_attempts,
                backoff=None if backoff is None else list(backoff),
                backoff_base=backoff_base,
                backoff_max=backoff_max,
                shards=shards,
                dead_letter_retention=dead_letter_retention,
                idempotency_retention=idempotency_retention,
                update_settings=update_settings,
                scheduler=scheduler,
                reconcile_interval=reconcile_interval,
            )
        )

    async def server_time_ms(self) -> int:
        """The Redis server's clock in Unix ms."""
        return await self._inner.server_time_ms_async()

    def close(self) -> None:
        """Closes the client and its queue handles."""
        self._inner.close()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._inner.closed

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return repr(self._inner).replace("delayq.Client", "delayq.asyncio.Client")
