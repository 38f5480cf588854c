"""Every error kind, raised before anything reaches Redis for bad arguments."""

from __future__ import annotations

import asyncio
import functools
import math
import pickle
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, Union

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


def test_a_timedelta_delay_is_exact_up_to_the_limit(url: str, name: str) -> None:
    # 2**50 ms is the longest delay; through float seconds it came out 1 ms over.
    longest = timedelta(milliseconds=2**50)
    with delayq.Client(url) as client:
        q = client.delayed_queue(name)
        start = q.offer(b"now", 0)
        due = q.offer(b"last", longest)
        assert 2**50 <= due - start < 2**50 + 60_000, due - start
        with pytest.raises(delayq.InvalidArgument, match="at most 1125899906842624 ms"):
            q.offer(b"over", longest + timedelta(milliseconds=1))
        with pytest.raises(delayq.InvalidArgument, match="at most 1125899906842624 ms"):
            q.offer(b"over", longest + timedelta(microseconds=1))
        assert not q.contains(b"over")


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


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (-1, "reconcile_interval must not be negative, got -1 s"),
        (-0.5, "reconcile_interval must not be negative, got -0.5 s"),
        (math.inf, "reconcile_interval must be finite"),
        ("1", "reconcile_interval must be int, float or timedelta seconds, not str"),
    ],
    ids=short,
)
def test_a_bad_duration_option_is_named_in_its_error(
    url: str, name: str, bad: object, words: str
) -> None:
    with delayq.Client(url) as client:
        for kind in ("delayed_queue", "reliable_queue"):
            with pytest.raises(delayq.InvalidArgument) as info:
                getattr(client, kind)(name, reconcile_interval=bad)
            assert words in str(info.value), (kind, str(info.value))
            assert "timeout" not in str(info.value)


@pytest.mark.parametrize(
    "option",
    [
        "visibility_timeout",
        "backoff_base",
        "backoff_max",
        "dead_letter_retention",
        "idempotency_retention",
    ],
)
def test_a_bad_duration_setting_is_named_in_its_error(url: str, name: str, option: str) -> None:
    with delayq.Client(url) as client:
        with pytest.raises(delayq.InvalidArgument) as info:
            client.reliable_queue(name, **{option: -1})  # type: ignore[arg-type]
        assert f"{option} must not be negative, got -1 s" in str(info.value)
        with pytest.raises(delayq.InvalidArgument) as info:
            client.reliable_queue(name, **{option: -0.5})  # type: ignore[arg-type]
        assert f"{option} must not be negative, got -0.5 s" in str(info.value)
        with pytest.raises(delayq.InvalidArgument) as info:
            client.reliable_queue(name, backoff=[1, -1])
        assert "each delay of backoff must not be negative" in str(info.value)


ERROR_CLASSES = [
    delayq.DelayqError,
    delayq.InvalidArgument,
    delayq.ConnectionError,
    delayq.TimeoutError,
    delayq.WrongTypeError,
    delayq.ClosedError,
    delayq.ServerError,
]


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_error_classes_are_shown_and_pickled_as_delayq_names(cls: type[Exception]) -> None:
    assert cls.__module__ == "delayq" and getattr(delayq, cls.__qualname__) is cls
    error = cls("what went wrong")
    shown = traceback.format_exception_only(type(error), error)
    assert shown == [f"delayq.{cls.__name__}: what went wrong\n"], shown
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls and back.args == error.args


def test_a_raised_error_is_shown_as_a_delayq_name() -> None:
    with pytest.raises(delayq.InvalidArgument) as info:
        delayq.Client("http://127.0.0.1:1")
    shown = "".join(traceback.format_exception(info.type, info.value, info.tb))
    assert "\ndelayq.InvalidArgument: " in shown, shown
    assert "delayq._errors" not in shown, shown


def test_invalid_argument_error_is_an_alias() -> None:
    assert delayq.InvalidArgumentError is delayq.InvalidArgument
    assert "InvalidArgumentError" in delayq.__all__
    assert issubclass(delayq.InvalidArgumentError, delayq.DelayqError)
    with pytest.raises(delayq.InvalidArgumentError):
        delayq.Client("http://127.0.0.1:1")


