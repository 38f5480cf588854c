"""Each call of a handle is written once, as its blocking method: the body passes
``self._aio`` first to the native call (None on a handle: the call blocks). ``twin`` makes
the awaitable twin of such a method, run on an ``_OnLoop`` whose ``_aio`` is the running
loop's ``Completer``: the native call then returns a ``Pending``, awaited by ``Awaiting``.
The asyncio flavour's classes (``OnLoop``) share their bases with the blocking ones, and
have the twin of each call those bases define (``call``) under the call's own name.

A native call made for an event loop queues its waiter (a future of the loop) on the
loop's ``Completer`` once core's call returned, without entering Python; the loop reads
the completer's socket and sets every waiter queued (``_wake``). The awaiting task then
claims the outcome. Cancelled, closed or dropped before, the call is given up (core gives
back what it took). An awaited ``consume`` queues its deliveries there too; each runs its
handler as a task (``_handle``).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import traceback
import weakref
from asyncio import coroutines
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Optional, TypeVar, cast

from . import _delayq
from ._errors import InvalidArgument

if TYPE_CHECKING:
    from typing_extensions import Concatenate, ParamSpec, Protocol, overload

    P = ParamSpec("P")
    R = TypeVar("R")
    R_co = TypeVar("R_co", covariant=True)
    C = TypeVar("C")

    class Twin(Protocol[P, R_co]):
        """An awaitable twin as type checkers see it: read from an instance, a call with
        the parameters of its definition; read from a class, the function."""

        @overload
        def __get__(self, obj: None, owner: Any) -> Twin[P, R_co]: ...
        @overload
        def __get__(self, obj: object, owner: Any) -> Callable[P, Coroutine[Any, Any, R_co]]: ...
        def __call__(
            self, obj: Any, /, *args: P.args, **kwargs: P.kwargs
        ) -> Coroutine[Any, Any, R_co]: ...

    class Call(Protocol[P, R_co]):
        """A call (``call``) as type checkers see it: read from an instance of the asyncio
        flavour (``OnLoop``), awaitable; from any other, blocking."""

        @overload
        def __get__(self, obj: None, owner: Any) -> Call[P, R_co]: ...
        @overload
        def __get__(self, obj: OnLoop, owner: Any) -> Callable[P, Coroutine[Any, Any, R_co]]: ...
        @overload
        def __get__(self, obj: object, owner: Any) -> Callable[P, R_co]: ...
        def __call__(self, obj: Any, /, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    class Connector(Protocol[P]):
        """``Client.connect_async`` as type checkers see it."""

        def __get__(self, obj: object, owner: type[C]) -> Callable[P, Coroutine[Any, Any, C]]: ...

    class Constructor(Protocol[P]):
        """``Client.connect`` (blocking) as type checkers see it."""

        def __get__(self, obj: object, owner: type[C]) -> Callable[P, C]: ...


T = TypeVar("T")

_completers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _delayq.Completer] = (
    weakref.WeakKeyDictionary()
)
_last: tuple[object, Any] = (None, None)


_handling: set[asyncio.Task[None]] = set()


class Consumer:
    """The handler of one awaited ``consume`` call, and the tasks running it now: when the
    call ends (cancelled, or closed past its deadline) they are cancelled, since core gave
    their messages back."""

    __slots__ = ("handler", "running")

    def __init__(self, handler: Callable[[Any], Any]) -> None:
        self.handler = handler
        self.running: set[asyncio.Task[None]] = set()

    def __call__(self, delivery: Any) -> Any:
        return self.handler(delivery)


async def consuming(call: Awaitable[None], consumer: Consumer) -> None:
    """Awaits an awaited ``consume`` call; once it ends, however, cancels the handler tasks
    still running (their messages were given back: their outcome would count for nothing)."""
    try:
        await call
    finally:
        for task in list(consumer.running):
            task.cancel()


def _wake(completer: _delayq.Completer) -> None:
    """The loop's reader of ``completer``: sets the waiters of the calls that returned, and
    starts a task for each delivery an awaited ``consume`` handed over."""
    for item in completer.drain():
        if type(item) is tuple:
            task = asyncio.ensure_future(_handle(*item))
            _handling.add(task)  # (the loop keeps only a weak reference)
            task.add_done_callback(_handling.discard)
            if type(item[0]) is Consumer:
                item[0].running.add(task)
                task.add_done_callback(item[0].running.discard)
        elif not item.done():  # done already: the task was cancelled
            item.set_result(None)


_MARKED = getattr(coroutines, "_is_coroutine", None)
"""What ``asyncio.iscoroutinefunction`` also takes for a coroutine function: a callable
whose ``_is_coroutine`` is this (``unittest.mock.AsyncMock`` before Python 3.10)."""


def _async_kind(handler: object) -> Optional[str]:
    """What calling ``handler`` returns by its definition, without running its body:
    "coroutine" for an ``async def`` function or method (also one marked so, as
    ``inspect.iscoroutinefunction`` or ``asyncio.iscoroutinefunction`` tells), "async
    generator" for an ``async def`` with ``yield``, None for anything else; an object's
    ``__call__`` and a ``functools.partial``'s function count."""
    while isinstance(handler, functools.partial):
        handler = handler.func
    candidates = [handler]
    if callable(handler) and not inspect.isroutine(handler) and not isinstance(handler, type):
        candidates.append(type(handler).__call__)
    for f in candidates:
        if inspect.iscoroutinefunction(f) or (
            _MARKED is not None and getattr(f, "_is_coroutine", None) is _MARKED
        ):
            return "coroutine"
        if inspect.isasyncgenfunction(f):
            return "async generator"
    return None


