"""Each consume takes the kind of handler it can run: the blocking one calls it in a
worker thread and never awaits what it returns, the asyncio one awaits it. A handler of
the other kind is refused before anything reaches Redis; one that returns the other kind
of result anyway fails its delivery (nack, with a text that says why), never acks it."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

import delayq
import delayq.asyncio

ran: list[str] = []


@pytest.fixture(autouse=True)
def _no_runs() -> Iterator[None]:
    ran.clear()
    yield
    ran.clear()


async def _async_handler(d: Any) -> None:
    ran.append("async")


async def _async_handler_of(tag: str, d: Any) -> None:
    ran.append(tag)


def _plain_handler(d: Any) -> None:
    ran.append("plain")


class _AsyncCall:
    async def __call__(self, d: Any) -> None:
        ran.append("async __call__")


class _PlainCall:
    def __call__(self, d: Any) -> None:
        ran.append("plain __call__")


class _Methods:
    async def handle_async(self, d: Any) -> None:
        ran.append("async method")

    def handle(self, d: Any) -> None:
        ran.append("plain method")


async def _async_generator(d: Any) -> Any:
    ran.append("async generator")
    yield


def _wrapping(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A sync decorator: the wrapper returns what ``f`` returns."""

    @functools.wraps(f)
    def wrapper(d: Any) -> Any:
        return f(d)

    return wrapper


ASYNC_HANDLERS: dict[str, Callable[[Any], Any]] = {
    "async def": _async_handler,
    "async method": _Methods().handle_async,
    "partial of async def": functools.partial(_async_handler_of, "partial"),
    "async __call__": _AsyncCall(),
    "partial of async __call__": functools.partial(_AsyncCall()),
}
PLAIN_HANDLERS: dict[str, Callable[[Any], Any]] = {
    "def": _plain_handler,
    "lambda": lambda d: ran.append("lambda"),
    "method": _Methods().handle,
    "__call__": _PlainCall(),
    "partial of def": functools.partial(_plain_handler),
    "builtin": print,
}


def _queue_untouched(client: delayq.Client, name: str) -> None:
    """The message offered before the refused consume is still ready, never delivered."""
    q = client.reliable_queue(name, scheduler=False)
    s = q.stats()
    assert (s.ready, s.in_flight, s.dead) == (1, 0, 0), s
    d = q.receive(5)
    assert d is not None and d.attempt == 1
    assert d.ack()


@pytest.mark.parametrize(
    "handler",
    [*ASYNC_HANDLERS.values(), _async_generator],
    ids=[*ASYNC_HANDLERS, "async generator"],
)
def test_the_blocking_consume_refuses_an_async_handler(
    url: str, name: str, handler: Callable[[Any], Any]
) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name)
        q.offer(b"job", 0, id="job")
        outcome: list[BaseException] = []

        def consume() -> None:
            try:
                q.consume(handler, concurrency=2)
            except BaseException as e:
                outcome.append(e)

        consumer = threading.Thread(target=consume, daemon=True)
        consumer.start()
        consumer.join(3)
        q.close()
        consumer.join(5)
        assert len(outcome) == 1, "consume took an async handler"
        assert isinstance(outcome[0], delayq.InvalidArgument)
        assert "delayq.asyncio" in str(outcome[0]), outcome[0]
        assert str(outcome[0]).startswith("invalid argument: "), outcome[0]
        assert ran == []
        _queue_untouched(client, name)


@pytest.mark.parametrize("kind", ["lambda", "sync wrapper"])
def test_the_blocking_consume_nacks_a_handler_that_returns_a_coroutine(
    url: str, name: str, kind: str
) -> None:
    handler = (lambda d: _async_handler(d)) if kind == "lambda" else _wrapping(_async_handler)
    failures: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "handler failed" in record.getMessage():
                failures.append(record.getMessage())

    logger = logging.getLogger("delayq")
    keep = Keep()
    logger.addHandler(keep)
    try:
        delayq.set_log_level(logging.INFO)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with delayq.Client(url) as client:
                q = client.reliable_queue(name, max_attempts=1)
                q.offer(b"job", 0, id="job")
                consumer = threading.Thread(target=q.consume, args=(handler, 1), daemon=True)
                consumer.start()
                deadline = time.monotonic() + 10
                while not q.dead_letters(1) and time.monotonic() < deadline:
                    time.sleep(0.01)
                q.close()
                consumer.join(10)
                dead = client.reliable_queue(name).dead_letters(5)
                assert [(x.id, x.attempts) for x in dead] == [("job", 1)]
                deadline = time.monotonic() + 5
                while not failures and time.monotonic() < deadline:
                    time.sleep(0.01)
            gc.collect()
    finally:
        logger.removeHandler(keep)
        delayq.set_log_level(logging.NOTSET)
    assert ran == [], "the coroutine ran"
    assert failures and "delayq.asyncio" in failures[0] and "coroutine" in failures[0], failures
    unawaited = [w for w in caught if "never awaited" in str(w.message)]
    assert unawaited == [], "the coroutine was not closed"