# Calls with one bad argument each, made on a reliable queue in every form (blocking, the
# `*_async` twin, the asyncio flavour): (method, args, kwargs, words of the message).
BAD_RELIABLE_CALLS: dict[str, tuple[str, tuple[Any, ...], dict[str, Any], str]] = {
    "offer-id-int": ("offer", (b"x", 0), {"id": 5}, "id must be a str, not int"),
    "offer-id-bytes": ("offer", (b"x", 0), {"id": b"a"}, "id must be a str, not bytes"),
    "offer-id-surrogate": ("offer", (b"x", 0), {"id": "\ud800"}, "id must be valid UTF-8"),
    "offer-shard_key-int": ("offer", (b"x", 0), {"shard_key": 7}, "shard_key must be a str"),
    "offer-payload-surrogate": ("offer", ("\ud800", 1), {}, "value must be valid UTF-8"),
    "offer_with_outcome-id": ("offer_with_outcome", (b"x", 0, 5), {}, "id must be a str"),
    "cancel-int": ("cancel", (5,), {}, "id must be a str, not int"),
    "cancel-none": ("cancel", (None,), {}, "id must be a str, not NoneType"),
    "reschedule-bytes": ("reschedule", (b"a", 1), {}, "id must be a str, not bytes"),
    "requeue_dead-str": ("requeue_dead", ("abc",), {}, "ids must be a list of str, not str"),
    "requeue_dead-int": ("requeue_dead", (5,), {}, "ids must be a list of str, not int"),
    "requeue_dead-item": ("requeue_dead", (["a", 5],), {}, "each item of ids must be a str"),
    "offer_all-short": (
        "offer_all",
        ([("a",)],),
        {},
        "shard_key]]) tuple of 2 to 4 items, not a tuple of length 1",
    ),
    "offer_all-long": ("offer_all", ([("a", 1, "i", "k", 0)],), {}, "tuple of length 5"),
    "offer_all-not-iterable": ("offer_all", (5,), {}, "must be an iterable of tuples, not int"),
    "offer_all-str": ("offer_all", ("ab",), {}, "must be an iterable of tuples, not str"),
    "offer_all-item-int": ("offer_all", ([5],), {}, "tuple of 2 to 4 items, not int"),
    "offer_all-item-bytes": ("offer_all", ([b"ab"],), {}, "tuple of 2 to 4 items, not bytes"),
    "offer_all-id-int": ("offer_all", ([("a", 1, 5)],), {}, "id must be a str, not int"),
    "offer_all-key-int": ("offer_all", ([["a", 1, None, 5]],), {}, "shard_key must be a str"),
    "offer_all-surrogate": ("offer_all", ([("\ud800", 1)],), {}, "value must be valid UTF-8"),
    "offer_all_with_outcome-short": ("offer_all_with_outcome", ([("a",)],), {}, "length 1"),
    "ack_many-not-iterable": ("ack_many", (5,), {}, "iterable of Delivery objects, not int"),
}


def _bad_calls(q: Any, suffix: str = "") -> Iterator[tuple[str, Callable[[], Any], str]]:
    for case, (method, args, kwargs, words) in BAD_RELIABLE_CALLS.items():
        yield case, functools.partial(getattr(q, method + suffix), *args, **kwargs), words


@pytest.mark.parametrize("form", ["blocking", "twin", "asyncio"])
def test_bad_ids_names_and_messages_are_invalid_arguments(
    url: str, name: str, redis_server: RedisServer, form: str
) -> None:
    def check(case: str, info: pytest.ExceptionInfo[delayq.InvalidArgument], words: str) -> None:
        assert info.type is delayq.InvalidArgument, case
        assert words in str(info.value), (case, str(info.value))
        assert redis_server.cli("KEYS", f"*{name}*") == "", case

    if form == "blocking":
        with delayq.Client(url) as client:
            for case, call, words in _bad_calls(client.reliable_queue(name, scheduler=False)):
                with pytest.raises(delayq.InvalidArgument) as info:
                    call()
                check(case, info, words)
        return

    async def main() -> None:
        client: Any = delayq.Client(url) if form == "twin" else delayq.asyncio.Client(url)
        q = client.reliable_queue(name, scheduler=False)
        for case, call, words in _bad_calls(q, "_async" if form == "twin" else ""):
            with pytest.raises(delayq.InvalidArgument) as info:
                await call()
            check(case, info, words)
        client.close()

    asyncio.run(main())


