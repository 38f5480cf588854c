"""Core's logs reach Python's `logging` under the logger `delayq`: a transfer task that
keeps failing (the queue's key holds another type) is not silent."""

from __future__ import annotations

import logging
import time

import pytest
import redis

import delayq


def test_a_failing_transfer_task_is_logged_as_a_warning(
    url: str, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="delayq")
    # The queue's zset of due times holds a string: every transfer pass fails.
    redis.Redis.from_url(url).set(f"redisson_delay_queue_timeout:{{{name}}}", "a string")
    with delayq.Client(url) as client:
        q = client.delayed_queue(name)  # its transfer task runs while the handle lives

        def logged() -> list[logging.LogRecord]:
            return [
                r
                for r in caplog.records
                if r.name.startswith("delayq")
                and r.levelno >= logging.WARNING
                and "transfer failed" in r.getMessage()
                and name in r.getMessage()
            ]

        deadline = time.monotonic() + 10
        while not logged() and time.monotonic() < deadline:
            time.sleep(0.01)
        q.close()
    records = logged()
    assert records, [r.getMessage() for r in caplog.records]
    assert records[0].name == "delayq.scheduler"
    assert "WRONGTYPE" in records[0].getMessage()


def test_set_log_level_forwards_debug_records(url: str, name: str) -> None:
    got: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got.append(record)

    logger = logging.getLogger("delayq")
    handler = Keep()
    logger.addHandler(handler)
    try:
        delayq.set_log_level(logging.DEBUG)
        with delayq.Client(url) as client:
            q = client.delayed_queue(name)
            q.offer(b"x", 0)
            assert q.take(5) == b"x"
            deadline = time.monotonic() + 10
            while not any(r.levelno == logging.DEBUG for r in got):
                assert time.monotonic() < deadline, "no debug record"
                time.sleep(0.01)
    finally:
        logger.removeHandler(handler)
        delayq.set_log_level(logging.NOTSET)
