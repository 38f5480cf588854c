"""The asyncio flavour of delayq: the same API, every call awaitable.

    async with delayq.asyncio.Client("redis://127.0.0.1:6379") as client:
        q = client.delayed_queue("orders")
        await q.offer(b"hello", 2)
        value = await q.take(timeout=5)

The calls run on delayq's own tokio runtime, not on a thread per call; cancelling an
awaited ``take``, ``receive`` or ``receive_many`` loses nothing.

``close()`` closes a client or a queue handle at once; awaiting it is optional, so
``await client.close()`` and ``client.close()`` do the same, and ``await client.aclose()``
too (redis.asyncio's spelling). ``async with`` a client or a queue handle closes it at the
end of the block. For a reliable queue, ``await q.close(deadline=30)``, or
``await q.aclose(deadline=30)``, is the graceful close.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Optional, Union

from . import _api, _delayq
from ._aio import OnLoop, awaitable, awaited_handler, connector, deferred, twin

if TYPE_CHECKING:
    from typing_extensions import Self

Seconds = Union[int, float, timedelta]

__all__ = ["Client", "DelayedQueue", "ReliableQueue", "Delivery"]

# Each call is the awaitable twin of the blocking one of `delayq`, over the same native
# handle: the classes share their bases with `delayq`'s (`_api`), and `OnLoop` makes the
# twins of the calls those bases define.


class Delivery(_api._Message, OnLoop):
    """A received message; ``await ack()`` when done, ``await nack()`` to retry."""

    __slots__ = ()


def _delivery(d: _api.Delivery) -> Delivery:
    """``d`` as a delivery of this flavour."""
    return Delivery(d.id, d.payload, d.attempt, d.due_at, d.shard, d._q)


class _Closed(Awaitable[None]):
    """What ``close()`` returns: the handle is closed already, and awaiting this returns
    at once."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()


_CLOSED = _Closed()


class _Closing:
    """``close()`` at once, awaitable or not; ``aclose()``; ``async with``."""

    __slots__ = ()
    _q: Any

    def _close_now(self) -> None:
        self._q.close()

    def close(self) -> Awaitable[None]:
        """Closes this handle at once, before returning (later calls raise
        ``ClosedError``). Awaiting the result is optional. Idempotent."""
        self._close_now()
        return _CLOSED

    async def aclose(self) -> None:
        """``close()`` as a coroutine (redis.asyncio's spelling)."""
        self._close_now()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self._close_now()


class DelayedQueue(_Closing, _api._Delayed, OnLoop):
    """A Redisson-compatible delayed queue; see ``delayq.DelayedQueue``."""

    __slots__ = ()

    async def iter(self, timeout: Optional[Seconds] = None) -> AsyncIterator[bytes]:
        """``async for value in q.iter(timeout=5)``: ends when a take times out."""
        while True:
            value = await self.take(timeout)
            if value is None:
                return
            yield value


class ReliableQueue(_Closing, _api._Reliable, OnLoop):
    """A reliable queue (at-least-once, acknowledged); see ``delayq.ReliableQueue``."""

    __slots__ = ()

    aclose = deferred(_api.ReliableQueue.close)
    _receive = twin(_api.ReliableQueue.receive)
    _receive_many = twin(_api.ReliableQueue.receive_many)
    _ack_many = twin(_api.ReliableQueue.ack_many)

    async def receive(self, timeout: Optional[Seconds] = None) -> Optional[Delivery]:
        """Receives the next ready message, waiting up to ``timeout`` seconds."""
        d = await self._receive(timeout)
        return None if d is None else _delivery(d)

    async def receive_many(self, n: int, timeout: Optional[Seconds] = None) -> list[Delivery]:
        """Receives up to ``n`` ready messages in one round trip, waiting up to ``timeout``
        seconds for the first; an empty list when the time passes."""
        return [_delivery(d) for d in await self._receive_many(n, timeout)]

    async def ack_many(self, deliveries: Iterable[Delivery]) -> list[bool]:
        """Acks many deliveries in one round trip; for each, whether its lease was held."""
        return await self._ack_many(deliveries)  # type: ignore[arg-type]

    async def consume(
        self, handler: Callable[[Delivery], Awaitable[Any]], concurrency: int = _delayq.CONCURRENCY
    ) -> None:
        """Runs ``await handler(delivery)`` on received messages, ``concurrency`` at a time:
        acks on return, nacks on an exception; extends the lease of a running handler.
        Runs until closed or cancelled; after ``close(deadline=...)``, once the running
        handlers finished and were settled.

        The handler is an ``async def`` function (or an object whose ``__call__`` is one)
        taking the delivery; any other raises ``InvalidArgument`` before anything reaches
        Redis (a blocking
        handler belongs to ``delayq.Client``'s ``consume``, in a thread). A call that
        returns no awaitable anyway fails (nack)."""
        awaited_handler(handler)

        async def call(d: _api.Delivery) -> Any:
            return await awaitable(handler(_delivery(d)))

        await _api.ReliableQueue.consume_async(self, call, concurrency)  # type: ignore[arg-type]

    async def iter(self, timeout: Optional[Seconds] = None) -> AsyncIterator[Delivery]:
        """``async for delivery in q.iter(timeout=5)``: ends when a receive times out."""
        while True:
            d = await self.receive(timeout)
            if d is None:
                return
            yield d

    def close(self, deadline: Optional[Seconds] = None) -> Awaitable[None]:
        """Closes this handle. Without ``deadline``, at once, before returning: later calls
        (and a pending receive) raise ``ClosedError``, a running ``consume`` returns,
        deliveries already received can still be settled. Awaiting the result is optional:
        ``await q.close()`` does the same as ``q.close()``, which works outside a loop too.

        With ``deadline`` (seconds), ``await q.close(deadline=30)`` is the graceful close
        (the same as ``await q.aclose(deadline=30)``): consumers stop receiving, handlers
        already running get up to ``deadline`` to finish and are acked or nacked, messages
        received but not handed to a handler go back untouched, then the handle closes. It
        returns a coroutine that does nothing until awaited; cancelling it closes at once.
        Idempotent."""
        if deadline is None:
            self._close_now()
            return _CLOSED
        return self.aclose(deadline)

    def _close_now(self) -> None:
        self._q.close(None, None)


class Client(_Closing, _api._Client[DelayedQueue, ReliableQueue], OnLoop):
    """An asyncio client. ``Client(url)`` connects at once (a short blocking connect);
    ``await Client.connect(url)`` connects without blocking the event loop. The options
    are those of ``delayq.Client``."""

    __slots__ = ()

    _queues = (DelayedQueue, ReliableQueue)
    connect = connector(_api._Client.__init__)