BAD_DELAYED_CALLS: dict[str, tuple[str, tuple[Any, ...], str]] = {
    "offer-surrogate": ("offer", ("\ud800", 1), "a str value must be valid UTF-8"),
    "contains-surrogate": ("contains", ("a\udfffb",), "a str value must be valid UTF-8"),
    "remove-surrogate": ("remove", ("\udc80",), "a str value must be valid UTF-8"),
    "offer_all-short": ("offer_all", ([("a",)],), "(value, delay) tuple, not a tuple of length 1"),
    "offer_all-long": ("offer_all", ([["a", 1, 2]],), "tuple, not a list of length 3"),
    "offer_all-not-iterable": ("offer_all", (5,), "must be an iterable of (value, delay) tuples"),
    "offer_all-bytes": ("offer_all", (b"ab",), "tuples, not bytes"),
    "offer_all-item-str": ("offer_all", (["ab"],), "(value, delay) tuple, not str"),
    "offer_all-surrogate": ("offer_all", ([(b"ok", 1), ("\ud800", 1)],), "valid UTF-8"),
}


@pytest.mark.parametrize("form", ["blocking", "twin", "asyncio"])
@pytest.mark.parametrize("case", list(BAD_DELAYED_CALLS))
def test_bad_delayed_queue_arguments_are_invalid_arguments(
    url: str, name: str, redis_server: RedisServer, form: str, case: str
) -> None:
    method, args, words = BAD_DELAYED_CALLS[case]

    async def main() -> None:
        client: Any = delayq.asyncio.Client(url) if form == "asyncio" else delayq.Client(url)
        q = client.delayed_queue(name, scheduler=False)
        call = getattr(q, method + ("_async" if form == "twin" else ""))
        with pytest.raises(delayq.InvalidArgument) as info:
            if form == "blocking":
                call(*args)
            else:
                await call(*args)
        assert words in str(info.value)
        client.close()

    asyncio.run(main())
    assert redis_server.cli("KEYS", f"*{name}*") == ""


@pytest.mark.parametrize("flavour", ["blocking", "asyncio"])
@pytest.mark.parametrize(
    ("kind", "bad", "words"),
    [
        ("delayed_queue", None, "name must be a str, not NoneType"),
        ("delayed_queue", 5, "name must be a str, not int"),
        ("delayed_queue", b"q", "name must be a str, not bytes"),
        ("delayed_queue", "q\ud800", "name must be valid UTF-8"),
        ("reliable_queue", 5, "name must be a str, not int"),
        ("reliable_queue", None, "name must be a str, not NoneType"),
        ("reliable_queue", "q\ud800", "name must be valid UTF-8"),
    ],
)
def test_queue_names_that_are_not_str_are_invalid_arguments(
    own_server: RedisServer, flavour: str, kind: str, bad: object, words: str
) -> None:
    url = own_server.url
    client: Any = delayq.Client(url) if flavour == "blocking" else delayq.asyncio.Client(url)
    with pytest.raises(delayq.InvalidArgument) as info:
        getattr(client, kind)(bad)
    assert words in str(info.value)
    assert isinstance(info.value, TypeError)  # what callers catching TypeError still get
    client.close()
    assert own_server.cli("DBSIZE") == "0"


@pytest.fixture(scope="module")
def own_server() -> Iterator[RedisServer]:
    """A server no other test writes to (its DBSIZE stays 0)."""
    server = RedisServer()
    yield server
    server.stop()


@pytest.mark.parametrize(
    ("backoff", "words"),
    [
        (True, "backoff must be a list of delays, not bool"),
        ("12", "backoff must be a list of delays, not str"),
        ([1, "2"], "each delay of backoff must be int, float or timedelta seconds, not str"),
        # A mapping would give its keys, a set its items in no order of their own.
        ({1: 2}, "backoff must be a list of delays in order, not dict"),
        ({1: 2}.keys(), "backoff must be a list of delays in order, not dict_keys"),
        ({1, 2}, "backoff must be a list of delays in order, not set"),
        (frozenset([1]), "backoff must be a list of delays in order, not frozenset"),
    ],
    ids=["bool", "str", "item-str", "dict", "dict_keys", "set", "frozenset"],
)
def test_a_bad_backoff_schedule_is_an_invalid_argument(
    url: str, name: str, backoff: object, words: str
) -> None:
    with delayq.Client(url) as client:
        with pytest.raises(delayq.InvalidArgument) as info:
            client.reliable_queue(name, backoff=backoff)  # type: ignore[arg-type]
    assert words in str(info.value)


