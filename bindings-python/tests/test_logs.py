"""Core's logs reach Python's `logging` under the logger `delayq`: a transfer task that
keeps failing (the queue's key holds another type) is not silent."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest
import redis

import delayq
import delayq.asyncio


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


def _failing_job(d: delayq.Delivery) -> None:
    raise ValueError(f"cannot process {d.id}")


async def _failing_async_job(d: delayq.asyncio.Delivery) -> None:
    raise ValueError(f"cannot process {d.id}")


@pytest.mark.parametrize("flavour", ["blocking", "asyncio"])
def test_a_failed_handler_is_logged_with_its_traceback(
    url: str, name: str, caplog: pytest.LogCaptureFixture, flavour: str
) -> None:
    """The warning of a failed consume handler carries the traceback, as Python prints it,
    so that the line that failed can be found."""
    caplog.set_level(logging.WARNING, logger="delayq")

    def failures() -> list[str]:
        return [r.getMessage() for r in caplog.records if "handler failed" in r.getMessage()]

    if flavour == "blocking":
        with delayq.Client(url) as client:
            q = client.reliable_queue(name, max_attempts=1)
            q.offer(b"job", 0, id="job-1")
            consumer = threading.Thread(target=q.consume, args=(_failing_job,), daemon=True)
            consumer.start()
            deadline = time.monotonic() + 10
            while not failures() and time.monotonic() < deadline:
                time.sleep(0.01)
            q.close()
            consumer.join(10)
    else:

        async def main() -> None:
            async with delayq.asyncio.Client(url) as client:
                q = client.reliable_queue(name, max_attempts=1)
                await q.offer(b"job", 0, id="job-1")
                consumer = asyncio.ensure_future(q.consume(_failing_async_job))
                deadline = time.monotonic() + 10
                while not failures() and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                consumer.cancel()
                await asyncio.wait([consumer])

        asyncio.run(main())
    assert failures(), [r.getMessage() for r in caplog.records]
    message = failures()[0]
    assert "Traceback (most recent call last)" in message, message
    job = "_failing_job" if flavour == "blocking" else "_failing_async_job"
    assert f"in {job}" in message, message
    assert message.rstrip().endswith("ValueError: cannot process job-1"), message
