"""The shared vectors of tests/vectors/: the codec and a round trip through real queues."""

from __future__ import annotations

import json

import delayq
from conftest import REPO

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


def test_unpack_rejects_garbage() -> None:
    try:
        delayq.unpack_entry(b"\x08abc")
    except delayq.InvalidArgument:
        pass
    else:
        raise AssertionError("no error")
