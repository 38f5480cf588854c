"""Every error kind, raised before anything reaches Redis for bad arguments."""

from __future__ import annotations

import asyncio
import math
from datetime import timedelta

import pytest

import delayq
import delayq.asyncio
from conftest import RedisServer

HUGE = 10**400  # over the largest float (about 1.8e308) and any machine integer


def short(value: object) -> str:
    """A readable test id for huge integers."""
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:4]}...({len(text)}_digits)"


@pytest.mark.parametrize(
    "delay",
    [-1, -0.001, math.nan, math.inf, -math.inf, 1e300, True, "1", None, HUGE, -HUGE],
    ids=short,
)
def test_bad_delays_are_invalid_arguments(
    url: str, name: str, redis_server: RedisServer, delay: object
) -> None:
    with delayq.Client(url) as client:
        q = client.delayed_queue(name, scheduler=False)
        with pytest.raises(delayq.InvalidArgument):
            q.offer(b"x", delay)  # type: ignore[arg-type]
        assert redis_server.cli("EXISTS", f"redisson_delay_queue:{{{name}}}") == "0"


@pytest.mark.parametrize("value", [3, 1.5, None, object(), [1, 2]])
def test_values_of_the_wrong_type_are_invalid_arguments(url: str, name: str, value: object) -> None:
    with delayq.Client(url) as client:
        q = client.delayed_queue(name, scheduler=False)
        with pytest.raises(delayq.InvalidArgument) as info:
            q.offer(value, 1)  # type: ignore[arg-type]
        assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)
        with pytest.raises(delayq.InvalidArgument):
            q.offer_all([(b"ok", 1), (value, 1)])  # type: ignore[list-item]
        assert q.size() == 0


def test_an_empty_name_is_an_invalid_argument(url: str) -> None:
    with delayq.Client(url) as client:
        with pytest.raises(delayq.InvalidArgument):
            client.delayed_queue("")
        with pytest.raises(delayq.InvalidArgument):
            client.reliable_queue("")


def test_wrong_type_writes_nothing(url: str, name: str, redis_server: RedisServer) -> None:
    redis_server.cli("SET", name, "a string")
    with delayq.Client(url) as client:
        q = client.delayed_queue(name, scheduler=False)
        with pytest.raises(delayq.WrongTypeError):
            q.offer(b"x", 0)
        with pytest.raises(delayq.WrongTypeError):
            q.poll()
    assert redis_server.cli("EXISTS", f"redisson_delay_queue:{{{name}}}") == "0"
    assert redis_server.cli("GET", name) == "a string"


def test_connection_errors_hide_credentials() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(delayq.ConnectionError) as info:
        delayq.Client(f"redis://user:hunter2@127.0.0.1:{port}")
    assert "hunter2" not in str(info.value)
    assert isinstance(info.value, ConnectionError)
    with pytest.raises(delayq.InvalidArgument):
        delayq.Client("http://127.0.0.1:1")


def test_every_error_is_a_delayq_error() -> None:
    for cls in (
        delayq.InvalidArgument,
        delayq.ConnectionError,
        delayq.TimeoutError,
        delayq.WrongTypeError,
        delayq.ClosedError,
        delayq.ServerError,
    ):
        assert issubclass(cls, delayq.DelayqError)
    assert issubclass(delayq.TimeoutError, TimeoutError)


@pytest.mark.parametrize("delay", [HUGE, -HUGE, 2**64, -(2**64)], ids=short)
def test_huge_integer_delays_and_timeouts_are_invalid_arguments(
    url: str, name: str, redis_server: RedisServer, delay: int
) -> None:
    with delayq.Client(url) as client:
        dq = client.delayed_queue(name, scheduler=False)
        rq = client.reliable_queue(name, scheduler=False)
        with pytest.raises(delayq.InvalidArgument):
            dq.offer(b"x", delay)
        with pytest.raises(delayq.InvalidArgument):
            dq.offer_all([(b"x", delay)])
        with pytest.raises(delayq.InvalidArgument):
            rq.offer(b"x", delay)
        with pytest.raises(delayq.InvalidArgument):
            rq.reschedule("some-id", delay)
        with pytest.raises(delayq.InvalidArgument):
            dq.take(timeout=delay)
        with pytest.raises(delayq.InvalidArgument):
            rq.receive(timeout=delay)
        with pytest.raises(delayq.InvalidArgument):
            client.reliable_queue(name, visibility_timeout=delay)
        with pytest.raises(delayq.InvalidArgument):
            client.delayed_queue(name, reconcile_interval=delay)
    assert redis_server.cli("EXISTS", f"redisson_delay_queue:{{{name}}}") == "0"
    assert redis_server.cli("KEYS", f"*{name}*") == ""