def _named(handler: object) -> str:
    return getattr(handler, "__qualname__", None) or type(handler).__qualname__


def _callable_with_a_delivery(handler: object) -> None:
    """Refuses (``InvalidArgument``) a ``consume`` handler that cannot be called with a
    delivery: one that is not callable, or whose signature takes no single positional
    argument (a signature that cannot be read, as some builtins', is not checked)."""
    if not callable(handler):
        raise InvalidArgument(
            "invalid argument: "
            "consume's handler must be callable with the delivery, not "
            f"{type(handler).__name__}: pass it first, as consume(handler, concurrency)"
        )
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(None)
    except TypeError as e:
        raise InvalidArgument(
            "invalid argument: "
            f"consume's handler {_named(handler)}{signature} cannot be called with one "
            f"argument, the delivery ({e})"
        ) from None


def blocking_handler(handler: Callable[[Any], object]) -> Callable[[Any], None]:
    """The handler of a blocking ``consume``: refuses (``InvalidArgument``) one that cannot
    take a delivery (``_callable_with_a_delivery``) and an async function
    (``_async_kind``), whose body would never run; calls any other so that a delivery
    whose call returned an awaitable anyway fails (nack) rather than being acked unrun."""
    _callable_with_a_delivery(handler)
    kind = _async_kind(handler)
    if kind is not None:
        raise InvalidArgument(
            "invalid argument: "
            f"consume got {_named(handler)}, an async function ({kind}): a blocking "
            "consume calls its handler in a worker thread and does not await it, so its "
            "body would never run; consume it with delayq.asyncio's client "
            "(`await q.consume(handler)` awaits handlers), or pass a plain function"
        )

    def call(delivery: Any) -> None:
        result = handler(delivery)
        if inspect.isawaitable(result) or inspect.isasyncgen(result):
            if inspect.iscoroutine(result) or inspect.isgenerator(result):
                result.close()  # never run, and no "never awaited" warning
            raise TypeError(
                f"the handler returned a {type(result).__name__} object, which a blocking "
                "consume does not await: the handler's work was not done, so the delivery "
                "is nacked; consume async handlers with delayq.asyncio's client"
            )

    return call


def awaited_handler(handler: Callable[[Any], Awaitable[Any]]) -> None:
    """Refuses (``InvalidArgument``) a handler that an awaited ``consume`` could not call
    with a delivery (``_callable_with_a_delivery``) or await: one whose call returns no
    coroutine by its definition (``_async_kind``)."""
    _callable_with_a_delivery(handler)
    if _async_kind(handler) != "coroutine":
        raise InvalidArgument(
            "invalid argument: "
            f"consume got {_named(handler)}, which is not an `async def` function: the "
            "asyncio consume awaits what its handler returns. Define the handler with "
            "`async def` (or give it an `async def __call__`), or run a blocking handler "
            "with delayq.Client's consume (in a thread)"
        )


def awaitable(result: Any) -> Awaitable[Any]:
    """What an awaited ``consume``'s handler returned, if it is awaitable; else a
    ``TypeError`` that fails the delivery (the handler did not keep to its type)."""
    if not inspect.isawaitable(result):
        raise TypeError(
            f"the handler returned {type(result).__name__}, not an awaitable: the asyncio "
            "consume awaits what its handler returns (define it with `async def`)"
        )
    return result


async def _handle(handler: Callable[[Any], Awaitable[Any]], delivery: Any, reply: Any) -> None:
    """Runs an awaited ``consume``'s handler and reports its outcome to core: returned
    (ack) or raised (nack, described with its traceback, which core logs; a
    ``BaseException`` is raised on after that). A handler that returned no awaitable
    fails (``awaitable``)."""
    try:
        await awaitable(handler(delivery))
    except BaseException as e:
        reply.send("".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip())
        if not isinstance(e, Exception):
            raise
    else:
        reply.send(None)


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


def _wait(call: _delayq.Pending) -> Generator[Any, None, Any]:
    """Waits for ``call`` on the running loop and claims its outcome."""
    try:
        while not call.ready():
            yield from call.waiter
        return call.claim()
    except BaseException:
        call.give_up()
        raise


