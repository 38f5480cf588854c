"""Fixtures: a real redis-server on a free loopback port, started and stopped here."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn_redis(
    directory: str, argv: Callable[[int], list[str]], info: Callable[[int], str]
) -> tuple[int, subprocess.Popen[bytes]]:
    """Starts ``argv(port)`` (a redis-server command line) on a free port, logging to
    ``redis.log`` in ``directory``; ``info(port)`` is that server's ``INFO server``.

    The port is drawn free and let go before the server binds it, so another process may
    take it first: a server that exits before answering, or a port answered by another
    server, starts again on another port."""
    log = Path(directory, "redis.log")
    for _ in range(5):
        port = _free_port()
        cmd = [*argv(port), "--logfile", str(log)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline and proc.poll() is None:
            try:
                if f"process_id:{proc.pid}" in info(port):
                    return port, proc
            except subprocess.TimeoutExpired:  # something else holds the port, mute
                break
            time.sleep(0.02)
        proc.kill()
        proc.wait()
    tail = log.read_text()[-2000:] if log.exists() else "(no log)"
    raise RuntimeError(f"redis-server did not start; its log ends:\n{tail}")


def _cli(port: int, *args: str, timeout: float = 30) -> str:
    cmd = ["redis-cli", "-p", str(port), *args]
    out = subprocess.run(cmd, capture_output=True, timeout=timeout)
    return out.stdout.decode().strip()


class RedisServer:
    def __init__(self) -> None:
        if shutil.which("redis-server") is None:
            subprocess.run(["bash", str(REPO / "scripts" / "ensure-redis.sh")], check=True)
        self.dir = tempfile.mkdtemp(prefix="delayq-py-")
        self.port = 0
        self.port, self.proc = spawn_redis(
            self.dir,
            lambda port: [
                "redis-server",
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
            ],
            lambda port: _cli(port, "INFO", "server", timeout=2),
        )

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def cli(self, *args: str) -> str:
        return _cli(self.port, *args)

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
