"""The awaitable of every ``*_async`` call, over the native ``Pending`` of a call.

A native call made for an event loop queues its waiter (a future of the loop) on the
loop's ``Completer`` once core's call returned, without entering Python; the loop reads
the completer's socket and sets every waiter queued (``_wake``). The awaiting task then
claims the outcome. Cancelled, closed or dropped before, the call is given up (core gives
back what it took).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Generator
from typing import Any, Generic, TypeVar

from . import _delayq

T = TypeVar("T")

_completers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _delayq.Completer] = (
    weakref.WeakKeyDictionary()
)
_last: tuple[object, Any] = (None, None)


def _wake(completer: _delayq.Completer) -> None:
    """The loop's reader of ``completer``: sets the waiters of the calls that returned."""
    for waiter in completer.drain():
        if not waiter.done():  # done already: the task was cancelled
            waiter.set_result(None)


def loop() -> _delayq.Completer:
    """The completer of the running loop, made and registered with it on first use."""
    global _last
    running = asyncio.get_running_loop()
    last, completer = _last
    if last is running:
        return completer  # type: ignore[no-any-return]
    completer = _completers.get(running)
    if completer is None:
        completer = _delayq.Completer(running)
        running.add_reader(completer.fileno(), _wake, completer)
        _completers[running] = completer
    _last = (running, completer)
    return completer


class Awaiting(Generic[T]):
    """An awaitable call (made by a ``*_async`` method), running from the call on."""

    __slots__ = ("_call",)

    def __init__(self, call: _delayq.Pending) -> None:
        self._call = call

    def __await__(self) -> Generator[Any, None, T]:
        call = self._call
        try:
            while not call.ready():
                yield from call.waiter
            outcome: T = call.claim()
            return outcome
        except BaseException:
            call.give_up()
            raise
