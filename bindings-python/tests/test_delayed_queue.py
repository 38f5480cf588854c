"""Every call of the sync DelayedQueue, against a real server."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import delayq
from conftest import RedisServer


def test_offer_returns_server_due_time_and_take_waits(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.delayed_queue(name)
        before = client.server_time_ms()
        due = q.offer("hello", 0.3)
        assert before + 300 <= due <= before + 1300
        assert q.poll() is None
        assert q.take(timeout=5) == b"hello"
        assert client.server_time_ms() >= due


def test_size_contains_remove_read_all_clear(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.delayed_queue(name)
        dues = q.offer_all(
            [
                (b"a", 3600),
                ("b", timedelta(hours=1)),
                (bytearray(b"c"), 3600.5),
                (memoryview(b"b"), 3600),
            ]
        )
        assert len(dues) == 4
        assert q.size() == 4
        assert q.contains(b"b") and not q.contains(b"z")
        assert q.remove("b") and not q.remove(b"z")
        assert q.read_all() == [b"a", b"c", b"b"]
        q.clear()
        assert q.size() == 0
        assert q.name == name


def test_take_times_out_with_none_and_poll(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.delayed_queue(name)
        started = time.monotonic()
        assert q.take(0.2) is None
        assert time.monotonic() - started >= 0.15
        q.offer(b"\x00\xff", 0)
        assert q.take(5) == b"\x00\xff"
        assert q.poll() is None
        stats = q.stats()
        assert (stats.delayed, stats.ready, stats.corrupt) == (0, 0, 0)


def test_iteration_ends_when_a_take_times_out(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.delayed_queue(name)
        q.offer_all([(b"1", 0), (b"2", 0.1), (b"3", 0.2)])
        assert sorted(q.iter(timeout=2)) == [b"1", b"2", b"3"]


def test_ten_threads_offer_and_take_at_once(url: str, name: str) -> None:
    with delayq.Client(url) as client:
        q = client.delayed_queue(name)
        got: list[bytes] = []
        lock = threading.Lock()

        def produce(t: int) -> None:
            for i in range(100):
                q.offer(f"{t}-{i}", (i % 5) / 10)

        def consume() -> None:
            while True:
                v = q.take(2)
                if v is None:
                    return
                with lock:
                    got.append(v)

        threads = [threading.Thread(target=produce, args=(t,)) for t in range(10)]
        threads += [threading.Thread(target=consume) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(got) == sorted(f"{t}-{i}".encode() for t in range(10) for i in range(100))


def test_a_closed_handle_and_client_refuse_calls(url: str, name: str) -> None:
    client = delayq.Client(url)
    q = client.delayed_queue(name)
    q.close()
    for call in (lambda: q.offer(b"x", 1), q.size, q.poll):
        try:
            call()
        except delayq.ClosedError:
            pass
        else:
            raise AssertionError("no ClosedError")
    other = client.delayed_queue(name)
    other.size()
    client.close()
    assert client.closed
    try:
        other.size()
    except delayq.ClosedError:
        pass
    else:
        raise AssertionError("no ClosedError")
    assert "s3cret" not in repr(client)


def test_scheduler_opt_out_leaves_entries_waiting(
    url: str, name: str, redis_server: RedisServer
) -> None:
    with delayq.Client(url) as client:
        q = client.delayed_queue(name, scheduler=False)
        q.offer(b"x", 0)
        time.sleep(0.3)  # nothing to await: this proves nothing moves without a scheduler
        assert redis_server.cli("LLEN", name) == "0"
        mover = client.delayed_queue(name)
        assert mover.take(5) == b"x"
