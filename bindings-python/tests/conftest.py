"""Fixtures: a real redis-server on a free loopback port, started and stopped here."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    def __init__(self) -> None:
        if shutil.which("redis-server") is None:
            subprocess.run(["bash", str(REPO / "scripts" / "ensure-redis.sh")], check=True)
        self.port = _free_port()
        self.dir = tempfile.mkdtemp(prefix="delayq-py-")
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.cli("PING") == "PONG":
                return
            time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def cli(self, *args: str) -> str:
        out = subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True)
        return out.stdout.decode().strip()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    yield server
    server.stop()


@pytest.fixture
def url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def name() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def cli() -> str:
    """The Rust CLI, built by scripts/test-python.sh (or DELAYQ_CLI)."""
    path = os.environ.get("DELAYQ_CLI") or str(REPO / "target" / "debug" / "delayq")
    if not os.path.exists(path):
        subprocess.run(["cargo", "build", "-q", "-p", "delayq-cli"], cwd=REPO, check=True)
    return path