@pytest.mark.parametrize("flavour", ["delayq.asyncio", "consume_async"])
@pytest.mark.parametrize(
    "handler",
    [*PLAIN_HANDLERS.values(), _async_generator],
    ids=[*PLAIN_HANDLERS, "async generator"],
)
def test_the_asyncio_consume_refuses_a_plain_handler(
    url: str, name: str, handler: Callable[[Any], Any], flavour: str
) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as aclient:
            if flavour == "delayq.asyncio":
                consuming: Awaitable[None] = aclient.reliable_queue(name).consume(handler)
            else:
                with delayq.Client(url) as client:
                    # (The blocking handle's awaitable consume refuses it when called.)
                    with pytest.raises(delayq.InvalidArgument) as refused:
                        client.reliable_queue(name).consume_async(handler)
                    assert "async def" in str(refused.value), refused.value
                    assert str(refused.value).startswith("invalid argument: ")
                    return
            with pytest.raises(delayq.InvalidArgument) as refused:
                await asyncio.wait_for(consuming, 3)
            assert "async def" in str(refused.value), refused.value

    with delayq.Client(url) as client:
        client.reliable_queue(name).offer(b"job", 0, id="job")
        asyncio.run(main())
        assert ran == []
        _queue_untouched(client, name)


@pytest.mark.parametrize("handler", ASYNC_HANDLERS.values(), ids=ASYNC_HANDLERS)
def test_the_asyncio_consume_takes_any_async_callable(
    url: str, name: str, handler: Callable[[Any], Awaitable[Any]]
) -> None:
    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.reliable_queue(name)
            await q.offer(b"job", 0, id="job")
            consumer = asyncio.ensure_future(q.consume(handler))
            deadline = time.monotonic() + 10
            while not ran and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await q.aclose(deadline=5)
            await asyncio.wait_for(consumer, 10)
            s = await client.reliable_queue(name).stats()
            assert (s.ready, s.in_flight, s.dead) == (0, 0, 0), s

    asyncio.run(main())
    assert len(ran) == 1, ran


async def _looks_async(d: Any) -> None:
    pass


class _Lying:
    """Looks like an ``async def`` function (its code is one's, and it has asyncio's
    marker, as ``AsyncMock`` has), but is a plain callable."""

    _is_coroutine = getattr(asyncio.coroutines, "_is_coroutine", None)
    __name__ = "lying"
    __qualname__ = "lying"
    __code__ = _looks_async.__code__
    __defaults__ = None
    __kwdefaults__ = None
    __annotations__: dict[str, Any] = {}

    def __call__(self, d: Any) -> None:
        ran.append("lying")


def test_the_asyncio_consume_fails_a_delivery_whose_handler_returned_no_awaitable(
    url: str, name: str
) -> None:
    failures: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "handler failed" in record.getMessage():
                failures.append(record.getMessage())

    async def main() -> None:
        async with delayq.asyncio.Client(url) as client:
            q = client.reliable_queue(name, max_attempts=1)
            await q.offer(b"job", 0, id="job")
            consumer = asyncio.ensure_future(q.consume(_Lying()))  # type: ignore[arg-type]
            deadline = time.monotonic() + 10
            while not await q.dead_letters(1) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            q.close()
            await asyncio.wait_for(consumer, 10)
            dead = await client.reliable_queue(name).dead_letters(5)
            assert [(x.id, x.attempts) for x in dead] == [("job", 1)]
            deadline = time.monotonic() + 5
            while not failures and time.monotonic() < deadline:
                await asyncio.sleep(0.01)

    logger = logging.getLogger("delayq")
    keep = Keep()
    logger.addHandler(keep)
    try:
        delayq.set_log_level(logging.INFO)
        asyncio.run(main())
    finally:
        logger.removeHandler(keep)
        delayq.set_log_level(logging.NOTSET)
    assert ran == ["lying"]
    assert failures and "not an awaitable" in failures[0], failures


def _two_parameters(d: Any, extra: Any) -> None:
    ran.append("two parameters")


async def _async_no_parameter() -> None:
    ran.append("async no parameter")


async def _async_two_parameters(d: Any, extra: Any) -> None:
    ran.append("async two parameters")


