"""What type checkers see of the API, checked with mypy --strict on user code."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mypy")

USER_CODE = """
    import asyncio
    from typing import Optional

    import delayq.asyncio
    from typing_extensions import assert_type


    async def main(url: str) -> None:
        client = await delayq.asyncio.Client.connect(url)
        q = client.delayed_queue("t")
        r = client.reliable_queue("r")
        # Awaitable calls are coroutines: asyncio.create_task takes them.
        take: asyncio.Task[Optional[bytes]] = asyncio.create_task(q.take(0.1))
        size: asyncio.Task[int] = asyncio.create_task(q.size())
        got: asyncio.Task[Optional[delayq.asyncio.Delivery]] = asyncio.create_task(r.receive(0.1))
        connecting = asyncio.create_task(delayq.asyncio.Client.connect(url))
        print(await take, await size, await got)
        (await connecting).close()
        client.close()


    def blocking(url: str) -> None:
        with delayq.Client(url) as client:
            for d in client.reliable_queue("r").iter(0.1):
                assert_type(d, delayq.Delivery)
                d.ack()
        packed = delayq.pack_entry("id", "value")
        assert_type(delayq.unpack_entry(bytearray(packed)), tuple[bytes, bytes])
"""


def test_awaitable_calls_type_as_coroutines(tmp_path: Path) -> None:
    user = tmp_path / "user.py"
    user.write_text(textwrap.dedent(USER_CODE))
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(user)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
