"""The shared vectors of tests/vectors/: the codec and a round trip through real queues."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import pytest

import delayq
from conftest import REPO, RedisServer

VECTORS = json.loads((REPO / "tests" / "vectors" / "packing.json").read_text())["vectors"]


def test_pack_and_unpack_match_every_vector() -> None:
    assert len(VECTORS) >= 8
    for v in VECTORS:
        ident, value, packed = (bytes.fromhex(v[k]) for k in ("id", "value", "packed"))
        assert delayq.pack_entry(ident, value) == packed, v["name"]
        assert delayq.unpack_entry(packed) == (ident, value), v["name"]


def test_every_vector_value_round_trips_through_a_queue(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.delayed_queue(name)
        for v in VECTORS:
            value = bytes.fromhex(v["value"])
            q.offer(value, 3600)
            assert q.read_all() == [value], v["name"]
            q.clear()
            q.offer(value, 0)
            assert q.take(5) == value, v["name"]


def test_entries_this_binding_stores_are_what_redis_struct_pack_makes(
    redis_server: RedisServer, name: str
) -> None:
    script = (REPO / "tests" / "vectors" / "stored_entries.lua").read_text()
    values = [bytes.fromhex(v["value"]) for v in VECTORS]
    with delayq.Client(redis_server.url) as client:
        q = client.delayed_queue(name)
        for value in values:
            q.offer(value, 3600)
        stored = redis_server.cli("EVAL", script, "1", f"redisson_delay_queue:{{{name}}}")
        q.clear()
    assert stored.splitlines() == ["1 " + hashlib.sha1(v).hexdigest() for v in values]


def test_unpack_rejects_garbage() -> None:
    try:
        delayq.unpack_entry(b"\x08abc")
    except delayq.InvalidArgument:
        pass
    else:
        raise AssertionError("no error")


def test_pack_and_unpack_take_bytes_like_values_and_str_as_utf8() -> None:
    packed = delayq.pack_entry(b"id", "vält")
    assert packed == delayq.pack_entry("id", "vält".encode())
    assert packed == delayq.pack_entry(bytearray(b"id"), memoryview("vält".encode()))
    assert delayq.unpack_entry(packed) == (b"id", "vält".encode())
    assert delayq.unpack_entry(bytearray(packed)) == (b"id", "vält".encode())
    assert delayq.unpack_entry(memoryview(packed)) == (b"id", "vält".encode())
    assert delayq.unpack_entry(delayq.pack_entry("i", "v").decode()) == (b"i", b"v")


BAD_PACKING: dict[str, tuple[Callable[..., object], tuple[object, ...], str]] = {
    "id-int": (
        delayq.pack_entry,
        (5, b"v"),
        "id must be bytes, bytearray, memoryview or str, not int",
    ),
    "id-none": (delayq.pack_entry, (None, b"v"), "id must be bytes, bytearray, memoryview or str"),
    "value-float": (delayq.pack_entry, (b"i", 1.5), "a value must be bytes, bytearray, memoryview"),
    "id-surrogate": (delayq.pack_entry, ("\ud800", b"v"), "id must be valid UTF-8"),
    "value-surrogate": (delayq.pack_entry, (b"i", "\ud800"), "a str value must be valid UTF-8"),
    "id-long": (delayq.pack_entry, (b"i" * 256, b"v"), "over 255 bytes"),
    "packed-list": (delayq.unpack_entry, ([1, 2],), "packed must be bytes, bytearray, memoryview"),
    "packed-garbage-str": (delayq.unpack_entry, ("str",), "undecodable entry"),
}


@pytest.mark.parametrize("case", BAD_PACKING)
def test_pack_and_unpack_refuse_bad_arguments_with_invalid_argument(case: str) -> None:
    call, args, words = BAD_PACKING[case]
    with pytest.raises(delayq.InvalidArgument) as info:
        call(*args)
    assert words in str(info.value), info.value