# consume's arguments that give it no handler it could call with a delivery, and the
# words of the refusal.
BLOCKING_MISFITS: dict[str, tuple[tuple[Any, ...], str]] = {
    "None": ((None, 1), "handler must be callable with the delivery, not NoneType"),
    "concurrency alone": ((5,), "handler must be callable with the delivery, not int"),
    "str": (("handler",), "handler must be callable with the delivery, not str"),
    "no parameter": ((lambda: ran.append("no parameter"),), "cannot be called with one"),
    "two parameters": ((_two_parameters, 2), "cannot be called with one argument"),
    "keyword-only": ((lambda *, d: ran.append("keyword-only"),), "cannot be called with one"),
    "unbound method": ((_Methods.handle,), "cannot be called with one argument"),
}
ASYNC_MISFITS: dict[str, tuple[Any, str]] = {
    "None": (None, "handler must be callable with the delivery, not NoneType"),
    "no parameter": (_async_no_parameter, "cannot be called with one argument"),
    "two parameters": (_async_two_parameters, "cannot be called with one argument"),
    "unbound method": (_Methods.handle_async, "cannot be called with one argument"),
}


@pytest.mark.parametrize("case", BLOCKING_MISFITS)
def test_the_blocking_consume_refuses_what_it_could_not_call_with_a_delivery(
    url: str, name: str, case: str
) -> None:
    args, words = BLOCKING_MISFITS[case]
    with delayq.Client(url) as client:
        q = client.reliable_queue(name)
        q.offer(b"job", 0, id="job")
        outcome: list[BaseException] = []

        def consume() -> None:
            try:
                q.consume(*args)
            except BaseException as e:
                outcome.append(e)

        consumer = threading.Thread(target=consume, daemon=True)
        consumer.start()
        consumer.join(3)
        q.close()
        consumer.join(5)
        assert len(outcome) == 1, "consume took a handler it cannot call with a delivery"
        assert isinstance(outcome[0], delayq.InvalidArgument), outcome[0]
        assert words in str(outcome[0]), outcome[0]
        assert str(outcome[0]).startswith("invalid argument: "), outcome[0]
        assert ran == []
        _queue_untouched(client, name)


@pytest.mark.parametrize("flavour", ["delayq.asyncio", "consume_async"])
@pytest.mark.parametrize("case", ASYNC_MISFITS)
def test_the_asyncio_consume_refuses_what_it_could_not_call_with_a_delivery(
    url: str, name: str, case: str, flavour: str
) -> None:
    handler, words = ASYNC_MISFITS[case]

    async def main() -> None:
        async with delayq.asyncio.Client(url) as aclient:
            if flavour == "consume_async":
                with delayq.Client(url) as client:
                    with pytest.raises(delayq.InvalidArgument) as refused:
                        client.reliable_queue(name).consume_async(handler)
                    assert words in str(refused.value), refused.value
                    assert str(refused.value).startswith("invalid argument: ")
                    return
            consuming = aclient.reliable_queue(name).consume(handler)
            with pytest.raises(delayq.InvalidArgument) as refused:
                await asyncio.wait_for(consuming, 3)
            assert words in str(refused.value), refused.value

    with delayq.Client(url) as client:
        client.reliable_queue(name).offer(b"job", 0, id="job")
        asyncio.run(main())
        assert ran == []
        _queue_untouched(client, name)


class _Unreadable:
    """A handler whose signature cannot be read, as some builtins' (``print`` before
    Python 3.13)."""

    @property
    def __signature__(self) -> Any:
        raise ValueError("no signature found")

    def __call__(self, d: Any) -> None:
        ran.append("unreadable")


ACCEPTED: dict[str, Callable[..., Any]] = {
    "unreadable signature": _Unreadable(),
    "builtin": print,
    "defaulted second parameter": lambda d, extra=1: ran.append("defaulted"),
    "*args": lambda *args: ran.append("*args"),
    "class": type("Handler", (), {"__init__": lambda self, d: ran.append("class")}),
}


@pytest.mark.parametrize("case", ACCEPTED)
def test_the_blocking_consume_takes_any_callable_that_may_take_a_delivery(
    url: str, name: str, case: str
) -> None:
    with delayq.Client(url) as client:
        q = client.reliable_queue(name)
        q.offer(b"job", 0, id="job")
        consumer = threading.Thread(target=q.consume, args=(ACCEPTED[case],), daemon=True)
        consumer.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            s = q.stats()
            if (s.ready, s.in_flight) == (0, 0):
                break
            time.sleep(0.01)
        q.close(deadline=5)
        consumer.join(5)
        assert not consumer.is_alive()
        s = client.reliable_queue(name).stats()
        assert (s.delayed, s.ready, s.in_flight, s.dead) == (0, 0, 0, 0), s
    assert len(ran) == (0 if case == "builtin" else 1), ran
