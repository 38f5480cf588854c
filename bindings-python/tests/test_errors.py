"""Every error kind, raised before anything reaches Redis for bad arguments."""

from __future__ import annotations

import math

import pytest

import delayq
from conftest import RedisServer


@pytest.mark.parametrize(
    "delay", [-1, -0.001, math.nan, math.inf, -math.inf, 1e300, True, "1", None]
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