def test_offer_all_takes_any_sequence_of_the_right_length(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        dq = client.delayed_queue(name, scheduler=False)
        assert len(dq.offer_all([["a", 60], (b"b", 60)])) == 2
        more: list[list[Union[str, int]]] = [["c", 60]]
        assert len(dq.offer_all(iter(more))) == 1
        assert dq.read_all() == [b"a", b"b", b"c"]
        rq = client.reliable_queue(name, scheduler=False)
        ids = rq.offer_all(
            [["p", 60], ["p", 60, "id-1"], ("p", 60, "id-2", "key"), ["p", 60, None, None]]
        )
        assert ids[1:3] == ["id-1", "id-2"]
        assert rq.stats().delayed == 4
        assert rq.offer_all_with_outcome([["p", 60, "id-1"]])[0].created is False
        assert rq.requeue_dead(("no-such-id",)) == 0
        assert rq.requeue_dead(None) == 0

    async def main() -> None:
        async with delayq.asyncio.Client(url) as aclient:
            aq = aclient.reliable_queue(name, scheduler=False)
            assert await aq.offer_all([["p", 60, "id-3"]]) == ["id-3"]
            assert await aclient.delayed_queue(name).offer_all([["d", 60]])

    asyncio.run(main())


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda url: delayq.Client(url, cluster=1), "cluster must be a bool, not int"),
        (lambda url: delayq.Client(url, durability_aof="yes"), "durability_aof must be a bool"),
        (lambda url: delayq.Client(url, tls_ca_file=5), "tls_ca_file must be a str or os.PathLike"),
        (lambda url: delayq.Client(url, tls_key_file=["k"]), "tls_key_file must be a str"),
        (lambda url: delayq.asyncio.Client(url, cluster="no"), "cluster must be a bool, not str"),
    ],
)
def test_bad_client_options_are_invalid_arguments(
    own_server: RedisServer, call: Callable[[str], Any], words: str
) -> None:
    with pytest.raises(delayq.InvalidArgument) as info:
        call(own_server.url)
    assert words in str(info.value)
    assert own_server.cli("DBSIZE") == "0"


@pytest.mark.parametrize("flavour", ["blocking", "asyncio"])
@pytest.mark.parametrize(
    ("kind", "options", "words"),
    [
        ("delayed_queue", {"scheduler": 0}, "scheduler must be a bool, not int"),
        ("reliable_queue", {"scheduler": "yes"}, "scheduler must be a bool, not str"),
        ("reliable_queue", {"update_settings": 1}, "update_settings must be a bool, not int"),
    ],
)
def test_bad_boolean_queue_options_are_invalid_arguments(
    own_server: RedisServer, flavour: str, kind: str, options: dict[str, object], words: str
) -> None:
    url = own_server.url
    client: Any = delayq.Client(url) if flavour == "blocking" else delayq.asyncio.Client(url)
    with pytest.raises(delayq.InvalidArgument) as info:
        getattr(client, kind)("q", **options)
    assert words in str(info.value)
    client.close()
    assert own_server.cli("DBSIZE") == "0"


_OVERSIZED = """
import resource, sys
import delayq
form = sys.argv[2]
n = 512 * 1024 * 1024 + 1
make = {"bytes": lambda: b"x" * n, "str": lambda: "x" * n}
make.update(bytearray=lambda: bytearray(b"x") * n, memoryview=lambda: memoryview(b"x" * n))
value = make[form]()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with delayq.Client(sys.argv[1]) as client:
    q = client.reliable_queue("oversized", scheduler=False)
    try:
        q.offer(value, 0)
    except delayq.InvalidArgument as e:
        assert "over the limit" in str(e), e
    else:
        raise AssertionError("offered")
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) // 1024)
"""


@pytest.mark.parametrize("form", ["bytes", "str", "bytearray", "memoryview"])
def test_a_value_over_512_mib_is_refused_before_it_is_copied(
    url: str, redis_server: RedisServer, form: str
) -> None:
    run = [sys.executable, "-c", _OVERSIZED, url, form]
    out = subprocess.run(run, capture_output=True, text=True, timeout=120, check=True)
    grown_mib = int(out.stdout.strip())
    assert grown_mib < 64, f"the peak memory grew by {grown_mib} MiB while refusing"
    assert redis_server.cli("KEYS", "*oversized*") == ""