class Awaiting(Coroutine[Any, Any, T]):
    """An awaitable call (made by a twin), running from the call on. A coroutine, so that
    ``asyncio.create_task`` takes it too."""

    __slots__ = ("_steps",)

    def __init__(self, call: _delayq.Pending) -> None:
        self._steps = _wait(call)

    def __await__(self) -> Generator[Any, None, T]:
        return self._steps

    def send(self, value: Any) -> Any:
        return self._steps.send(value)

    def throw(self, *exc: Any) -> Any:
        return self._steps.throw(*exc)

    def close(self) -> None:
        self._steps.close()


class Way:
    """The ``self`` a call's definition gets when it runs for a twin or a variant: the
    native handle ``_q``, ``_aio`` (None, or the running loop's completer) and ``_full``
    (an offer's outcome rather than its id)."""

    __slots__ = ("_q", "_aio", "_full")

    def __init__(self, q: Any, aio: Optional[_delayq.Completer], full: bool) -> None:
        self._q, self._aio, self._full = q, aio, full


def made(f: Callable[..., Any], signature: inspect.Signature, returns: str) -> None:
    """Gives ``f``, made from a definition, the definition's signature returning
    ``returns``; the class names it after its attribute (``_api._Handle``)."""
    f.__signature__ = signature.replace(return_annotation=returns)  # type: ignore[attr-defined]
    f.__made__ = True  # type: ignore[attr-defined]


def call(definition: Callable[Concatenate[Any, P], R]) -> Call[P, R]:
    """Marks the blocking method ``definition`` of a base shared by both flavours as a
    call: the asyncio flavour's class (``OnLoop``) has its twin under the same name."""
    definition.__call_of_both__ = True  # type: ignore[attr-defined]
    return definition


class OnLoop:
    """The base of the asyncio flavour's classes: each call of their bases (``call``) is
    its awaitable twin here (a coroutine function, ``deferred``), unless the class
    defines that name itself."""

    __slots__ = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__mro__:
            for name, definition in list(vars(base).items()):
                if getattr(definition, "__call_of_both__", False) and name not in vars(cls):
                    awaitable: Any = deferred(definition)
                    awaitable.__name__, awaitable.__qualname__ = name, f"{cls.__qualname__}.{name}"
                    setattr(cls, name, awaitable)


def _like(awaitable: Callable[..., Any], definition: Callable[..., Any]) -> None:
    """Gives ``awaitable``, the twin of ``definition``, its docstring and signature."""
    awaitable.__doc__ = definition.__doc__
    signature = inspect.signature(definition)
    made(awaitable, signature, f"Awaitable[{signature.return_annotation}]")


def twin(definition: Callable[Concatenate[Any, P], R]) -> Twin[P, R]:
    """The awaitable twin of the blocking method ``definition``: the same parameters and
    docstring, the call made at once for the running loop (the definition returns its
    ``Pending``)."""
    run: Callable[..., Any] = definition

    def awaitable(self: Any, *args: Any, **kwargs: Any) -> Awaiting[Any]:
        return Awaiting(run(Way(self._q, loop(), self._full), *args, **kwargs))

    _like(awaitable, definition)
    return cast("Twin[P, R]", awaitable)


def deferred(definition: Callable[Concatenate[Any, P], R]) -> Twin[P, R]:
    """``twin`` as a coroutine function: the call is made once the coroutine runs, as
    ``async def`` methods do (``loop.create_task(q.take())`` before the loop runs)."""
    run: Callable[..., Any] = definition

    async def awaitable(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await Awaiting(run(Way(self._q, loop(), self._full), *args, **kwargs))

    _like(awaitable, definition)
    return cast("Twin[P, R]", awaitable)


def connector(init: Callable[Concatenate[Any, P], None]) -> Connector[P]:
    """``connect_async`` of a client class whose ``__init__`` is ``init``."""

    async def connect(cls: type[Any], *args: Any, **kwargs: Any) -> Any:
        way = Way(None, loop(), False)
        init(way, *args, **kwargs)
        connected = object.__new__(cls)
        connected._q = await Awaiting(way._q)
        return connected

    connect.__doc__ = """Connects without blocking the event loop; returns an awaitable of a
        `Client`. The options are those of `Client(...)`."""
    made(connect, inspect.signature(init), "Awaitable[Client]")
    return cast("Connector[P]", classmethod(connect))


def constructor(init: Callable[Concatenate[Any, P], None]) -> Constructor[P]:
    """``connect`` of a blocking client class whose ``__init__`` is ``init``: the class
    called, under the name the other languages give it."""

    def connect(cls: type[Any], *args: Any, **kwargs: Any) -> Any:
        return cls(*args, **kwargs)

    connect.__doc__ = """Connects (blocking) and returns a `Client`: the same as `Client(...)`,
        with the same options."""
    made(connect, inspect.signature(init), "Client")
    return cast("Constructor[P]", classmethod(connect))