@pytest.mark.parametrize("count", [-1, -(2**70), 2**70, HUGE, 1.0, "3", None, True], ids=short)
def test_bad_counts_are_invalid_arguments(url: str, name: str, count: object) -> None:
    async def consume_async() -> None:
        async with delayq.asyncio.Client(url) as aclient:
            aq = aclient.reliable_queue(name, scheduler=False)
            with pytest.raises(delayq.InvalidArgument):
                await aq.dead_letters(count)  # type: ignore[arg-type]
            with pytest.raises(delayq.InvalidArgument):
                await aq.consume(_never_called_async, concurrency=count)  # type: ignore[arg-type]

    with delayq.Client(url) as client:
        if count is not None:  # max_attempts=None: the stored setting
            with pytest.raises(delayq.InvalidArgument):
                client.reliable_queue(name, max_attempts=count)  # type: ignore[arg-type]
            with pytest.raises(delayq.InvalidArgument):
                client.reliable_queue(name, shards=count)  # type: ignore[arg-type]
        q = client.reliable_queue(name, scheduler=False)
        with pytest.raises(delayq.InvalidArgument):
            q.dead_letters(count)  # type: ignore[arg-type]
        with pytest.raises(delayq.InvalidArgument):
            q.consume(_never_called, concurrency=count)  # type: ignore[arg-type]
    asyncio.run(consume_async())


def _never_called(d: delayq.Delivery) -> None:
    raise AssertionError("a consume with a bad concurrency ran its handler")


async def _never_called_async(d: delayq.asyncio.Delivery) -> None:
    raise AssertionError("a consume with a bad concurrency ran its handler")


def test_durations_take_int_float_or_timedelta_everywhere(url: str, name: str) -> None:
    for seconds in (2, 2.0, timedelta(seconds=2)):
        with delayq.Client(url) as client:
            client.delayed_queue(name, reconcile_interval=seconds).close()
            q = client.reliable_queue(
                name,
                visibility_timeout=seconds,
                backoff_base=seconds,
                backoff_max=seconds,
                reconcile_interval=seconds,
            )
            q.offer(b"x", seconds)
            client.reliable_queue(name, backoff=[seconds, seconds]).close()

        async def main(s: object = seconds) -> None:
            async with delayq.asyncio.Client(url) as aclient:
                aclient.delayed_queue(name, reconcile_interval=s).close()  # type: ignore[arg-type]
                aclient.reliable_queue(
                    name,
                    backoff_base=s,  # type: ignore[arg-type]
                    backoff_max=s,  # type: ignore[arg-type]
                    reconcile_interval=s,  # type: ignore[arg-type]
                ).close()

        asyncio.run(main())


@pytest.mark.parametrize(
    "bad", [-1, math.nan, math.inf, HUGE, timedelta(seconds=-1), True, "1"], ids=short
)
def test_bad_duration_options_are_invalid_arguments(url: str, name: str, bad: object) -> None:
    with delayq.Client(url) as client:
        for option in (
            "visibility_timeout",
            "backoff_base",
            "backoff_max",
            "dead_letter_retention",
            "idempotency_retention",
            "reconcile_interval",
        ):
            with pytest.raises(delayq.InvalidArgument):
                client.reliable_queue(name, **{option: bad})  # type: ignore[arg-type]
        with pytest.raises(delayq.InvalidArgument):
            client.reliable_queue(name, backoff=[1, bad])  # type: ignore[list-item]
        with pytest.raises(delayq.InvalidArgument):
            client.delayed_queue(name, reconcile_interval=bad)  # type: ignore[arg-type]


def test_invalid_argument_error_is_an_alias() -> None:
    assert delayq.InvalidArgumentError is delayq.InvalidArgument
    assert "InvalidArgumentError" in delayq.__all__
    assert issubclass(delayq.InvalidArgumentError, delayq.DelayqError)
    with pytest.raises(delayq.InvalidArgumentError):
        delayq.Client("http://127.0.0.1:1")
